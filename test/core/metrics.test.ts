import t from 'tap';
import { startGateway } from '../helpers/gateway.ts';
import { GatewayMetrics } from '../../core/gateway/metrics.ts';
import { secretMatcher } from '../../core/identity/api-tokens.ts';
import { buildTestApp, createKey } from '../helpers/app.ts';
import { assertEnvelope } from '../helpers/envelope.ts';

t.test('GET /metrics exposes gateway metrics in Prometheus format', async (t) => {
  const gw = await startGateway(t);
  gw.primary.enqueue({ kind: 'status', status: 500 }, { kind: 'status', status: 500 });
  await gw.client.chat.completions.create({ model: 'duo', messages: [{ role: 'user', content: 'hi' }] });
  await gw.client.chat.completions.create({ model: 'mock-small', messages: [{ role: 'user', content: 'hi' }], stream: true }).then(async (s) => {
    for await (const _ of s);
  });
  const response = await gw.test.app.inject({ method: 'GET', url: '/metrics' });
  t.equal(response.statusCode, 200);
  t.match(response.headers['content-type'], /text\/plain/);
  const body = response.body;
  t.match(body, /svc_gateway_requests_total\{endpoint="\/v1\/chat\/completions",model="duo",provider="(primary|secondary)",status="200"\} 1\n/);
  t.match(body, /svc_upstream_errors_total\{provider="primary",kind="server"\} 2\n/);
  t.match(body, /svc_gateway_request_duration_seconds_bucket/);
  t.match(body, /svc_gateway_time_to_first_token_seconds_count\{model="mock-small",provider="mock"\} 1\n/);
  t.match(body, /svc_gateway_request_duration_seconds_count\{endpoint="\/v1\/chat\/completions",model="mock-small",provider="mock"\} 1\n/);
  t.match(body, /svc_gateway_requests_total\{endpoint="\/v1\/chat\/completions",model="mock-small",provider="mock",status="200"\} 1\n/);
  t.notMatch(body, /svc_gateway_requests_total\{endpoint="\/v1\/chat\/completions",model="none"/, 'neither call, streamed or not, is counted again when its response ends');
  t.match(body, /svc_gateway_tokens_total\{model="duo",kind="input"\}/);
  t.match(body, /svc_request_log_queue_depth/);
  t.match(body, /# TYPE svc_limiter_rejections_total counter\n/);
  t.match(body, /svc_gateway_cost_usd_total\{model="duo"\} \d/);
});

t.test('GET /metrics needs the operator token when one is configured: missing or wrong is 401, right is 200', async (t) => {
  const token = 'metrics-token-0123456789';
  const test = await buildTestApp(t, { plugins: {}, config: { metrics: { bearerToken: token } } });
  const scrape = (authorization?: string) => test.app.inject({ method: 'GET', url: '/metrics', headers: authorization ? { authorization } : {} });
  const wrong = [undefined, `Bearer ${token.slice(0, -1)}X`, `Bearer ${token.slice(0, -1)}`, `Bearer ${token}0`, `bearer ${token}`, `Basic ${token}`, token, 'Bearer '];
  for (const authorization of wrong) {
    assertEnvelope(t, await scrape(authorization), 401, { code: 'invalid_metrics_token' });
  }
  const ok = await scrape(`Bearer ${token}`);
  t.equal(ok.statusCode, 200);
  t.match(ok.body, /svc_gateway_requests_total/);
});

t.test('a secret matcher accepts exactly its secret and refuses any other, of any length, without throwing', async (t) => {
  const matches = secretMatcher('Bearer s3cret-token');
  t.equal(matches('Bearer s3cret-token'), true);
  for (const given of [undefined, '', 'Bearer s3cret-tokeN', 'Bearer s3cret-toke', 'Bearer s3cret-token ', 'x'.repeat(10_000)]) {
    t.equal(matches(given), false, JSON.stringify(given?.slice(0, 30)));
  }
});

t.test('every /v1 response is counted once by status, refusals before and at admission included', async (t) => {
  const gw = await startGateway(t);
  const { key: limited } = await createKey(gw.test, { name: 'one a minute', scopes: ['inference'], rateLimits: { requestsPerMinute: 1 } });
  const chat = (token: string | null, body: unknown, headers: Record<string, string> = {}) =>
    gw.test.call('POST', '/v1/chat/completions', { token, body, headers: { 'content-type': 'application/json', ...headers } });
  const hi = { model: 'mock-small', messages: [{ role: 'user', content: 'hi' }] };
  const statuses = [
    (await chat(gw.key, hi)).statusCode,
    (await chat('svc_live_not-a-key', hi)).statusCode,
    (await chat(gw.key, hi, { origin: 'https://page.example' })).statusCode,
    (await chat(gw.key, { ...hi, model: 'no-such-model' })).statusCode,
    (await chat(gw.key, { ...hi, temperature: 'hot' })).statusCode,
    (await chat(gw.key, JSON.stringify({ ...hi, pad: 'x'.repeat(11 * 1024 * 1024) }))).statusCode,
    (await chat(limited, hi)).statusCode,
    (await chat(limited, hi)).statusCode,
    (await gw.test.call('GET', '/v1/models', { token: gw.key })).statusCode,
    (await gw.test.call('GET', '/v1/no-such-route', { token: gw.key })).statusCode,
  ];
  t.same(statuses, [200, 401, 403, 404, 400, 413, 200, 429, 200, 404]);
  const text = (await gw.test.app.inject({ method: 'GET', url: '/metrics' })).body;
  const count = (labels: string) => Number(new RegExp(`svc_gateway_requests_total\\{${labels}\\} (\\d+)\\n`).exec(text)?.[1] ?? 0);
  const refused = (status: number) => count(`endpoint="/v1/chat/completions",model="none",provider="none",status="${status}"`);
  t.equal(count('endpoint="/v1/chat/completions",model="mock-small",provider="mock",status="200"'), 2, 'the calls, with their model and provider');
  t.same([401, 403, 404, 400, 413, 429].map(refused), [1, 1, 1, 1, 1, 1], 'each refusal once');
  t.equal(refused(200), 0, 'a call counted with its model is not counted again by its response');
  t.equal(count('endpoint="/v1/models",model="none",provider="none",status="200"'), 1);
  t.equal(count('endpoint="unmatched",model="none",provider="none",status="404"'), 1);
});

t.test('running totals are counters and Node process metrics are exposed', async (t) => {
  const test = await buildTestApp(t);
  const text = (await test.app.inject({ method: 'GET', url: '/metrics' })).body;
  for (const total of ['svc_request_log_dropped_rows_total', 'svc_request_log_failed_flushes_total']) {
    t.match(text, new RegExp(`# TYPE ${total} counter\\n${total} 0\\n`), total);
  }
  t.match(text, /# TYPE svc_request_log_queue_depth gauge\n/, 'a level stays a gauge');
  t.match(text, /# TYPE process_cpu_seconds_total counter\n/);
  t.match(text, /# TYPE nodejs_eventloop_lag_seconds gauge\n/);
  t.match(text, /# TYPE nodejs_heap_size_used_bytes gauge\n/);
});

t.test('per-call counters add up across calls: statuses, token kinds and cost by model', async (t) => {
  const metrics = new GatewayMetrics();
  const usage = { inputTokens: 10, cachedInputTokens: 4, cacheWriteTokens: 0, outputTokens: 7, reasoningTokens: 0, estimated: false };
  const outcome = { status: 200, errorCode: null, usage, provider: 'p', upstreamModel: 'm', attempts: 1, latencyMs: 12, ttftMs: null };
  metrics.observeCall('/v1/chat/completions', 'm', outcome);
  metrics.observeCall('/v1/chat/completions', 'm', outcome);
  metrics.observeCall('/v1/chat/completions', 'm', { ...outcome, status: 429, usage: null });
  metrics.observeCall('/v1/chat/completions', 'other', { ...outcome, status: 502, usage: null });
  metrics.observeCost('m', 1_500_000n);
  metrics.observeCost('m', 250_000n);
  const text = await metrics.registry.metrics();
  t.match(text, /svc_gateway_requests_total\{endpoint="\/v1\/chat\/completions",model="m",provider="p",status="200"\} 2\n/);
  t.match(text, /svc_gateway_requests_total\{endpoint="\/v1\/chat\/completions",model="m",provider="p",status="429"\} 1\n/);
  t.match(text, /svc_gateway_requests_total\{endpoint="\/v1\/chat\/completions",model="other",provider="p",status="502"\} 1\n/);
  t.match(text, /svc_gateway_tokens_total\{model="m",kind="input"\} 20\n/);
  t.match(text, /svc_gateway_tokens_total\{model="m",kind="output"\} 14\n/);
  t.match(text, /svc_gateway_tokens_total\{model="m",kind="cached_input"\} 8\n/);
  t.notMatch(text, /svc_gateway_tokens_total\{model="other"/, 'no token series for a model that used none');
  t.match(text, /svc_gateway_cost_usd_total\{model="m"\} 1\.75\n/);
  t.match(text, /svc_gateway_request_duration_seconds_count\{endpoint="\/v1\/chat\/completions",model="m",provider="p"\} 3\n/);
});

t.test('scraping twice reports the same totals, not doubled ones', async (t) => {
  const metrics = new GatewayMetrics();
  metrics.observeCall('/v1/chat/completions', 'm', { status: 200, errorCode: null, usage: null, provider: null, upstreamModel: null, attempts: 1, latencyMs: 1, ttftMs: null });
  await metrics.registry.metrics();
  t.match(await metrics.registry.metrics(), /svc_gateway_requests_total\{endpoint="\/v1\/chat\/completions",model="m",provider="none",status="200"\} 1\n/);
});

t.test('a call observed with its response marks it, so the response is not counted again', async (t) => {
  const metrics = new GatewayMetrics();
  const response = { gatewayCallCounted: false };
  metrics.observeCall('/v1/chat/completions', 'm', { status: 200, errorCode: null, usage: null, provider: 'p', upstreamModel: null, attempts: 1, latencyMs: 1, ttftMs: null }, response);
  t.equal(response.gatewayCallCounted, true);
  metrics.observeResponse('/v1/models', 401);
  const text = await metrics.registry.metrics();
  t.match(text, /svc_gateway_requests_total\{endpoint="\/v1\/models",model="none",provider="none",status="401"\} 1\n/);
});

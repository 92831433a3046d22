import t from 'tap';
import { startGateway } from '../helpers/gateway.ts';
import { GatewayMetrics } from '../../core/gateway/metrics.ts';
import { secretMatcher } from '../../core/identity/api-tokens.ts';
import { buildTestApp } from '../helpers/app.ts';
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
  t.match(body, /svc_gateway_requests_total\{endpoint="\/v1\/chat\/completions",model="duo",status="2xx"\} 1\n/);
  t.match(body, /svc_upstream_errors_total\{provider="primary",kind="server"\} 2\n/);
  t.match(body, /svc_gateway_request_duration_seconds_bucket/);
  t.match(body, /svc_gateway_time_to_first_token_seconds_count\{model="mock-small"\} 1\n/);
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

t.test('per-call counters add up across calls: status classes, token kinds and cost by model', async (t) => {
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
  t.match(text, /svc_gateway_requests_total\{endpoint="\/v1\/chat\/completions",model="m",status="2xx"\} 2\n/);
  t.match(text, /svc_gateway_requests_total\{endpoint="\/v1\/chat\/completions",model="m",status="4xx"\} 1\n/);
  t.match(text, /svc_gateway_requests_total\{endpoint="\/v1\/chat\/completions",model="other",status="5xx"\} 1\n/);
  t.match(text, /svc_gateway_tokens_total\{model="m",kind="input"\} 20\n/);
  t.match(text, /svc_gateway_tokens_total\{model="m",kind="output"\} 14\n/);
  t.match(text, /svc_gateway_tokens_total\{model="m",kind="cached_input"\} 8\n/);
  t.notMatch(text, /svc_gateway_tokens_total\{model="other"/, 'no token series for a model that used none');
  t.match(text, /svc_gateway_cost_usd_total\{model="m"\} 1\.75\n/);
  t.match(text, /svc_gateway_request_duration_seconds_count\{endpoint="\/v1\/chat\/completions",model="m"\} 3\n/);
});

t.test('scraping twice reports the same totals, not doubled ones', async (t) => {
  const metrics = new GatewayMetrics();
  metrics.observeCall('/v1/chat/completions', 'm', { status: 200, errorCode: null, usage: null, provider: null, upstreamModel: null, attempts: 1, latencyMs: 1, ttftMs: null });
  await metrics.registry.metrics();
  t.match(await metrics.registry.metrics(), /svc_gateway_requests_total\{endpoint="\/v1\/chat\/completions",model="m",status="2xx"\} 1\n/);
});

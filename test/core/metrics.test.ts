import t from 'tap';
import { startGateway } from '../helpers/gateway.ts';

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
  t.match(body, /svc_gateway_requests_total\{endpoint="\/v1\/chat\/completions",model="duo",status="2xx"\} 1/);
  t.match(body, /svc_upstream_errors_total\{provider="primary",kind="server"\} 2/);
  t.match(body, /svc_gateway_request_duration_seconds_bucket/);
  t.match(body, /svc_gateway_time_to_first_token_seconds_count\{model="mock-small"\} 1/);
  t.match(body, /svc_gateway_tokens_total\{model="duo",kind="input"\}/);
  t.match(body, /svc_request_log_queue_depth/);
  t.match(body, /svc_limiter_rejections_total|svc_gateway_cost_usd_total/);
});

t.test('GET /metrics needs the operator token when one is configured', async (t) => {
  const gw = await startGateway(t, { config: { metrics: { bearerToken: 'metrics-token-0123456789' } } });
  t.equal((await gw.test.app.inject({ method: 'GET', url: '/metrics' })).statusCode, 401);
  const ok = await gw.test.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: 'Bearer metrics-token-0123456789' } });
  t.equal(ok.statusCode, 200);
});

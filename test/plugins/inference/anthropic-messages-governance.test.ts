import t from 'tap';
import { GatewayCallsPoint, type GatewayCalls } from '../../../core/gateway/gateway-calls.ts';
import { InputGuardsPoint } from '../../../core/gateway/input-guards.ts';
import type { Authenticator } from '../../../core/identity/authenticator.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { definePlugin } from '../../../core/kernel/plugin.ts';
import { startGovernedGateway } from './governed-gateway.ts';

/**
 * `POST /v1/messages` is governed exactly as chat: the same reservation, rate-limit headers, request
 * log row and ledger charge, to the micro-dollar (TEST_PRICES: $1 per million input tokens, $2 per
 * million output tokens, so 14 in and 2 out cost 14 + 4 = 18 µ$), the same input guards, and the
 * same call from code.
 */

t.setTimeout(240_000);

let calls: GatewayCalls | undefined;
let authenticator: Authenticator | undefined;
const testPlugin = definePlugin({
  name: 'test-messages-governance',
  description: 'a guard refusing "SECRET" for keys named guarded…, and calls from code',
  register({ extensions }) {
    extensions.contribute(InputGuardsPoint, {
      forCall: (credential) =>
        credential.kind === 'key' && credential.keyName.startsWith('guarded')
          ? { check: (text) => (text.includes('SECRET') ? { action: 'block', rule: 'no-secrets' } : { action: 'allow' }) }
          : null,
    });
  },
  async start({ extensions, container }) {
    calls = extensions.get(GatewayCallsPoint);
    authenticator = container.resolve(Tokens.Authenticator);
  },
});

const g = await startGovernedGateway(t, [testPlugin]);
const { id, key } = await g.newKey({ name: 'messages' });
t.equal((await g.test.call('PATCH', `/client/keys/${id}`, { body: { rateLimits: { requestsPerMinute: 100, tokensPerMinute: 100_000 } } })).statusCode, 200);
t.beforeEach(() => g.upstream.reset());

const messagesBody = { model: 'solo', max_tokens: 50, messages: [{ role: 'user', content: 'hello' }] };
const post = (body: unknown, headers: Record<string, string> = {}) =>
  g.test.app.inject({ method: 'POST', url: '/v1/messages', headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', ...headers }, payload: body as object });

t.test('a JSON call is logged under /v1/messages and charged what chat is charged for the same usage', async (t) => {
  const before = await g.charged();
  g.upstream.enqueue({ kind: 'reply', content: 'Hi.', usage: { prompt_tokens: 14, completion_tokens: 2 } });
  const response = await post(messagesBody);
  t.equal(response.statusCode, 200);
  t.equal(response.json().type, 'message');
  const row = await g.logRow(String(response.headers['x-request-id']));
  t.match(row, { endpoint: '/v1/messages', model: 'solo', provider: 'primary', status_code: 200, input_tokens: 14, output_tokens: 2 });
  t.equal(BigInt(row.cost_micros), 18n);
  t.equal((await g.charged()) - before, 18n, 'the ledger agrees to the micro-dollar');

  g.upstream.enqueue({ kind: 'reply', content: 'Hi.', usage: { prompt_tokens: 14, completion_tokens: 2 } });
  const chat = await g.test.call('POST', '/v1/chat/completions', { token: key, body: { model: 'solo', max_tokens: 50, messages: messagesBody.messages } });
  t.equal(BigInt((await g.logRow(String(chat.headers['x-request-id']))).cost_micros), 18n, 'chat costs the same');
});

t.test('a streamed call is logged and charged on the usage its stream reported', async (t) => {
  const before = await g.charged();
  g.upstream.enqueue({ kind: 'reply', content: 'one two', usage: { prompt_tokens: 14, completion_tokens: 2 } });
  const response = await post({ ...messagesBody, stream: true });
  t.equal(response.statusCode, 200);
  t.match(response.headers['content-type'], /text\/event-stream/);
  t.match(response.body, /event: message_stop\n/);
  const row = await g.logRow(String(response.headers['x-request-id']));
  t.match(row, { endpoint: '/v1/messages', status_code: 200, input_tokens: 14, output_tokens: 2 });
  t.equal(BigInt(row.cost_micros), 18n);
  t.equal((await g.charged()) - before, 18n);
});

t.test('a stream cut after its first content is logged as a 502 and billed on what was sent', async (t) => {
  g.upstream.enqueue({ kind: 'stream-cut', afterChunks: 2, content: 'one two three four' });
  const response = await post({ ...messagesBody, stream: true });
  t.match(response.body, /event: error\ndata: \{"type":"error","error":\{"type":"api_error"/);
  const row = await g.logRow(String(response.headers['x-request-id']));
  t.match(row, { endpoint: '/v1/messages', status_code: 502, error_code: 'upstream_error' });
  t.ok(BigInt(row.cost_micros) > 0n, 'the tokens sent are billed');
});

t.test('JSON, streamed and refused answers carry the rate-limit headers', async (t) => {
  g.upstream.enqueue({ kind: 'reply', content: 'a' }, { kind: 'reply', content: 'b' });
  const json = await post(messagesBody);
  const streamed = await post({ ...messagesBody, stream: true });
  const refused = await post({ ...messagesBody, thinking: { type: 'enabled', budget_tokens: 1024 } });
  for (const response of [json, streamed, refused]) t.equal(response.headers['x-ratelimit-limit-requests'], '100');
  t.equal(refused.statusCode, 400);
  t.same(refused.json().error.type, 'invalid_request_error');
});

t.test('an upstream’s 400 is the caller’s error in Anthropic’s shape, logged with its code, and costs nothing', async (t) => {
  const before = await g.charged();
  g.upstream.enqueue({ kind: 'status', status: 400, message: 'maximum context length exceeded' });
  const response = await post(messagesBody);
  t.equal(response.statusCode, 400);
  t.match(response.json(), { type: 'error', error: { type: 'invalid_request_error', message: /maximum context length/ } });
  const row = await g.logRow(String(response.headers['x-request-id']));
  t.match(row, { endpoint: '/v1/messages', status_code: 400, error_code: 'upstream_rejected_request' });
  t.equal((await g.charged()) - before, 0n);
});

t.test('a guardrail reads the system prompt too, and a blocked call is refused in Anthropic’s shape for nothing', async (t) => {
  const guarded = await g.newKey({ name: 'guarded key' });
  const before = await g.charged();
  const response = await g.test.app.inject({
    method: 'POST',
    url: '/v1/messages',
    headers: { 'x-api-key': guarded.key },
    payload: { ...messagesBody, system: 'The SECRET is 42.' },
  });
  t.equal(response.statusCode, 422);
  t.match(response.json(), { type: 'error', error: { type: 'invalid_request_error', message: /no-secrets/ } });
  t.equal(g.upstream.requests.length, 0, 'nothing went upstream');
  t.match(await g.logRow(String(response.headers['x-request-id'])), { endpoint: '/v1/messages', status_code: 422, error_code: 'guardrail_blocked' });
  t.equal(await g.charged(), before, 'no charge');
});

t.test('a call from code answers a Message, and its errors in Anthropic’s shape', async (t) => {
  const credential = await authenticator!.keyCredentialById(id);
  g.upstream.enqueue({ kind: 'reply', content: 'From a job.' });
  const answer = await calls!.run(credential, { endpoint: '/v1/messages', body: messagesBody, requestId: 'req_job_messages' });
  t.equal(answer.status, 200);
  t.match(answer.body, { type: 'message', model: 'solo', content: [{ type: 'text', text: 'From a job.' }] });
  t.match(await g.logRow('req_job_messages'), { endpoint: '/v1/messages', status_code: 200 });
  const refused = await calls!.run(credential, { endpoint: '/v1/messages', body: { ...messagesBody, model: 'nope' } });
  t.equal(refused.status, 404);
  t.match(refused.body, { type: 'error', error: { type: 'not_found_error', message: /"nope"/ } });
});

t.test('after a mix of calls the ledger, the request log and the usage report agree to the micro-dollar', async (t) => {
  const mixed = await g.newKey({ name: 'messages mix' });
  const before = await g.charged();
  const send = (body: unknown) => g.test.app.inject({ method: 'POST', url: '/v1/messages', headers: { 'x-api-key': mixed.key }, payload: body as object });
  g.upstream.enqueue(
    { kind: 'reply', content: 'one', usage: { prompt_tokens: 14, completion_tokens: 2 } },
    { kind: 'reply', content: 'two three', usage: { prompt_tokens: 30, completion_tokens: 7 } },
    { kind: 'stream-cut', afterChunks: 2, content: 'four five six seven' },
    { kind: 'status', status: 400, message: 'maximum context length exceeded' },
  );
  t.equal((await send(messagesBody)).statusCode, 200);
  t.equal((await send({ ...messagesBody, stream: true })).statusCode, 200);
  t.match((await send({ ...messagesBody, stream: true })).body, /event: error/);
  t.equal((await send(messagesBody)).statusCode, 400);
  await g.flush();
  const { rows } = await g.db.query<{ calls: number; total: string }>(
    "SELECT count(*)::int AS calls, COALESCE(sum(cost_micros), 0)::text AS total FROM request_logs WHERE key_id = $1 AND endpoint = '/v1/messages'",
    [mixed.id],
  );
  t.equal(rows[0]?.calls, 4, 'every call is logged');
  const logged = BigInt(rows[0]!.total);
  // 14 + 2×2 = 18 µ$ and 30 + 7×2 = 44 µ$, plus the cut stream's counted input and sent output; the 400 costs nothing.
  t.ok(logged > 62n, `the cut stream is billed too (${logged} µ$)`);
  t.equal((await g.charged()) - before, logged, 'the ledger');
  const report = (await g.test.call('GET', `/client/usage?keyId=${mixed.id}`)).json() as { totals: { requests: number; costUsd: number } };
  t.equal(BigInt(Math.round(report.totals.costUsd * 1e6)), logged, 'the usage report');
});

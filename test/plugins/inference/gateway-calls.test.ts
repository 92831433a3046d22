import t from 'tap';
import type { GatewayCalls } from '../../../core/gateway/gateway-calls.ts';
import { GatewayCallsPoint } from '../../../core/gateway/gateway-calls.ts';
import type { Authenticator } from '../../../core/identity/authenticator.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { definePlugin } from '../../../core/kernel/plugin.ts';
import { startGovernedGateway } from './governed-gateway.ts';

/**
 * A job-style caller: code with no HTTP request that runs /v1 calls for a key through the
 * GatewayCalls service, holding only the key's id. Limits, money and the request log must come
 * out exactly as over HTTP.
 */

t.setTimeout(240_000);

let calls: GatewayCalls | undefined;
let authenticator: Authenticator | undefined;
const jobPlugin = definePlugin({
  name: 'test-jobs',
  description: 'runs gateway calls from code, as batches will',
  async start({ extensions, container }) {
    calls = extensions.get(GatewayCallsPoint);
    authenticator = container.resolve(Tokens.Authenticator);
  },
});

const g = await startGovernedGateway(t, [jobPlugin]);
const chatBody = { model: 'solo', messages: [{ role: 'user', content: 'hello' }], max_tokens: 50 };
t.beforeEach(() => g.upstream.reset());

t.test('a job runs a chat and an embeddings call for a key it knows by id', async (t) => {
  const { id } = await g.newKey({ name: 'job key' });
  const credential = await authenticator!.keyCredentialById(id);
  const chat = await calls!.run(credential, { endpoint: '/v1/chat/completions', body: chatBody, requestId: 'req_job_chat_1' });
  t.equal(chat.status, 200);
  t.equal((chat.body as any).object, 'chat.completion');
  t.equal((chat.body as any).model, 'solo');
  t.equal(chat.headers['x-svc-provider'], 'primary');
  const embedded = await calls!.run(credential, { endpoint: '/v1/embeddings', body: { model: 'embed', input: ['a', 'b'] } });
  t.equal(embedded.status, 200);
  t.equal((embedded.body as any).data.length, 2);
  t.same(calls!.endpoints(), [
    'POST /v1/chat/completions',
    'POST /v1/embeddings',
    'POST /v1/responses',
    'POST /v1/images/generations',
    'POST /v1/audio/speech',
    'POST /v1/audio/transcriptions',
    'POST /v1/messages',
    'POST /v1/evaluate',
  ]);
  const row = await g.logRow('req_job_chat_1');
  t.equal(row.key_id, id, 'the request log names the key');
  t.equal(row.endpoint, '/v1/chat/completions');
  t.equal(row.status_code, 200);
});

t.test('money: a job call costs, logs and charges exactly what the same call over HTTP does', async (t) => {
  const overHttp = await g.newKey({ name: 'http key' });
  const byJob = await g.newKey({ name: 'job key 2' });
  const before = await g.charged();
  const http = await g.test.call('POST', '/v1/chat/completions', { token: overHttp.key, body: chatBody });
  t.equal(http.statusCode, 200);
  const job = await calls!.run(await authenticator!.keyCredentialById(byJob.id), { endpoint: '/v1/chat/completions', body: chatBody, requestId: 'req_job_money' });
  t.equal(job.status, 200);
  const httpRow = await g.logRow(String(http.headers['x-request-id']));
  const jobRow = await g.logRow('req_job_money');
  t.ok(BigInt(httpRow.cost_micros) > 0n, 'the call cost something');
  t.equal(BigInt(jobRow.cost_micros), BigInt(httpRow.cost_micros), 'the same cost');
  t.same([jobRow.input_tokens, jobRow.output_tokens], [httpRow.input_tokens, httpRow.output_tokens], 'the same usage');
  t.equal((await g.charged()) - before, BigInt(httpRow.cost_micros) * 2n, 'the ledger charged both, to the micro-dollar');
});

t.test('limits: the key’s requests per minute hold for job calls, refused as an answer with the rate-limit headers', async (t) => {
  const { id } = await g.newKey({ name: 'job rpm 2' });
  t.equal((await g.test.call('PATCH', `/client/keys/${id}`, { body: { rateLimits: { requestsPerMinute: 2 } } })).statusCode, 200);
  const credential = await authenticator!.keyCredentialById(id);
  const first = await calls!.run(credential, { endpoint: '/v1/chat/completions', body: chatBody });
  t.equal(first.status, 200);
  t.equal(first.headers['x-ratelimit-limit-requests'], '2');
  t.equal((await calls!.run(credential, { endpoint: '/v1/embeddings', body: { model: 'embed', input: 'x' } })).status, 200);
  const refused = await calls!.run(credential, { endpoint: '/v1/chat/completions', body: chatBody });
  t.equal(refused.status, 429);
  t.equal((refused.body as any).error.code, 'rate_limit_exceeded');
  t.equal(refused.headers['x-ratelimit-remaining-requests'], '0');
  t.ok(refused.headers['retry-after'], 'retry-after');
});

t.test('errors come back as answers in the envelope, never thrown', async (t) => {
  const { id } = await g.newKey({ name: 'job errors' });
  const credential = await authenticator!.keyCredentialById(id);
  const unknownModel = await calls!.run(credential, { endpoint: '/v1/chat/completions', body: { ...chatBody, model: 'nope' } });
  t.equal(unknownModel.status, 404);
  t.equal((unknownModel.body as any).error.param, 'model');
  const streamed = await calls!.run(credential, { endpoint: '/v1/chat/completions', body: { ...chatBody, stream: true } });
  t.equal(streamed.status, 400);
  t.equal((streamed.body as any).error.param, 'stream');
  const unknownEndpoint = await calls!.run(credential, { endpoint: '/v1/nothing', body: {} });
  t.equal(unknownEndpoint.status, 404);
  t.equal((unknownEndpoint.body as any).error.code, 'route_not_found');
  g.upstream.enqueue({ kind: 'status', status: 500 });
  const failed = await calls!.run(credential, { endpoint: '/v1/chat/completions', body: chatBody });
  t.equal(failed.status, 502);
  t.equal((failed.body as any).error.code, 'upstream_error');
  t.equal(g.upstream.requests.length, 1, 'only the last call went upstream');
});

t.test('a caller that aborts ends the call as a client going away', async (t) => {
  const { id } = await g.newKey({ name: 'job abort' });
  const controller = new AbortController();
  g.upstream.enqueue({ kind: 'hang' });
  const pending = calls!.run(await authenticator!.keyCredentialById(id), { endpoint: '/v1/chat/completions', body: chatBody, signal: controller.signal, requestId: 'req_job_abort' });
  await g.upstream.arrived();
  controller.abort();
  const answer = await pending;
  t.equal(answer.status, 499);
  t.equal((await g.logRow('req_job_abort')).status_code, 499);
});

t.test('a key’s credential is rebuilt only while authentication would accept the key', async (t) => {
  const { id } = await g.newKey({ name: 'to revoke' });
  await authenticator!.keyCredentialById(id);
  t.equal((await g.test.call('DELETE', `/client/keys/${id}`)).statusCode, 200);
  await t.rejects(authenticator!.keyCredentialById(id), { code: 'key_revoked' }, 'revoked');
  const paused = await g.newKey({ name: 'to disable' });
  t.equal((await g.test.call('PATCH', `/client/keys/${paused.id}`, { body: { disabled: true } })).statusCode, 200);
  await t.rejects(authenticator!.keyCredentialById(paused.id), { code: 'key_disabled' }, 'disabled');
  await t.rejects(authenticator!.keyCredentialById('00000000-0000-4000-8000-000000000000'), { code: 'invalid_api_key' }, 'unknown id');
  await t.rejects(authenticator!.keyCredentialById('not-a-uuid'), { code: 'invalid_api_key' }, 'not an id at all');
});

t.test('a key made by a key that is paused cannot be rebuilt either', async (t) => {
  const maker = await g.newKey({ name: 'maker', scopes: ['inference', 'keys:write'] });
  const made = await g.test.call('POST', '/client/keys', { token: maker.key, body: { name: 'made', scopes: ['inference'] } });
  t.equal(made.statusCode, 201);
  const madeId = made.json().id as string;
  await authenticator!.keyCredentialById(madeId);
  t.equal((await g.test.call('PATCH', `/client/keys/${maker.id}`, { body: { disabled: true } })).statusCode, 200);
  await t.rejects(authenticator!.keyCredentialById(madeId), { code: 'key_disabled' }, 'the maker is paused');
});

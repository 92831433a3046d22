import t from 'tap';
import { startGovernedGateway } from './governed-gateway.ts';

/** Every answer of the call path carries the caller's rate-limit headers: streamed, JSON and errors alike. */

t.setTimeout(240_000);

const g = await startGovernedGateway(t);
const { id, key } = await g.newKey({ name: 'limited' });
t.equal((await g.test.call('PATCH', `/client/keys/${id}`, { body: { rateLimits: { requestsPerMinute: 5, tokensPerMinute: 100_000 } } })).statusCode, 200);
// 5 a minute: one request comes back every 12 s, far longer than two answers take on a loaded machine,
// so a refill cannot hide a request a refusal took (nor fake one).
const chatBody = { model: 'solo', messages: [{ role: 'user', content: 'hello' }], max_tokens: 50 };
const LIMIT_HEADERS = [
  'x-ratelimit-limit-requests',
  'x-ratelimit-remaining-requests',
  'x-ratelimit-reset-requests',
  'x-ratelimit-limit-tokens',
  'x-ratelimit-remaining-tokens',
  'x-ratelimit-reset-tokens',
];
const limitHeadersOf = (headers: Record<string, unknown>) => LIMIT_HEADERS.filter((name) => headers[name] !== undefined);

t.test('a streamed chat carries them with its event stream', async (t) => {
  const response = await g.test.call('POST', '/v1/chat/completions', { token: key, body: { ...chatBody, stream: true } });
  t.equal(response.statusCode, 200);
  t.match(response.headers['content-type'], /text\/event-stream/);
  t.same(limitHeadersOf(response.headers), LIMIT_HEADERS);
  t.equal(response.headers['x-ratelimit-limit-requests'], '5');
});

t.test('an upstream failure after admission carries them', async (t) => {
  g.upstream.enqueue({ kind: 'status', status: 500 });
  const response = await g.test.call('POST', '/v1/embeddings', { token: key, body: { model: 'embed', input: 'x' } });
  t.equal(response.statusCode, 502);
  t.same(limitHeadersOf(response.headers), LIMIT_HEADERS);
  t.ok(Number(response.headers['x-ratelimit-remaining-requests']) < 5, 'the call counted');
});

t.test('a 400 before admission carries them, read without consuming', async (t) => {
  const before = await g.test.call('POST', '/v1/embeddings', { token: key, body: { model: 'embed', input: 'x', encoding_format: 'int8' } });
  const after = await g.test.call('POST', '/v1/embeddings', { token: key, body: { model: 'embed', input: 'x', encoding_format: 'int8' } });
  t.equal(after.statusCode, 400);
  t.same(limitHeadersOf(after.headers), LIMIT_HEADERS);
  t.ok(Number(after.headers['x-ratelimit-remaining-requests']) >= Number(before.headers['x-ratelimit-remaining-requests']), 'a refused body took nothing');
});

import type { ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { request } from 'undici';
import { startGovernedGateway } from './governed-gateway.ts';

/**
 * Over a real connection: a /v1 call watches its response for the client going away only while
 * the call runs. When the response finishes, the call has left no listener of its own on it: a
 * JSON answer carries exactly what a POST answered by a route with no call carries (Fastify's
 * own), a stream (written by the call itself) none. A listener kept until the response closed,
 * `once`'s wrapper above all, kept every call's objects alive into the old generation
 * (plugins/inference/README.md).
 */
t.setTimeout(120_000);

const g = await startGovernedGateway(t);
const { app } = g.test;
await app.listen({ port: 0, host: '127.0.0.1' });
const origin = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
const { key } = await g.newKey();

/** The number of 'close' listeners on each response as it finished, by request path and method. */
const atFinish: Array<{ what: string; listeners: number }> = [];
app.server.on('request', (incoming: { method?: string; url?: string }, response: ServerResponse) => {
  response.on('finish', () => atFinish.push({ what: `${incoming.method} ${incoming.url}`, listeners: response.listenerCount('close') }));
});

async function send(method: 'GET' | 'POST', path: string, body?: unknown): Promise<number> {
  const answer = await request(`${origin}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  await answer.body.text();
  return answer.statusCode;
}

/** What the response of `what` had at its finish. */
function listenersOf(what: string): number {
  const found = atFinish.filter((entry) => entry.what === what);
  if (found.length !== 1) throw new Error(`${found.length} responses of ${what}`);
  return found[0]!.listeners;
}

const chat = { model: 'solo', messages: [{ role: 'user', content: 'hello' }], max_tokens: 20 };

t.test('a finished call leaves no listener on its response: answered, streamed or refused', async (t) => {
  t.equal(await send('POST', '/v1/batches', {}), 400, 'a POST no call answers');
  t.equal(await send('POST', '/v1/chat/completions', chat), 200);
  t.equal(await send('POST', '/v1/embeddings', { model: 'embed', input: 'x' }), 200);
  t.equal(await send('POST', '/v1/responses', { model: 'solo', input: 'hello', stream: true }), 200);
  t.equal(await send('POST', '/v1/images/generations', { model: 'painter', prompt: 'x', size: '3x3' }), 400);
  const fastifyOwn = listenersOf('POST /v1/batches');
  t.equal(listenersOf('POST /v1/chat/completions'), fastifyOwn, 'a JSON answer');
  t.equal(listenersOf('POST /v1/embeddings'), fastifyOwn, 'another capability');
  t.equal(listenersOf('POST /v1/images/generations'), fastifyOwn, 'a call refused before admission');
  t.equal(listenersOf('POST /v1/responses'), 0, 'a stream');
});

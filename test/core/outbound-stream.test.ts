import net, { type LookupFunction } from 'node:net';
import t from 'tap';
import { outboundFetch } from '../../core/net/outbound-fetch.ts';
import { OutboundHttpClient, OutboundHttpError, type OutboundHttpSettings } from '../../core/net/outbound-http-client.ts';
import { type FakeCustomerEndpoint, startFakeCustomerEndpoint } from '../fakes/fake-customer-endpoint.ts';
import type { TapLike } from '../helpers/app.ts';

/** The guarded client's streamed mode (core/net/outbound-http-client.ts `stream`) and the fetch built on it. */

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | Array<{ address: string; family: number }>, family?: number) => void;

function resolvesTo(address: string): LookupFunction {
  return ((_hostname: string, options: { all?: boolean }, callback: LookupCallback) => {
    const family = net.isIP(address);
    if (options.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  }) as unknown as LookupFunction;
}

function client(t: TapLike, settings: Partial<OutboundHttpSettings> = {}): OutboundHttpClient {
  const http = new OutboundHttpClient({ allowPrivateNetwork: true, connectTimeoutMs: 2_000, totalTimeoutMs: 10_000, maxResponseBytes: 64 * 1024, ...settings });
  t.teardown(() => http.close());
  return http;
}

async function endpoint(t: TapLike): Promise<FakeCustomerEndpoint> {
  const started = await startFakeCustomerEndpoint();
  t.teardown(() => started.close());
  return started;
}

async function readAll(body: ReadableStream<Uint8Array>): Promise<string> {
  let text = '';
  const decoder = new TextDecoder();
  for await (const chunk of body) text += decoder.decode(chunk, { stream: true });
  return text;
}

async function rejection(promise: Promise<unknown>): Promise<OutboundHttpError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof OutboundHttpError) return error;
    throw error;
  }
  throw new Error('it succeeded');
}

t.test('a streamed answer hands over each chunk as it arrives, before the answer has ended', async (t) => {
  const hook = await endpoint(t);
  let finish: () => void = () => undefined;
  hook.handle((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: one\n\n');
    finish = () => res.end('data: two\n\n');
  });
  const answer = await client(t).stream({ url: `${hook.url}/sse` });
  t.equal(answer.status, 200);
  t.equal(answer.headers['content-type'], 'text/event-stream');
  const reader = answer.body.getReader();
  t.equal(new TextDecoder().decode((await reader.read()).value), 'data: one\n\n', 'the first event, while the answer is still open');
  finish();
  t.equal(new TextDecoder().decode((await reader.read()).value), 'data: two\n\n');
  t.ok((await reader.read()).done);
});

t.test('a stream silent for longer than the idle deadline fails timeout, and its connection is closed', async (t) => {
  const hook = await endpoint(t);
  hook.handle((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: one\n\n');
  });
  const answer = await client(t).stream({ url: hook.url, idleTimeoutMs: 200 });
  const error = await rejection(readAll(answer.body));
  t.equal(error.kind, 'timeout');
  t.match(error.message, /silent for more than 200 ms/);
  t.equal(await hook.requests[0]?.outcome, 'closed');
});

t.test('a server that sends no headers fails with the headers deadline', async (t) => {
  const hook = await endpoint(t);
  hook.handle(() => undefined);
  const error = await rejection(client(t).stream({ url: hook.url, headersTimeoutMs: 200 }));
  t.equal(error.kind, 'timeout');
  t.match(error.message, /no answer within 200 ms/);
});

t.test('a stream growing past its cap fails too_large', async (t) => {
  const hook = await endpoint(t);
  hook.handle((_req, res) => {
    res.writeHead(200);
    res.write(Buffer.alloc(600));
    res.end(Buffer.alloc(600));
  });
  const answer = await client(t).stream({ url: hook.url, maxResponseBytes: 1_000 });
  t.equal((await rejection(readAll(answer.body))).kind, 'too_large');
});

t.test('cancelling the body closes the connection', async (t) => {
  const hook = await endpoint(t);
  hook.handle((_req, res) => {
    res.writeHead(200);
    res.write('start');
  });
  const answer = await client(t).stream({ url: hook.url });
  await answer.body.cancel();
  t.equal(await hook.requests[0]?.outcome, 'closed');
});

t.test("the caller's signal cuts a stream being read: aborted", async (t) => {
  const hook = await endpoint(t);
  hook.handle((_req, res) => {
    res.writeHead(200);
    res.write('start');
  });
  const controller = new AbortController();
  const answer = await client(t).stream({ url: hook.url, signal: controller.signal });
  const reading = readAll(answer.body);
  controller.abort();
  t.equal((await rejection(reading)).kind, 'aborted');
});

t.test('a stream is guarded at dial time: a name resolving to a private address is refused, nothing connects', async (t) => {
  const hook = await endpoint(t);
  const http = client(t, { allowPrivateNetwork: false, lookup: resolvesTo('127.0.0.1') });
  const error = await rejection(http.stream({ url: `http://mcp.example:${hook.port}/mcp` }));
  t.equal(error.kind, 'refused_address');
  t.equal(hook.connections, 0);
});

t.test('the fetch built on it sends method, headers and body, and answers a standard Response', async (t) => {
  const hook = await endpoint(t);
  hook.handle((_req, res, received) => res.writeHead(200, { 'content-type': 'application/json', 'set-cookie': ['a=1', 'b=2'] }).end(`{"got":${received.body}}`));
  const fetch = outboundFetch(client(t));
  const response = await fetch(new URL(`${hook.url}/mcp`), { method: 'POST', headers: new Headers({ 'x-upstream-key': 'k1' }), body: '{"n":1}' });
  t.equal(response.status, 200);
  t.same(await response.json(), { got: { n: 1 } });
  t.match(hook.requests[0], { method: 'POST', path: '/mcp', headers: { 'x-upstream-key': 'k1' } });
});

t.test('the fetch answers a redirect as it is, never following it', async (t) => {
  const hook = await endpoint(t);
  hook.handle((_req, res) => res.writeHead(302, { location: 'http://169.254.169.254/' }).end());
  const response = await outboundFetch(client(t))(hook.url);
  t.equal(response.status, 302);
  t.equal(hook.requests.length, 1);
});

t.test('the fetch answers a bodiless status without a body', async (t) => {
  const hook = await endpoint(t);
  hook.handle((_req, res) => res.writeHead(204).end());
  t.equal((await outboundFetch(client(t))(hook.url, { method: 'DELETE' })).status, 204);
});

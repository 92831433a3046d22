import { once } from 'node:events';
import net, { type AddressInfo, type LookupFunction } from 'node:net';
import t from 'tap';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { OutboundHttpClient, OutboundHttpError, type OutboundHttpSettings } from '../../core/net/outbound-http-client.ts';
import { type FakeCustomerEndpoint, startFakeCustomerEndpoint } from '../fakes/fake-customer-endpoint.ts';
import { buildTestApp, type TapLike } from '../helpers/app.ts';
import { closedPort } from '../helpers/closed-port.ts';

t.setTimeout(120_000);

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | Array<{ address: string; family: number }>, family?: number) => void;

/** A resolver answering every name with the next of these addresses (the last one again once they run out), as a hostile DNS server could. */
function answersInTurn(...addresses: string[]): LookupFunction {
  let next = 0;
  return ((_hostname: string, options: { all?: boolean }, callback: LookupCallback) => {
    const address = addresses[Math.min(next++, addresses.length - 1)]!;
    const family = net.isIP(address);
    if (options.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  }) as unknown as LookupFunction;
}

const resolvesTo = (address: string) => answersInTurn(address);

/** A resolver that never answers: a connection that never completes. */
const neverAnswers = (() => undefined) as unknown as LookupFunction;

function client(t: TapLike, settings: Partial<OutboundHttpSettings> = {}): OutboundHttpClient {
  const http = new OutboundHttpClient({ allowPrivateNetwork: false, connectTimeoutMs: 2_000, totalTimeoutMs: 10_000, maxResponseBytes: 64 * 1024, ...settings });
  t.teardown(() => http.close());
  return http;
}

/** A client allowed to reach the loopback endpoint, for the tests about everything but the guard. */
const loopbackClient = (t: TapLike, settings: Partial<OutboundHttpSettings> = {}) => client(t, { allowPrivateNetwork: true, ...settings });

async function endpoint(t: TapLike): Promise<FakeCustomerEndpoint> {
  const started = await startFakeCustomerEndpoint();
  t.teardown(() => started.close());
  return started;
}

/** The failure and how long it took: a deadline's test shows the call ended near it, not merely that it timed out. */
async function timedFailure(call: () => Promise<unknown>): Promise<{ error: OutboundHttpError; elapsedMs: number }> {
  const started = performance.now();
  const error = await failure(call);
  return { error, elapsedMs: performance.now() - started };
}

/** Far above the short deadlines the tests set, far below the defaults: a loaded machine stays within it. */
const NEAR_THE_DEADLINE_MS = 3_000;

async function failure(call: () => Promise<unknown>): Promise<OutboundHttpError> {
  try {
    await call();
  } catch (error) {
    if (error instanceof OutboundHttpError) return error;
    throw error;
  }
  throw new Error('the call succeeded');
}

t.test('a GET round trip answers the status, headers and body', async (t) => {
  const hook = await endpoint(t);
  hook.handle((_req, res) => res.writeHead(200, { 'content-type': 'application/json', 'x-answer': 'yes' }).end('{"ok":true}'));
  const response = await loopbackClient(t).request({ url: `${hook.url}/status?verbose=1`, headers: { accept: 'application/json' } });
  t.equal(response.status, 200);
  t.equal(response.headers['x-answer'], 'yes');
  t.equal(response.body.toString('utf8'), '{"ok":true}');
  t.ok(response.durationMs >= 0);
  t.match(hook.requests[0], { method: 'GET', path: '/status?verbose=1', headers: { accept: 'application/json' } });
});

t.test('a POST round trip sends the method, headers and body as given', async (t) => {
  const hook = await endpoint(t);
  hook.handle((_req, res, received) => res.writeHead(201, { 'content-type': 'text/plain' }).end(`got ${received.body.length} bytes`));
  const body = JSON.stringify({ type: 'key.created', data: { id: 'key_1' } });
  const response = await loopbackClient(t).request({
    url: `${hook.url}/hooks/in`,
    method: 'POST',
    headers: { 'content-type': 'application/json', 'webhook-id': 'msg_1' },
    body,
  });
  t.equal(response.status, 201);
  t.equal(response.body.toString('utf8'), `got ${body.length} bytes`);
  t.match(hook.requests[0], { method: 'POST', path: '/hooks/in', body, headers: { 'content-type': 'application/json', 'webhook-id': 'msg_1' } });
});

t.test('any method goes out as given', async (t) => {
  const hook = await endpoint(t);
  const http = loopbackClient(t);
  for (const method of ['PUT', 'PATCH', 'DELETE', 'OPTIONS']) t.equal((await http.request({ url: hook.url, method })).status, 200, method);
  t.same(
    hook.requests.map((request) => request.method),
    ['PUT', 'PATCH', 'DELETE', 'OPTIONS'],
  );
});

t.test('a hostname that resolves to a private address is refused when the URL is saved', async (t) => {
  const error = await failure(() => client(t, { lookup: resolvesTo('127.0.0.1') }).check('https://hooks.example/in'));
  t.equal(error.kind, 'refused_address');
  t.equal(error.reason, 'private_address');
  t.match(error.message, /hooks\.example.*127\.0\.0\.1/);
});

t.test('a hostname that resolves only to public addresses passes the save-time check', async (t) => {
  const url = await client(t, { lookup: resolvesTo('93.184.216.34') }).check('https://hooks.example/in');
  t.equal(url.hostname, 'hooks.example');
});

t.test('a scheme other than http and https is refused when saved and when called', async (t) => {
  const http = client(t);
  t.equal((await failure(() => http.check('file:///etc/passwd'))).reason, 'scheme');
  t.equal((await failure(() => http.request({ url: 'gopher://hooks.example/' }))).reason, 'scheme');
});

t.test('a hostname that resolves to a private address is refused at connect time, and nothing connects', async (t) => {
  const hook = await endpoint(t);
  const error = await failure(() => client(t, { lookup: resolvesTo('127.0.0.1') }).request({ url: `http://hooks.example:${hook.port}/in`, method: 'POST', body: '{}' }));
  t.equal(error.kind, 'refused_address');
  t.equal(error.reason, 'private_address');
  t.match(error.message, /127\.0\.0\.1/);
  t.equal(hook.connections, 0);
});

t.test('the same resolver reaches the endpoint when private networks are allowed', async (t) => {
  const hook = await endpoint(t);
  const response = await client(t, { allowPrivateNetwork: true, lookup: resolvesTo('127.0.0.1') }).request({ url: `http://hooks.example:${hook.port}/in` });
  t.equal(response.status, 200);
  t.equal(hook.requests[0]?.headers.host, `hooks.example:${hook.port}`);
});

t.test('a name that resolved publicly when saved and privately when dialled is refused (DNS rebinding)', async (t) => {
  const hook = await endpoint(t);
  const http = client(t, { lookup: answersInTurn('93.184.216.34', '127.0.0.1') });
  const url = `http://rebind.example:${hook.port}/in`;
  await http.check(url);
  const error = await failure(() => http.request({ url }));
  t.equal(error.kind, 'refused_address');
  t.equal(hook.connections, 0);
});

t.test('a private address written in the URL is refused without connecting', async (t) => {
  const hook = await endpoint(t);
  const http = client(t);
  for (const url of [`${hook.url}/in`, `http://[::ffff:127.0.0.1]:${hook.port}/in`, `http://localhost:${hook.port}/in`]) {
    t.equal((await failure(() => http.request({ url }))).kind, 'refused_address', url);
  }
  t.equal(hook.connections, 0);
});

t.test('a redirect is an answer the caller sees, never followed', async (t) => {
  const hook = await endpoint(t);
  hook.handle((req, res) => {
    if (req.url === '/moved') res.writeHead(302, { location: '/target' }).end();
    else res.writeHead(200).end('target');
  });
  const response = await loopbackClient(t).request({ url: `${hook.url}/moved`, method: 'POST', body: 'x' });
  t.equal(response.status, 302);
  t.equal(response.headers.location, '/target');
  t.same(
    hook.requests.map((request) => request.path),
    ['/moved'],
  );
});

t.test('a connection that never completes fails with the connect timeout', async (t) => {
  const { error, elapsedMs } = await timedFailure(() => client(t, { lookup: neverAnswers, connectTimeoutMs: 100, totalTimeoutMs: 10_000 }).request({ url: 'http://hooks.example/in' }));
  t.equal(error.kind, 'timeout');
  t.match(error.message, /could not connect within 100 ms/);
  t.ok(elapsedMs < NEAR_THE_DEADLINE_MS, `ended after ${Math.round(elapsedMs)} ms`);
});

t.test('a server that never answers fails with the total timeout and the connection is closed', async (t) => {
  const hook = await endpoint(t);
  hook.handle(() => undefined);
  const { error, elapsedMs } = await timedFailure(() => loopbackClient(t).request({ url: `${hook.url}/in`, totalTimeoutMs: 150 }));
  t.equal(error.kind, 'timeout');
  t.match(error.message, /no complete answer within 150 ms/);
  t.ok(elapsedMs < NEAR_THE_DEADLINE_MS, `ended after ${Math.round(elapsedMs)} ms`);
  t.equal(await hook.requests[0]?.outcome, 'closed');
});

t.test('an answer whose body never ends fails with the total timeout', async (t) => {
  const hook = await endpoint(t);
  hook.handle((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('the start and never the end');
  });
  const { error, elapsedMs } = await timedFailure(() => loopbackClient(t, { totalTimeoutMs: 150 }).request({ url: hook.url }));
  t.equal(error.kind, 'timeout');
  t.match(error.message, /150 ms/);
  t.ok(elapsedMs < NEAR_THE_DEADLINE_MS, `ended after ${Math.round(elapsedMs)} ms`);
});

t.test('an answer declaring more bytes than the cap fails too_large, naming the cap', async (t) => {
  const hook = await endpoint(t);
  hook.handle((_req, res) => res.writeHead(200, { 'content-length': '2000' }).end('x'.repeat(2000)));
  const error = await failure(() => loopbackClient(t, { maxResponseBytes: 1000 }).request({ url: hook.url }));
  t.equal(error.kind, 'too_large');
  t.match(error.message, /1000-byte limit/);
  t.notMatch(error.message, /xxxx/);
});

t.test('an answer growing past the cap stops being read and its connection is closed', async (t) => {
  const hook = await endpoint(t);
  // Chunked, and never finished: only a client that stops at the cap ends this call before its total deadline.
  hook.handle((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('a'.repeat(600));
    res.write('b'.repeat(600));
  });
  const error = await failure(() => loopbackClient(t, { maxResponseBytes: 1000, totalTimeoutMs: 10_000 }).request({ url: hook.url }));
  t.equal(error.kind, 'too_large');
  t.equal(await hook.requests[0]?.outcome, 'closed');
});

t.test('an answer of exactly the cap is read whole', async (t) => {
  const hook = await endpoint(t);
  hook.handle((_req, res) => res.writeHead(200).end('y'.repeat(1000)));
  const response = await loopbackClient(t, { maxResponseBytes: 1000 }).request({ url: hook.url });
  t.equal(response.body.length, 1000);
});

t.test('keep-start answers the first bytes of a longer answer, marked truncated, and closes its connection', async (t) => {
  const hook = await endpoint(t);
  // Declared long and never finished: only a client that stops at the cap answers before its total deadline.
  hook.handle((_req, res) => {
    res.writeHead(503, { 'content-length': '5000', 'retry-after': '30' });
    res.write('a'.repeat(600));
    res.write('b'.repeat(600));
  });
  const response = await loopbackClient(t, { totalTimeoutMs: 10_000 }).request({ url: hook.url, maxResponseBytes: 1000, whenTooLarge: 'keep-start' });
  t.equal(response.status, 503);
  t.equal(response.headers['retry-after'], '30');
  t.equal(response.body.toString('utf8'), 'a'.repeat(600) + 'b'.repeat(400));
  t.equal(response.truncated, true);
  t.equal(await hook.requests[0]?.outcome, 'closed');
});

t.test('keep-start reads an answer within the cap whole, not truncated', async (t) => {
  const hook = await endpoint(t);
  hook.handle((_req, res) => res.writeHead(200).end('y'.repeat(1000)));
  const response = await loopbackClient(t).request({ url: hook.url, maxResponseBytes: 1000, whenTooLarge: 'keep-start' });
  t.same([response.body.length, response.truncated], [1000, false]);
});

t.test('a call may set its own cap and total deadline', async (t) => {
  const hook = await endpoint(t);
  hook.handle((_req, res) => res.writeHead(200).end('z'.repeat(100)));
  const error = await failure(() => loopbackClient(t, { maxResponseBytes: 1000 }).request({ url: hook.url, maxResponseBytes: 10 }));
  t.match(error, { kind: 'too_large', message: /10-byte limit/ });
});

t.test("the caller's signal cuts a call in flight: aborted, and the connection closed", async (t) => {
  const hook = await endpoint(t);
  hook.handle(() => undefined);
  const controller = new AbortController();
  const pending = failure(() => loopbackClient(t).request({ url: hook.url, signal: controller.signal }));
  const received = await hook.arrived();
  controller.abort();
  t.equal((await pending).kind, 'aborted');
  t.equal(await received.outcome, 'closed');
});

t.test('a signal already aborted sends nothing', async (t) => {
  const hook = await endpoint(t);
  const controller = new AbortController();
  controller.abort();
  t.equal((await failure(() => loopbackClient(t).request({ url: hook.url, signal: controller.signal }))).kind, 'aborted');
  t.equal(hook.connections, 0);
});

t.test('a refused connection fails with kind connect', async (t) => {
  const port = await closedPort();
  const error = await failure(() => loopbackClient(t).request({ url: `http://127.0.0.1:${port}/in` }));
  t.equal(error.kind, 'connect');
  t.match(error.message, /ECONNREFUSED/);
});

t.test('an answer that is not HTTP fails with kind protocol', async (t) => {
  const server = net.createServer((socket) => {
    socket.once('data', () => socket.end('this is not http\r\n\r\n'));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as AddressInfo;
  const error = await failure(() => loopbackClient(t).request({ url: `http://127.0.0.1:${port}/` }));
  t.equal(error.kind, 'protocol');
});

t.test('an error names the method and origin, never the path, query, credentials, headers or bodies', async (t) => {
  const secret = 'whsec_never-in-an-error-0123456789';
  const hook = await endpoint(t);
  hook.handle((req, res) => {
    if (req.url?.startsWith('/big')) res.writeHead(200, { 'content-length': String(secret.length * 100) }).end(secret.repeat(100));
  });
  const http = loopbackClient(t, { maxResponseBytes: 100, totalTimeoutMs: 150 });
  for (const path of ['/big', '/silent']) {
    const url = `http://user:${secret}@127.0.0.1:${hook.port}${path}/${secret}?token=${secret}`;
    const error = await failure(() => http.request({ url, method: 'POST', headers: { authorization: `Bearer ${secret}` }, body: secret }));
    t.match(error.message, new RegExp(`^POST http://127\\.0\\.0\\.1:${hook.port}: `), path);
    t.notMatch(error.message, secret, path);
    t.notMatch(JSON.stringify(error), secret, path);
  }
});

t.test('the kernel builds the client from outbound.*: the guard is on unless the operator allows private networks', async (t) => {
  const hook = await endpoint(t);
  const guarded = await buildTestApp(t, { plugins: {}, ready: false });
  const refused = await failure(() => guarded.app.svc.container.resolve(Tokens.OutboundHttp).request({ url: hook.url }));
  t.equal(refused.kind, 'refused_address');

  const open = await buildTestApp(t, { plugins: {}, ready: false, config: { outbound: { allowPrivateNetwork: true, maxResponseBytes: 10 } } });
  const http = open.app.svc.container.resolve(Tokens.OutboundHttp);
  t.equal((await http.request({ url: hook.url })).body.toString('utf8'), 'ok');
  hook.handle((_req, res) => res.writeHead(200).end('more than ten bytes'));
  t.match(await failure(() => http.request({ url: hook.url })), { kind: 'too_large', message: /10-byte limit/ });
});

import t from 'tap';
import net, { type LookupFunction } from 'node:net';
import { UpstreamHttpClient, type UpstreamClientOptions } from '../../providers/http/upstream-client.ts';
import { parseRetryAfterMs } from '../../providers/http/retry-after.ts';
import { readSse } from '../../providers/http/sse-reader.ts';
import { startFakeOpenAIUpstream, type FakeOpenAIUpstream } from '../fakes/fake-openai-upstream.ts';
import { failure } from './provider-test-kit.ts';
import { CallSignal, type Cancellation } from '../../core/gateway/call-signal.ts';
import { GatewayCallOptions } from '../../core/gateway/call-options.ts';
import type { CallOptions } from '../../core/gateway/provider.ts';
import type { TraceHeaders } from '../../core/observability/trace-context.ts';

const API_KEY = 'sk-test-never-show-me-0123456789';
const timeouts = { connectMs: 300, firstByteMs: 300, totalMs: 1500 };

let fake: FakeOpenAIUpstream;
t.before(async () => {
  fake = await startFakeOpenAIUpstream();
});
t.teardown(() => fake.close());
t.beforeEach(() => fake.reset());

function client(overrides: Partial<UpstreamClientOptions> = {}): UpstreamHttpClient {
  const http = new UpstreamHttpClient({ baseUrl: fake.baseUrl, timeouts, label: 'test-upstream', secrets: [API_KEY], allowPrivateNetwork: true, ...overrides });
  t.teardown(() => http.close());
  return http;
}

/** A call's options as a provider receives them: the kernel's (a CallSignal inside) or a plain AbortSignal's. */
function callOptions(signal: Cancellation, traceHeaders?: TraceHeaders): CallOptions {
  return signal instanceof CallSignal ? new GatewayCallOptions(signal, 'req-test', traceHeaders) : { signal, requestId: 'req-test', traceHeaders };
}

const chatRequest = (signal: Cancellation = new AbortController().signal, traceHeaders?: TraceHeaders) => ({
  path: '/chat/completions',
  body: { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
  headers: { authorization: `Bearer ${API_KEY}` },
  call: callOptions(signal, traceHeaders),
});

const TRACE = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate: 'vendor=value' };

t.test("the call's trace headers go out with a JSON call", async (t) => {
  await client().postJson(chatRequest(new CallSignal(), TRACE));
  t.equal(fake.requests[0]?.headers['traceparent'], TRACE.traceparent);
  t.equal(fake.requests[0]?.headers['tracestate'], TRACE.tracestate);
});

t.test("the call's trace headers go out with a stream", async (t) => {
  const response = await client().postStream({ ...chatRequest(new CallSignal(), TRACE), body: { model: 'm', messages: [], stream: true } });
  for await (const _ of response.body);
  t.equal(fake.requests[0]?.headers['traceparent'], TRACE.traceparent);
  t.equal(fake.requests[0]?.headers['tracestate'], TRACE.tracestate);
});

t.test('a call without trace headers sends none', async (t) => {
  await client().postJson(chatRequest());
  t.notOk('traceparent' in (fake.requests[0]?.headers ?? {}));
  t.notOk('tracestate' in (fake.requests[0]?.headers ?? {}));
});

t.test('posts JSON to the base path and returns the parsed answer', async (t) => {
  const response = await client().postJson<{ object: string }>(chatRequest());
  t.equal(response.status, 200);
  t.equal(response.body.object, 'chat.completion');
  t.equal(fake.requests[0]?.path, '/v1/chat/completions');
  t.equal(fake.requests[0]?.headers['content-type'], 'application/json');
});

t.test('reuses the kept-alive connection for sequential calls', async (t) => {
  const http = client();
  for (let i = 0; i < 4; i++) await http.postJson(chatRequest());
  t.equal(fake.requests.length, 4);
  // undici frees a socket a microtask after the body ends, so back-to-back calls may open a second one
  t.ok(new Set(fake.requests.map((request) => request.remotePort)).size <= 2, 'sockets were reused');
});

const statusCases: Array<[number, string]> = [
  [400, 'client'],
  [404, 'client'],
  [422, 'client'],
  [401, 'auth'],
  [403, 'auth'],
  [429, 'rate_limited'],
  [500, 'server'],
  [502, 'server'],
  [503, 'server'],
  [529, 'server'],
];
for (const [status, kind] of statusCases) {
  t.test(`status ${status} maps to ${kind}`, async (t) => {
    fake.enqueue({ kind: 'status', status, message: `upstream says ${status}` });
    const error = await failure(() => client().postJson(chatRequest()));
    t.equal(error.kind, kind);
    t.equal(error.status, status);
    t.match(error.message, `upstream says ${status}`);
    t.match(error.upstreamBody, { error: { message: `upstream says ${status}` } });
  });
}

t.test('retry-after in seconds on a 429 becomes retryAfterMs', async (t) => {
  fake.enqueue({ kind: 'status', status: 429, retryAfter: '7' });
  const error = await failure(() => client().postJson(chatRequest()));
  t.equal(error.retryAfterMs, 7000);
  t.equal(error.retryable, true);
});

t.test('retry-after-ms wins over retry-after', async (t) => {
  fake.enqueue({ kind: 'status', status: 429, retryAfter: '7', headers: { 'retry-after-ms': '1250.5' } });
  const error = await failure(() => client().postJson(chatRequest()));
  t.equal(error.retryAfterMs, 1251);
});

t.test('x-ms-retry-after-ms is read (Azure)', async (t) => {
  fake.enqueue({ kind: 'status', status: 429, headers: { 'x-ms-retry-after-ms': '300' } });
  const error = await failure(() => client().postJson(chatRequest()));
  t.equal(error.retryAfterMs, 300);
});

t.test('retry-after as an HTTP date is read relative to now', async (t) => {
  const now = Date.parse('2030-01-01T00:00:00Z');
  t.equal(parseRetryAfterMs({ 'retry-after': 'Tue, 01 Jan 2030 00:00:30 GMT' }, now), 30_000);
  t.equal(parseRetryAfterMs({ 'retry-after': 'Mon, 31 Dec 2029 23:59:00 GMT' }, now), 0);
  t.equal(parseRetryAfterMs({ 'retry-after': 'soon' }, now), null);
  t.equal(parseRetryAfterMs({}, now), null);
});

t.test('connection reset before any response maps to connect', async (t) => {
  fake.enqueue({ kind: 'reset' });
  const error = await failure(() => client().postJson(chatRequest()));
  t.equal(error.kind, 'connect');
  t.equal(error.retryable, true);
});

t.test('connection refused maps to connect', async (t) => {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  const error = await failure(() => client({ baseUrl: `http://127.0.0.1:${port}/v1` }).postJson(chatRequest()));
  t.equal(error.kind, 'connect');
  t.match(error.message, /ECONNREFUSED/);
});

t.test('an upstream that answers something other than HTTP maps to protocol', async (t) => {
  const server = net.createServer((socket) => socket.end('SSH-2.0-OpenSSH_9.6\r\n'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => void server.close());
  const { port } = server.address() as net.AddressInfo;
  const error = await failure(() => client({ baseUrl: `http://127.0.0.1:${port}/v1` }).postJson(chatRequest()));
  t.equal(error.kind, 'protocol', error.message);
});

t.test('an upstream that hangs before the first byte times out', async (t) => {
  fake.enqueue({ kind: 'hang' });
  const error = await failure(() => client({ timeouts: { ...timeouts, firstByteMs: 150 } }).postJson(chatRequest()));
  t.equal(error.kind, 'timeout');
  t.match(error.message, /150 ms/, 'the first-byte timeout cut it (not the 1500 ms total)');
  t.equal(await fake.requests[0]?.outcome, 'closed', 'the upstream sees the connection close');
});

t.test('a slow first byte within the deadline still succeeds', async (t) => {
  fake.enqueue({ kind: 'reply', delayMs: 100 });
  const response = await client({ timeouts: { ...timeouts, firstByteMs: 400 } }).postJson(chatRequest());
  t.equal(response.status, 200);
});

t.test('a slow first byte past the deadline times out', async (t) => {
  fake.enqueue({ kind: 'reply', delayMs: 400 });
  const error = await failure(() => client({ timeouts: { ...timeouts, firstByteMs: 100 } }).postJson(chatRequest()));
  t.equal(error.kind, 'timeout');
});

t.test('a stream longer than the total deadline times out mid-body', async (t) => {
  fake.enqueue({ kind: 'reply', chunkDelayMs: 60 });
  const http = client({ timeouts: { ...timeouts, totalMs: 150 } });
  const response = await http.postStream({ ...chatRequest(), body: { model: 'm', messages: [], stream: true } });
  const error = await failure(async () => {
    for await (const _ of response.body) void _;
  });
  t.equal(error.kind, 'timeout');
  t.match(error.message, /150 ms/);
});

t.test('a JSON answer that takes longer than the total deadline times out', async (t) => {
  fake.enqueue({ kind: 'reply', delayMs: 400 });
  const error = await failure(() => client({ timeouts: { ...timeouts, firstByteMs: 1000, totalMs: 150 } }).postJson(chatRequest()));
  t.equal(error.kind, 'timeout');
  t.match(error.message, /did not finish within 150 ms/);
});

t.test('a long error page is kept only up to its first 64 KiB', async (t) => {
  fake.enqueue({ kind: 'raw', status: 500, headers: { 'content-type': 'text/plain' }, body: 'x'.repeat(300_000) });
  const error = await failure(() => client().postJson(chatRequest()));
  t.equal(error.kind, 'server');
  t.equal(typeof error.upstreamBody === 'string' ? error.upstreamBody.length : -1, 64 * 1024);
});

t.test('a hostname whose connect never completes hits the connect timeout', async (t) => {
  const neverAnswers = (() => undefined) as unknown as LookupFunction;
  const error = await failure(() =>
    client({ baseUrl: 'http://upstream.invalid:9/v1', lookup: neverAnswers, timeouts: { connectMs: 100, firstByteMs: 1000, totalMs: 1500 } }).postJson(chatRequest()),
  );
  t.equal(error.kind, 'timeout');
  t.match(error.message, /connect/);
});

t.test('the caller aborting before headers maps to aborted and closes the upstream connection', async (t) => {
  fake.enqueue({ kind: 'hang' });
  const controller = new AbortController();
  const pending = failure(() => client().postJson(chatRequest(controller.signal)));
  await fake.arrived(); // the upstream holds the request: no headers will come
  controller.abort();
  const error = await pending;
  t.equal(error.kind, 'aborted');
  t.equal(error.retryable, false);
  t.equal(await fake.requests[0]?.outcome, 'closed');
});

t.test('an already aborted signal fails without calling the upstream', async (t) => {
  const controller = new AbortController();
  controller.abort();
  const error = await failure(() => client().postJson(chatRequest(controller.signal)));
  t.equal(error.kind, 'aborted');
  t.equal(fake.requests.length, 0);
});

t.test('a CallSignal cuts a call like an AbortSignal: aborted, and the upstream connection closed', async (t) => {
  fake.enqueue({ kind: 'hang' });
  const cancel = new CallSignal();
  const pending = failure(() => client().postJson(chatRequest(cancel)));
  await fake.arrived();
  cancel.abort(new Error('client gone'));
  const error = await pending;
  t.equal(error.kind, 'aborted');
  t.equal(await fake.requests[0]?.outcome, 'closed');
});

t.test('an already aborted CallSignal fails without calling the upstream', async (t) => {
  const cancel = new CallSignal();
  cancel.abort(new Error('client gone'));
  const error = await failure(() => client().postJson(chatRequest(cancel)));
  t.equal(error.kind, 'aborted');
  t.equal(fake.requests.length, 0);
});

t.test('a CallSignal cuts a stream part-way', async (t) => {
  fake.enqueue({ kind: 'reply', content: 'a b c d e f g h i j k l m n o p', chunkDelayMs: 30 });
  const cancel = new CallSignal();
  const response = await client().postStream({ ...chatRequest(cancel), body: { model: 'm', messages: [], stream: true } });
  const error = await failure(async () => {
    let pieces = 0;
    for await (const _ of response.body) if (++pieces === 2) cancel.abort(new Error('client gone'));
  });
  t.equal(error.kind, 'aborted');
  t.equal(await fake.requests[0]?.outcome, 'closed');
});

t.test('a 200 with a body that is not JSON maps to protocol', async (t) => {
  fake.enqueue({ kind: 'raw', status: 200, body: '<html>gateway error</html>' });
  const error = await failure(() => client().postJson(chatRequest()));
  t.equal(error.kind, 'protocol');
  t.equal(error.upstreamBody, '<html>gateway error</html>');
});

t.test('a non-JSON error page is kept as text in upstreamBody', async (t) => {
  fake.enqueue({ kind: 'raw', status: 502, headers: { 'content-type': 'text/html' }, body: '<h1>Bad gateway</h1>' });
  const error = await failure(() => client().postJson(chatRequest()));
  t.equal(error.kind, 'server');
  t.equal(error.upstreamBody, '<h1>Bad gateway</h1>');
});

t.test('the API key never appears in error messages, bodies or causes', async (t) => {
  fake.enqueue({ kind: 'status', status: 401, message: `Incorrect API key provided: ${API_KEY}` }, { kind: 'raw', status: 200, body: `not json ${API_KEY}` }, { kind: 'reset' });
  const http = client();
  for (let i = 0; i < 3; i++) {
    const error = await failure(() => http.postJson(chatRequest()));
    t.notMatch(error.message, API_KEY);
    t.notMatch(JSON.stringify(error.upstreamBody ?? null), API_KEY);
    t.notMatch(String(error.stack), API_KEY);
    t.notMatch(String((error.cause as Error | undefined)?.message ?? ''), API_KEY);
  }
});

t.test('a private address is refused at connect time unless private networks are allowed', async (t) => {
  const port = Number(new URL(fake.url).port);
  const toLoopback = ((_host: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options.all) callback(null, [{ address: '127.0.0.1', family: 4 }]);
    else callback(null, '127.0.0.1', 4);
  }) as unknown as LookupFunction;
  const baseUrl = `http://rebinding.example:${port}/v1`;

  const error = await failure(() => client({ baseUrl, lookup: toLoopback, allowPrivateNetwork: false }).postJson(chatRequest()));
  t.equal(error.kind, 'connect');
  t.match(error.message, /127\.0\.0\.1/);
  t.equal(fake.requests.length, 0, 'nothing reached the upstream');

  const response = await client({ baseUrl, lookup: toLoopback, allowPrivateNetwork: true }).postJson(chatRequest());
  t.equal(response.status, 200);
});

t.test('a literal private base URL is refused up front unless private networks are allowed', async (t) => {
  t.throws(() => client({ allowPrivateNetwork: false }), { code: 'ERR_OUTBOUND_URL_REFUSED' });
});

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

async function* bytes(...pieces: string[]): AsyncGenerator<Uint8Array> {
  for (const piece of pieces) yield Buffer.from(piece);
}

t.test('the SSE reader joins events split across chunks, with names and multi-line data', async (t) => {
  const events = await collect(readSse(bytes('event: message_start\nda', 'ta: {"a":1}\n\n', ': comment\ndata: line1\ndata: line2\r\n\r\n', 'data: [DONE]\n\n')));
  t.same(events, [
    { event: 'message_start', data: '{"a":1}' },
    { event: undefined, data: 'line1\nline2' },
    { event: undefined, data: '[DONE]' },
  ]);
});

t.test('the SSE reader decodes multi-byte characters split across chunks', async (t) => {
  const text = Buffer.from('data: héllo 👋\n\n');
  async function* split() {
    yield text.subarray(0, 8);
    yield text.subarray(8, 15);
    yield text.subarray(15);
  }
  t.same(await collect(readSse(split())), [{ event: undefined, data: 'héllo 👋' }]);
});

t.test('the SSE reader keeps a last event that lacks its blank line', async (t) => {
  t.same(await collect(readSse(bytes('data: one\n\ndata: two'))), [
    { event: undefined, data: 'one' },
    { event: undefined, data: 'two' },
  ]);
});

import t from 'tap';
import { buildTestApp, createKey } from '../helpers/app.ts';
import { assertEnvelope } from '../helpers/envelope.ts';
import { RawConnection } from '../helpers/raw-http.ts';

/*
 * server.headersTimeoutMs, requestTimeoutMs and keepAliveTimeoutMs bound how long a client may take
 * to send a request and how long a kept-alive connection may idle; a response streams as long as
 * it needs. Short limits here; each wait ends on the server's own act (an answer, a close), and a
 * guard fails the test if that act does not come long after the limit.
 */
const server = { headersTimeoutMs: 300, requestTimeoutMs: 600, keepAliveTimeoutMs: 300 };
const GUARD_MS = 8_000;
const test = await buildTestApp(t, {
  config: { server },
  plugins: {
    account: {},
    projects: {},
    keys: {},
    inference: {
      // Silent for longer than every limit before the first token, then a chunk every 60 ms.
      providers: { slow: { type: 'mock', latencyMs: 900, chunkDelayMs: 60 } },
      models: { slow: { routes: [{ provider: 'slow', model: 'slow' }] } },
    },
  },
});
await test.app.listen({ host: '127.0.0.1', port: 0 });
const { key } = await createKey(test, { name: 'timeouts', scopes: ['inference'] });

/** Resolves when the server closes the connection; fails the test if it has not after GUARD_MS. */
async function closedByServer(connection: RawConnection, what: string): Promise<void> {
  let guard: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    guard = setTimeout(() => reject(new Error(`${what}: the connection was still open ${GUARD_MS} ms later`)), GUARD_MS);
  });
  try {
    await Promise.race([connection.closed, late]);
  } finally {
    clearTimeout(guard);
    connection.close();
  }
}

t.test('a client trickling its headers is answered 408 request_timeout and disconnected', async (t) => {
  const connection = await RawConnection.open(test.app);
  void connection.trickle(`GET /client/whoami HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${test.ownerToken}\r\nX-Slow: ${'a'.repeat(1_000)}\r\n\r\n`, 20);
  await closedByServer(connection, 'trickled headers');
  assertEnvelope(t, await connection.response(), 408, { code: 'request_timeout' });
});

t.test('a client trickling its body is answered 408 request_timeout and disconnected', async (t) => {
  const connection = await RawConnection.open(test.app);
  const body = JSON.stringify({ name: 'x'.repeat(1_000) });
  connection.write(`POST /client/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${test.ownerToken}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
  void connection.trickle(body, 20);
  await closedByServer(connection, 'trickled body');
  assertEnvelope(t, await connection.response(), 408, { code: 'request_timeout' });
});

t.test('a connection that never sends a request is closed', async (t) => {
  const connection = await RawConnection.open(test.app);
  await closedByServer(connection, 'silent connection');
  t.ok(connection.ended);
});

t.test('an idle kept-alive connection is closed after keepAliveTimeoutMs', async (t) => {
  const connection = await RawConnection.open(test.app);
  connection.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
  t.equal((await connection.response()).statusCode, 200);
  await closedByServer(connection, 'idle kept-alive connection');
  t.ok(connection.ended);
});

t.test('a streamed response that outlasts every limit is not cut', async (t) => {
  // The limits bound receiving the request, which the server has done once the last byte is
  // parsed; the test is about what comes after. So the whole request goes out in one write as the
  // connection opens (a client that paused between accept and sending, as a loaded machine can,
  // would rightly be answered 408 and prove nothing), and the connection is read byte for byte.
  const body = JSON.stringify({ model: 'slow', stream: true, messages: [{ role: 'user', content: 'one two three four five six seven eight nine ten eleven twelve' }] });
  const started = performance.now();
  const connection = await RawConnection.open(
    test.app,
    `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  t.teardown(() => connection.close());
  const response = await connection.response();
  const elapsed = performance.now() - started;
  t.equal(response.statusCode, 200);
  t.match(response.body, /data: \[DONE\]\n\n$/, 'the stream ran to its end');
  // A lower bound: a slower machine only makes it longer.
  t.ok(elapsed > server.requestTimeoutMs + server.keepAliveTimeoutMs, `it lasted longer than the limits (${Math.round(elapsed)} ms)`);
});

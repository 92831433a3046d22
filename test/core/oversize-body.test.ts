import { once } from 'node:events';
import { createServer } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import t from 'tap';
import { drainRequestBody } from '../../core/http/oversize-body.ts';
import { startGateway, type Gateway } from '../helpers/gateway.ts';

/** A JSON chat body of 11 MB: over the 10 MB inference limit. */
const ELEVEN_MB_CHAT = JSON.stringify({ model: 'duo', messages: [{ role: 'user', content: 'x'.repeat(11 * 1024 * 1024) }] });

/**
 * A client that uploads its whole body before it reads anything (as many HTTP/1.1 clients do): it
 * sees the answer only if the server neither resets the connection nor drops the answer with it.
 */
async function uploadThenRead(gw: Gateway, body: string, headers: string): Promise<{ received: string; error: string | null }> {
  const { port } = gw.test.app.server.address() as AddressInfo;
  const socket = connect(port, '127.0.0.1');
  socket.pause();
  let error: string | null = null;
  socket.on('error', (e: NodeJS.ErrnoException) => (error ??= e.code ?? e.message));
  await once(socket, 'connect');
  const request = `POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\nauthorization: Bearer ${gw.key}\r\ncontent-type: application/json\r\n${headers}\r\n`;
  await new Promise<void>((resolve) => socket.write(request + body, () => resolve()));
  let received = '';
  socket.setEncoding('latin1');
  socket.on('data', (text: string) => (received += text));
  socket.resume();
  await once(socket, 'close');
  return { received, error };
}

t.test('a body over the limit is answered 413, never a reset connection', async (t) => {
  t.setTimeout(240_000);
  const gw = await startGateway(t);

  t.test('twenty 11 MB chat bodies sent with fetch all receive 413 request_too_large', async (t) => {
    const outcomes: string[] = [];
    for (let i = 0; i < 20; i += 1) {
      try {
        const response = await fetch(`${gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${gw.key}`, 'content-type': 'application/json' },
          body: ELEVEN_MB_CHAT,
        });
        const body = (await response.json()) as { error?: { code?: string } };
        outcomes.push(`${response.status} ${body.error?.code}`);
      } catch (error) {
        outcomes.push(`failed: ${String((error as Error & { cause?: unknown }).cause ?? error)}`);
      }
    }
    t.same(outcomes, Array(20).fill('413 request_too_large'));
  });

  t.test('a client that reads only after uploading a declared 11 MB body receives the 413', async (t) => {
    const { received, error } = await uploadThenRead(gw, ELEVEN_MB_CHAT, `content-length: ${Buffer.byteLength(ELEVEN_MB_CHAT)}\r\n`);
    t.equal(error, null, 'the connection was not reset');
    t.match(received, /^HTTP\/1\.1 413 /);
    t.match(received, /"code":"request_too_large"/);
  });

  t.test('a client that reads only after uploading a chunked 11 MB body receives the 413', async (t) => {
    const chunks: string[] = [];
    for (let at = 0; at < ELEVEN_MB_CHAT.length; at += 1 << 20) {
      const piece = ELEVEN_MB_CHAT.slice(at, at + (1 << 20));
      chunks.push(`${Buffer.byteLength(piece).toString(16)}\r\n${piece}\r\n`);
    }
    const { received, error } = await uploadThenRead(gw, `${chunks.join('')}0\r\n\r\n`, 'transfer-encoding: chunked\r\n');
    t.equal(error, null, 'the connection was not reset');
    t.match(received, /^HTTP\/1\.1 413 /);
    t.match(received, /"code":"request_too_large"/);
  });
});

t.test('draining a refused body stops at its byte and time bounds', async (t) => {
  const bounds = { maxBytes: 1024 * 1024, maxMs: 60_000 };
  const results: boolean[] = [];
  const server = createServer((request, response) => {
    void drainRequestBody(request, request.url === '/slow' ? { maxBytes: bounds.maxBytes, maxMs: 50 } : bounds).then((drained) => {
      results.push(drained);
      response.writeHead(413, { connection: 'close' }).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => server.close());
  const { port } = server.address() as AddressInfo;
  const endless = async (path: string) => {
    const socket = connect(port, '127.0.0.1');
    // Read (and drop) the answer, so the server's closing is seen.
    socket.on('error', () => undefined).resume();
    await once(socket, 'connect');
    socket.write(`POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-length: 100000000\r\n\r\n`);
    // Only `/` keeps sending (past the byte bound); `/slow` sends nothing more and is cut by time.
    const piece = Buffer.alloc(64 * 1024);
    const feed = () => {
      while (path === '/' && !socket.destroyed && socket.write(piece));
    };
    socket.on('drain', feed);
    feed();
    await new Promise((resolve) => socket.on('close', resolve));
  };
  await endless('/');
  await endless('/slow');
  t.same(results, [false, false], 'each answered without the body having ended');
});

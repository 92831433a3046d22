import { once } from 'node:events';
import { createServer, get, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { SseResponse } from '../../core/http/sse-response.ts';

/** A server whose one response is handed to the test, and a client that has its response's head. */
async function openStream(t: Test): Promise<{ sse: SseResponse; raw: ServerResponse; client: IncomingMessage }> {
  let handed: ServerResponse | undefined;
  const server = createServer((_request, response) => {
    handed = response;
    server.emit('handed');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const handedOver = once(server, 'handed');
  const request = get(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
  request.on('error', () => undefined);
  t.teardown(() => {
    request.destroy();
    server.closeAllConnections();
    server.close();
  });
  await handedOver;
  const raw = handed!;
  const sse = new SseResponse(raw);
  sse.open({});
  // Headers go out with the first write otherwise; the client needs them to have a response.
  raw.flushHeaders();
  const [client] = (await once(request, 'response')) as [IncomingMessage];
  return { sse, raw, client };
}

/** Frames well under the response's buffer (16 KiB): several go out before one must wait. */
const FRAME = 'x'.repeat(1024);

/** Writes frames until a write answers a promise (the response's buffer is full); how many went without one. */
function writeUntilWaiting(sse: SseResponse): { waiting: Promise<void>; written: number } {
  for (let written = 0; written < 100_000; written += 1) {
    const waiting = sse.data(FRAME);
    if (waiting) return { waiting, written };
  }
  throw new Error('no write ever waited');
}

t.test('a frame the client keeps up with is written without a promise', async (t) => {
  const { sse, client } = await openStream(t);
  t.equal(sse.data({ hello: 'world' }), undefined);
  t.equal(sse.event('done', {}), undefined);
  sse.end();
  client.setEncoding('utf8');
  let text = '';
  for await (const part of client) text += part;
  t.equal(text, 'data: {"hello":"world"}\n\nevent: done\ndata: {}\n\n');
});

t.test('a write past the response buffer answers a promise that settles once it drains, losing nothing', async (t) => {
  const { sse, client } = await openStream(t);
  const received = (async () => {
    client.setEncoding('utf8');
    let text = '';
    for await (const part of client) text += part;
    return text;
  })();
  const { waiting, written } = writeUntilWaiting(sse);
  t.ok(written >= 1, `${written} frames went out before one had to wait`);
  await waiting;
  sse.end();
  const frames = (await received).split('\n\n').filter((frame) => frame !== '');
  t.equal(frames.length, written + 1, 'every frame arrived, the one that waited too');
  t.ok(
    frames.every((frame) => frame === `data: ${FRAME}`),
    'each whole',
  );
});

t.test('a client that leaves ends the wait', async (t) => {
  const { sse, raw, client } = await openStream(t);
  client.pause();
  const { waiting } = writeUntilWaiting(sse);
  client.destroy();
  await waiting;
  if (!raw.destroyed) await once(raw, 'close');
  t.ok(sse.clientGone, 'the response knows it is gone');
  t.equal(sse.data('more'), undefined, 'later writes are dropped without waiting');
});

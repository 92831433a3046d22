import { createHash } from 'node:crypto';
import type { LookupAddress } from 'node:dns';
import http from 'node:http';
import type { LookupFunction } from 'node:net';
import type { Duplex } from 'node:stream';
import t from 'tap';
import { Agent, WebSocket } from 'undici';
import { call, listSource, route, startProxy, startUpstream } from './proxy-fixtures.ts';

/** An upstream that answers with who it is and what it was sent. */
function echoing(name: string) {
  return (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.setHeader('connection', 'keep-alive, x-upstream-hop');
      res.setHeader('x-upstream-hop', 'for the proxy only');
      res.end(JSON.stringify({ name, method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
  };
}

t.test('a Host <slug>.<baseDomain> reaches that app, whatever its case and port', async (t) => {
  const hello = await startUpstream(t, echoing('hello'));
  const other = await startUpstream(t, echoing('other'));
  const { port } = await startProxy(t, { source: listSource([route('hello', hello.target), route('other', other.target)]) });

  const first = await call(port, `hello.localhost:${port}`, { path: '/a/b?c=1' });
  t.equal(first.status, 200);
  t.match(JSON.parse(first.body), { name: 'hello', url: '/a/b?c=1' });
  t.equal(JSON.parse((await call(port, 'OTHER.LocalHost')).body).name, 'other');
  t.equal(JSON.parse((await call(port, 'hello.localhost.:9999')).body).name, 'hello', 'a trailing dot and another port name the same app');
});

t.test('the app receives the forwarding headers and a request id; hop-by-hop headers are dropped both ways', async (t) => {
  const hello = await startUpstream(t, echoing('hello'));
  const { port } = await startProxy(t, { source: listSource([route('hello', hello.target)]) });
  const answer = await call(port, 'hello.localhost', {
    method: 'POST',
    body: 'ping',
    headers: { 'x-request-id': 'mine-1', 'x-forwarded-for': '6.6.6.6', 'proxy-authorization': 'Basic secret', 'x-private': 'p', connection: 'keep-alive, x-private' },
  });
  const seen = JSON.parse(answer.body);
  t.equal(seen.body, 'ping', 'the body went through');
  t.match(answer.headers['x-request-id'], /^req_[0-9a-f]{32}$/, 'the client is told the request id');
  t.equal(seen.headers['x-request-id'], answer.headers['x-request-id'], 'the app is told the same id');
  t.equal(seen.headers['x-client-request-id'], 'mine-1', "the client's own id is kept under another name");
  t.equal(seen.headers['x-forwarded-for'], '127.0.0.1', "a client's X-Forwarded-For is not trusted by default");
  t.equal(seen.headers['x-forwarded-proto'], 'http');
  t.equal(seen.headers['x-forwarded-host'], 'hello.localhost');
  t.equal(seen.headers.host, 'hello.localhost', 'the app sees the Host it was asked by');
  t.notOk(seen.headers['proxy-authorization'], 'proxy credentials stay with the proxy');
  t.notOk(seen.headers['x-private'], 'a header the Connection header names is hop-by-hop');
  t.notOk(answer.headers['x-upstream-hop'], "a header the app's Connection header names does not reach the client");
});

t.test('a Host that names no app answers 404 in plain text', async (t) => {
  const hello = await startUpstream(t, echoing('hello'));
  const { port } = await startProxy(t, { source: listSource([route('hello', hello.target)]) });
  for (const host of ['nobody.localhost', 'localhost', 'hello.example.com', 'a.hello.localhost']) {
    const answer = await call(port, host);
    t.equal(answer.status, 404, host);
    t.match(answer.headers['content-type'], /^text\/plain/);
  }
});

t.test('a stopped app answers 503 with retry-after', async (t) => {
  const { port } = await startProxy(t, { source: listSource([route('sleepy', null)]), config: { stoppedRetryAfterSeconds: 7 } });
  const answer = await call(port, 'sleepy.localhost');
  t.equal(answer.status, 503);
  t.equal(answer.headers['retry-after'], '7');
  t.match(answer.headers['content-type'], /^text\/plain/);
});

t.test('an app that cannot be reached answers 502', async (t) => {
  const gone = await startUpstream(t, echoing('gone'));
  await new Promise<void>((resolve) => gone.server.close(() => resolve()));
  const { port } = await startProxy(t, { source: listSource([route('gone', gone.target)]), config: { swapWaitMs: 0 } });
  const answer = await call(port, 'gone.localhost');
  t.equal(answer.status, 502);
  t.match(answer.headers['x-request-id'], /^req_/);
});

t.test('a slow chunked answer reaches the client chunk by chunk', async (t) => {
  // The upstream sends its next chunk only once the client has received the previous one: a proxy
  // that held the answer back would never deliver the first and the test would time out.
  let clientGot: (() => void) | null = null;
  const slow = await startUpstream(t, async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    for (const part of ['one;', 'two;', 'three;']) {
      const received = new Promise<void>((resolve) => (clientGot = resolve));
      res.write(part);
      await received;
    }
    res.end();
  });
  const { port } = await startProxy(t, { source: listSource([route('slow', slow.target)]) });
  const parts = await new Promise<string[]>((resolve, reject) => {
    const seen: string[] = [];
    http
      .get({ host: '127.0.0.1', port, headers: { host: 'slow.localhost' } }, (res) => {
        t.equal(res.headers['transfer-encoding'], 'chunked');
        res.on('data', (chunk: Buffer) => {
          seen.push(chunk.toString());
          clientGot?.();
        });
        res.on('end', () => resolve(seen));
      })
      .on('error', reject);
  });
  t.same(parts, ['one;', 'two;', 'three;']);
});

t.test('a request body is streamed to the app as the client sends it', async (t) => {
  let firstPart: ((text: string) => void) | null = null;
  const sink = await startUpstream(t, (req, res) => {
    const chunks: string[] = [];
    req.on('data', (chunk: Buffer) => {
      chunks.push(chunk.toString());
      firstPart?.(chunk.toString());
      firstPart = null;
    });
    req.on('end', () => res.end(chunks.join('')));
  });
  const { port } = await startProxy(t, { source: listSource([route('sink', sink.target)]) });
  const arrived = new Promise<string>((resolve) => (firstPart = resolve));
  const answer = new Promise<string>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', headers: { host: 'sink.localhost' } }, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => resolve(text));
    });
    req.on('error', reject);
    req.write('first;');
    // The rest is sent only once the app has the first part: a buffering proxy would wait forever.
    void arrived.then(() => req.end('rest'));
  });
  t.equal(await arrived, 'first;');
  t.equal(await answer, 'first;rest');
});

/** A websocket server that echoes text frames: just enough of RFC 6455 for short messages. */
function websocketEcho(server: http.Server): void {
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex) => {
    const accept = createHash('sha1').update(`${req.headers['sec-websocket-key']}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: ${accept}\r\n\r\n`);
    socket.on('data', (frame: Buffer) => {
      const opcode = (frame[0] as number) & 0x0f;
      if (opcode === 0x8) return socket.end(Buffer.from([0x88, 0]));
      const length = (frame[1] as number) & 0x7f; // short frames only (< 126 bytes)
      const mask = frame.subarray(2, 6);
      const payload = Buffer.from(frame.subarray(6, 6 + length).map((byte, i) => byte ^ (mask[i % 4] as number)));
      socket.write(Buffer.concat([Buffer.from([0x81, payload.length]), payload]));
    });
  });
}

t.test('a websocket is piped to the app and back', async (t) => {
  const echo = await startUpstream(t, (_req, res) => res.end('not a websocket'));
  websocketEcho(echo.server);
  const { port } = await startProxy(t, { source: listSource([route('echo', echo.target)]) });
  // The client resolves every name to the proxy, as DNS would for <slug>.<baseDomain>.
  const dispatcher = new Agent({ connect: { host: '127.0.0.1', servername: undefined, lookup: loopbackLookup } });
  t.teardown(() => dispatcher.destroy().catch((e) => console.error('DISPATCHER', e)));
  const socket = new WebSocket(`ws://echo.localhost:${port}/chat`, { dispatcher });
  const reply = await new Promise<string>((resolve, reject) => {
    socket.addEventListener('open', () => socket.send('hello over the proxy'));
    socket.addEventListener('message', (event) => resolve(String(event.data)));
    socket.addEventListener('error', () => reject(new Error('websocket failed')));
  });
  t.equal(reply, 'hello over the proxy');
  const closed = new Promise((resolve) => socket.addEventListener('close', resolve));
  socket.close();
  await closed;
});

/** Every name is the loopback address (node calls a lookup with `all` when it may try several addresses). */
const loopbackLookup: LookupFunction = (_hostname, options, callback) => {
  if (options.all) (callback as unknown as (err: null, addresses: LookupAddress[]) => void)(null, [{ address: '127.0.0.1', family: 4 }]);
  else callback(null, '127.0.0.1', 4);
};

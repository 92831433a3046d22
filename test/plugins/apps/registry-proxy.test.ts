import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { startRegistryProxy } from '../../../plugins/apps/registry-proxy.ts';

/**
 * The build's only way out: CONNECT and plain-HTTP requests to the configured registries pass;
 * anything else is refused with a log line saying why; the outbound guard refuses private
 * registries unless the private network is allowed.
 */
async function upstream(t: Test): Promise<{ port: number }> {
  const server = http.createServer((request, response) => response.end(`registry saw ${request.method} ${request.url}`));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: (server.address() as AddressInfo).port };
}

async function proxy(t: Test, registries: string[], allowPrivate: boolean) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-registry-proxy-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const log: string[] = [];
  const running = await startRegistryProxy({ socketPath: join(dir, 'p.sock'), registries, allowPrivate, log: (line) => log.push(line) });
  t.teardown(() => running.close());
  return { socketPath: join(dir, 'p.sock'), log, running };
}

/** Sends `CONNECT target` over the socket; answers the status line and, when tunnelled, a GET through it. */
function connect(socketPath: string, target: string): Promise<{ status: string; through: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(socketPath);
    let text = '';
    let tunnelled = false;
    socket.on('data', (chunk) => {
      text += chunk.toString();
      if (!tunnelled && text.startsWith('HTTP/1.1 200')) {
        tunnelled = true;
        text = '';
        socket.write('GET /pkg HTTP/1.1\r\nhost: registry\r\nconnection: close\r\n\r\n');
      }
    });
    socket.on('end', () => resolve(tunnelled ? { status: '200', through: text } : { status: text.split(' ')[1] ?? '', through: text }));
    socket.on('error', reject);
    socket.write(`CONNECT ${target} HTTP/1.1\r\nhost: ${target}\r\n\r\n`);
  });
}

t.test('a CONNECT to a configured registry is tunnelled to it', async (t) => {
  const registry = await upstream(t);
  const { socketPath, log } = await proxy(t, [`http://127.0.0.1:${registry.port}/`], true);
  const answer = await connect(socketPath, `127.0.0.1:${registry.port}`);
  t.equal(answer.status, '200');
  t.match(answer.through, /registry saw GET \/pkg/);
  t.same(log, []);
});

t.test('a CONNECT to anything else is refused with 403, and the log says it is not a configured registry', async (t) => {
  const registry = await upstream(t);
  const { socketPath, log, running } = await proxy(t, [`http://127.0.0.1:${registry.port}/`], true);
  const answer = await connect(socketPath, 'example.com:443');
  t.equal(answer.status, '403');
  t.same(log, ['refused CONNECT to example.com:443: not a configured registry']);
  t.equal(running.refused, 1);
});

t.test('a plain-HTTP request through the proxy reaches a configured registry; another host is refused', async (t) => {
  const registry = await upstream(t);
  const { socketPath, log } = await proxy(t, [`http://127.0.0.1:${registry.port}/`], true);
  const get = (url: string) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const request = http.request({ socketPath, method: 'GET', path: url, headers: { host: new URL(url).host } }, (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      });
      request.on('error', reject);
      request.end();
    });
  t.same(await get(`http://127.0.0.1:${registry.port}/tiny-dep`), { status: 200, body: 'registry saw GET /tiny-dep' });
  t.equal((await get('http://example.org/x')).status, 403);
  t.same(log, ['refused GET to example.org:80: not a configured registry']);
});

t.test('a registry on a private address is refused by the outbound guard unless the private network is allowed', async (t) => {
  const registry = await upstream(t);
  const { socketPath, log } = await proxy(t, [`http://127.0.0.1:${registry.port}/`], false);
  const answer = await connect(socketPath, `127.0.0.1:${registry.port}`);
  t.equal(answer.status, '403');
  t.match(log[0], /^refused CONNECT to 127\.0\.0\.1:\d+: Refusing 127\.0\.0\.1: it is not a public internet address/);
});

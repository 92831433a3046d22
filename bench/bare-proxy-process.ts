/**
 * Child process: the thinnest possible HTTP pass-through in Node, the floor the gateway is compared
 * with. It pipes each request's bytes to the fake upstream over keep-alive connections and pipes
 * the answer back: no parsing, no authentication, no routing, no accounting. Whatever the gateway
 * costs beyond this is the gateway's own; what this costs beyond calling the upstream directly is
 * Node's HTTP server and client. Started by bench/gateway-overhead.ts.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exitWithParent, tellParent } from './ipc.ts';

async function main(): Promise<void> {
  const upstream = new URL(process.env.BENCH_UPSTREAM_URL ?? '');
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const server = http.createServer((req, res) => {
    const forward = http.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers, agent }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forward.on('error', () => res.destroy());
    req.pipe(forward);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  exitWithParent(() => new Promise<void>((resolve) => server.close(() => resolve())));
  await tellParent({ type: 'ready', url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
}

main().catch(async (error: unknown) => {
  await tellParent({ type: 'error', message: `bare proxy failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}` });
  process.exit(1);
});

import { chmod, rm } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { assertPublicUrlSync, guardedLookup } from '../../core/net/outbound-url-guard.ts';
import { PROXY_PORT } from './runtime/sandbox.ts';

/**
 * The only way out of a build's sandbox: an HTTP proxy on a unix socket (bound into the sandbox,
 * whose network is unshared) that lets through CONNECT tunnels and plain-HTTP requests to the
 * configured package registries, and nothing else. Every refusal is a line in the build's log, so a
 * build that tried to reach anything else says why it failed. Upstream connects go through the
 * kernel's outbound guard (core/net/outbound-url-guard.ts): a registry name that resolves to a
 * private address is refused unless `outbound.allowPrivateNetwork` (tests' loopback registries).
 *
 * Inside the sandbox a bridge (runtime/sandbox.ts BRIDGE_SCRIPT, a few lines of node started by bwrap) listens on
 * 127.0.0.1:PROXY_PORT in the sandbox's own network namespace and forwards each connection to the
 * socket; `HTTPS_PROXY`, `npm_config_proxy` and friends point there (proxyEnv).
 */
export interface RegistryProxyOptions {
  /** Where the proxy listens (made here, mode 0666: the build's uid connects to it). */
  socketPath: string;
  /** The registries' URLs: their host:port pairs are the allow-list (default ports by scheme). */
  registries: readonly string[];
  /** outbound.allowPrivateNetwork: registries on loopback or a private network may be reached. */
  allowPrivate: boolean;
  /** A line for the build log (refusals and upstream failures). */
  log: (line: string) => void;
  /** Resolver for upstream connects (tests); always wrapped by the outbound guard unless allowPrivate. */
  lookup?: net.LookupFunction;
}

/** The variables that send npm, pip and other clients through the bridge. */
export function proxyEnv(): Record<string, string> {
  const url = `http://127.0.0.1:${PROXY_PORT}`;
  return {
    HTTP_PROXY: url,
    HTTPS_PROXY: url,
    http_proxy: url,
    https_proxy: url,
    npm_config_proxy: url,
    npm_config_https_proxy: url,
    // The bridge itself is on loopback: nothing may bypass the proxy.
    NO_PROXY: '',
    no_proxy: '',
  };
}

/** `host:port` of a registry URL, the port defaulting by scheme. */
export function registryAuthority(url: string): string {
  const parsed = new URL(url);
  const port = parsed.port || (parsed.protocol === 'http:' ? '80' : '443');
  return `${parsed.hostname.toLowerCase().replace(/^\[|\]$/g, '')}:${port}`;
}

export interface RunningRegistryProxy {
  /** How many connections or requests were refused (a build's log has each). */
  readonly refused: number;
  close(): Promise<void>;
}

export async function startRegistryProxy(options: RegistryProxyOptions): Promise<RunningRegistryProxy> {
  const allowed = new Set(options.registries.map(registryAuthority));
  const lookup = options.allowPrivate ? options.lookup : guardedLookup(options.lookup);
  const sockets = new Set<Duplex>();
  let refused = 0;

  /** Null when the target may be reached, else why not (written to the log by the caller). */
  const refusal = (host: string, port: string): string | null => {
    if (!allowed.has(`${host.toLowerCase()}:${port}`)) return 'not a configured registry';
    try {
      // Literal private addresses and localhost names; a name resolving privately is caught at connect.
      assertPublicUrlSync(`https://${net.isIPv6(host) ? `[${host}]` : host}:${port}/`, { allowPrivate: options.allowPrivate });
      return null;
    } catch (error) {
      return error instanceof Error ? error.message : String(error);
    }
  };

  const server = http.createServer((request, response) => {
    let target: URL;
    try {
      target = new URL(request.url ?? '');
      if (target.protocol !== 'http:') throw new Error('not http');
    } catch {
      refused++;
      options.log(`refused ${request.method} ${request.url}: a proxy takes absolute http:// URLs (https goes through CONNECT)`);
      response.writeHead(400, { 'content-type': 'text/plain' }).end('absolute http:// URL expected\n');
      return;
    }
    const host = target.hostname.replace(/^\[|\]$/g, '');
    const port = target.port || '80';
    const why = refusal(host, port);
    if (why) {
      refused++;
      options.log(`refused ${request.method} to ${host}:${port}: ${why}`);
      response.writeHead(403, { 'content-type': 'text/plain' }).end(`${host}:${port}: ${why}\n`);
      return;
    }
    const headers = { ...request.headers };
    delete headers['proxy-connection'];
    delete headers['proxy-authorization'];
    const upstream = http.request({ host, port: Number(port), method: request.method, path: `${target.pathname}${target.search}`, headers, lookup }, (answer) => {
      response.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(response);
    });
    upstream.on('error', (error) => {
      options.log(`${request.method} to ${host}:${port} failed: ${error.message}`);
      if (!response.headersSent) response.writeHead(502, { 'content-type': 'text/plain' });
      response.end();
    });
    request.pipe(upstream);
  });

  server.on('connect', (request: http.IncomingMessage, client: Duplex, head: Buffer) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => client.destroy());
    const match = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(request.url ?? '');
    const host = match?.[1] ?? '';
    const port = match?.[2] ?? '';
    const why = match ? refusal(host, port) : 'not host:port';
    if (why) {
      refused++;
      options.log(`refused CONNECT to ${request.url}: ${why}`);
      client.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n${request.url}: ${why}\n`);
      return;
    }
    const upstream = net.connect({ host, port: Number(port), ...(lookup ? { lookup } : {}) });
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.once('connect', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client).pipe(upstream);
    });
    upstream.on('error', (error) => {
      options.log(`CONNECT to ${host}:${port} failed: ${error.message}`);
      if (upstream.connecting) client.end('HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\n\r\n');
      else client.destroy();
    });
  });
  server.on('clientError', (_error, socket) => socket.destroy());

  await rm(options.socketPath, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.socketPath, () => resolve());
  });
  // The build runs as a uid of its own: it must be able to connect.
  await chmod(options.socketPath, 0o666);
  return {
    get refused() {
      return refused;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(options.socketPath, { force: true });
    },
  };
}

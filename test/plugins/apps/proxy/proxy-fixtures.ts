import { randomUUID } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MemoryPubSub } from '../../../../adapters/memory/memory-pubsub.ts';
import type { PubSub } from '../../../../core/ports/coordination.ts';
import type { Queryable } from '../../../../core/ports/database.ts';
import { type AppRoute, appsProxyConfigSchema, type RouteSource, type RunningAppsProxy, startAppsProxy } from '../../../../plugins/apps/proxy/index.ts';
import type { AppsProxyConfig } from '../../../../plugins/apps/proxy/proxy-config.ts';

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** An app instance: a plain node server on a free loopback port. */
export async function startUpstream(t: Teardown, handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ server: http.Server; target: string }> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => closeServer(server).catch((e) => console.error('SERVER', e)));
  return { server, target: `127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** Closes a server at once, its kept-alive connections too (what an instance going away does). */
export function closeServer(server: http.Server): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  return closed;
}

export function route(slug: string, target: string | null, fields: Partial<AppRoute> = {}): AppRoute {
  return {
    slug,
    organizationId: randomUUID(),
    appId: randomUUID(),
    serviceId: randomUUID(),
    deploymentId: randomUUID(),
    target,
    revision: 1,
    ...fields,
  };
}

/** A RouteSource over a list the test edits; `failing` makes the next loads throw (database away). */
export function listSource(routes: AppRoute[]): RouteSource & { routes: AppRoute[]; failing: boolean } {
  return {
    routes,
    failing: false,
    async loadRoutes() {
      if (this.failing) throw new Error('database unreachable');
      return this.routes;
    },
  };
}

/** Rows go nowhere unless the test gives a database: a Queryable that stores nothing and says so. */
export const noDatabase: Queryable = {
  async query() {
    throw new Error('no database in this test');
  },
};

export async function startProxy(t: Teardown, options: { source: RouteSource; pubsub?: PubSub; database?: Queryable; config?: Partial<AppsProxyConfig> }): Promise<RunningAppsProxy> {
  const config = { ...appsProxyConfigSchema.parse({ port: 0 }), ...options.config };
  const running = await startAppsProxy({
    config,
    database: options.database ?? noDatabase,
    pubsub: options.pubsub ?? new MemoryPubSub(),
    source: options.source,
    metrics: null,
    logger: { warn() {}, error() {} },
  });
  t.teardown(() => running.stop(100).catch((e) => console.error('PROXY', e)));
  return running;
}

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

const agent = new http.Agent({ keepAlive: true });

/** A request to the proxy naming `host` (the port in the URL is the proxy's: what a browser does for `http://<slug>.localhost:<port>`). */
export function call(port: number, host: string, options: { path?: string; method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: options.path ?? '/', method: options.method ?? 'GET', headers: { host, ...options.headers }, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

import type { AppConfig } from '../../../config/schema.ts';
import type { GatewayMetrics } from '../../../core/gateway/metrics.ts';
import type { PubSub } from '../../../core/ports/coordination.ts';
import type { Queryable } from '../../../core/ports/database.ts';
import { AppsProxy } from './apps-proxy.ts';
import type { AppsProxyConfig } from './proxy-config.ts';
import { AppRequestRows } from './request-rows.ts';
import { RouteTable, type RouteSource } from './route-table.ts';

export { AppsProxy, slugOf } from './apps-proxy.ts';
export { type AppsProxyConfig, appsProxyConfigSchema } from './proxy-config.ts';
export { type AppRequestRow, AppRequestRows, appRequestsEraser, appsProxyMigrations, insertAppRequests } from './request-rows.ts';
export { type AppRoute, publishRoute, publishRouteRemoval, ROUTES_CHANNEL, RouteTable, type RouteSource } from './route-table.ts';

export interface AppsProxyDeps {
  config: AppsProxyConfig;
  database: Queryable;
  pubsub: PubSub;
  /** The apps plugin's table of routes, read in full at start and every `reloadEveryMs`. */
  source: RouteSource;
  metrics: GatewayMetrics | null;
  logger: { warn(details: object, message: string): void; error(details: object, message: string): void };
}

/** The running proxy and what it is made of: `stop()` it on shutdown. */
export interface RunningAppsProxy {
  readonly proxy: AppsProxy;
  readonly routes: RouteTable;
  readonly rows: AppRequestRows;
  readonly port: number;
  stop(graceMs?: number): Promise<void>;
}

/** The proxy listens in the roles that serve HTTP (`api`, `all`), not in a worker-only process. */
export function servesAppsProxy(appConfig: Pick<AppConfig, 'server'>): boolean {
  return appConfig.server.role !== 'worker';
}

/**
 * Starts the routes (subscribed, then loaded), the row writer and the listener, in that order, so
 * the first request already finds every route. Metrics are registered once per deps.metrics.
 */
export async function startAppsProxy(deps: AppsProxyDeps): Promise<RunningAppsProxy> {
  const { config, logger } = deps;
  const routes = new RouteTable({
    pubsub: deps.pubsub,
    source: deps.source,
    reloadEveryMs: config.reloadEveryMs,
    onReloadError: (error) => logger.warn({ err: messageOf(error) }, 'apps proxy: reloading the routes failed; serving the routes held'),
  });
  const rows = new AppRequestRows(deps.database, config.rows, (event) => {
    if (event.kind === 'write_failed') logger.warn({ err: messageOf(event.error), rows: event.rows }, 'apps proxy: writing request rows failed; will retry');
    else logger.error({}, 'apps proxy: request-row queue full: rows are dropped until the database takes them again');
  });
  const proxy = new AppsProxy({
    host: config.host,
    port: config.port,
    baseDomain: config.baseDomain,
    routes,
    record: (row) => rows.record(row),
    swapWaitMs: config.swapWaitMs,
    stoppedRetryAfterSeconds: config.stoppedRetryAfterSeconds,
    trustForwarded: config.trustForwarded,
    logger,
  });
  await routes.start();
  rows.start();
  try {
    await proxy.listen();
  } catch (error) {
    await routes.stop();
    await rows.stop();
    throw error;
  }
  if (deps.metrics) {
    deps.metrics.gauge('svc_apps_proxy_rows_queued', 'Apps-proxy request rows waiting to be written', () => rows.snapshot().queued);
    deps.metrics.counter('svc_apps_proxy_rows_dropped_total', 'Apps-proxy request rows dropped because the queue was full', () => rows.snapshot().dropped);
    deps.metrics.counter('svc_apps_proxy_row_write_failures_total', 'Apps-proxy request-row writes that failed and were retried', () => rows.snapshot().failedFlushes);
    deps.metrics.gauge('svc_apps_proxy_routes', 'Apps the proxy holds a route for', () => routes.all().length);
  }
  return {
    proxy,
    routes,
    rows,
    port: proxy.port,
    async stop(graceMs) {
      await proxy.close(graceMs);
      await routes.stop();
      const left = await rows.stop();
      if (left > 0) logger.error({ rows: left }, 'apps proxy: request rows could not be written before shutdown');
    },
  };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Child process: the apps proxy (plugins/apps/proxy) as a replica runs it, with one app whose
 * route names the bench's fake upstream. Routes come from a fixed source over in-memory pub/sub;
 * request rows are built and batched as always and handed to a sink that stores nothing, so the
 * figures are the proxy's own work, not a database's. Started by bench/apps-proxy.ts.
 */
import { randomUUID } from 'node:crypto';
import { MemoryPubSub } from '../adapters/memory/memory-pubsub.ts';
import { appsProxyConfigSchema, startAppsProxy } from '../plugins/apps/proxy/index.ts';
import { exitWithParent, tellParent } from './ipc.ts';

/** The app's slug: the orchestrator sends `Host: <slug>.localhost`. */
const BENCH_APP = process.env.BENCH_APP ?? 'bench';

async function main(): Promise<void> {
  const upstream = new URL(process.env.BENCH_UPSTREAM_URL ?? '');
  let rowsStored = 0;
  const running = await startAppsProxy({
    config: appsProxyConfigSchema.parse({ port: 0 }),
    database: {
      async query(_sql, params) {
        rowsStored += ((params ?? [])[0] as unknown[]).length;
        return { rows: [], rowCount: 0 };
      },
    },
    pubsub: new MemoryPubSub(),
    source: {
      async loadRoutes() {
        return [
          {
            slug: BENCH_APP,
            organizationId: randomUUID(),
            appId: randomUUID(),
            serviceId: randomUUID(),
            deploymentId: randomUUID(),
            target: upstream.host,
            revision: 1,
          },
        ];
      },
    },
    metrics: null,
    logger: { warn: (details, message) => console.log(message, JSON.stringify(details)), error: (details, message) => console.log(message, JSON.stringify(details)) },
  });
  exitWithParent(async () => {
    await running.stop(1_000);
    console.log(`rows handed to the store: ${rowsStored}, dropped: ${running.rows.snapshot().dropped}`);
  });
  await tellParent({ type: 'ready', url: `http://127.0.0.1:${running.port}` });
}

main().catch(async (error: unknown) => {
  await tellParent({ type: 'error', message: `apps proxy failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}` });
  process.exit(1);
});

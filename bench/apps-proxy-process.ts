/**
 * Child process: the apps proxy (plugins/apps/proxy, the module the service runs, compiled as a
 * deployment would be) with one app whose route names the bench's fake upstream. Routes come from a
 * fixed source over in-memory pub/sub. Request rows are built and batched as always and written
 * where BENCH_APPS_ROWS says:
 *   `pglite` (the default, what `npm start` runs): an embedded PGlite database on disk in
 *     BENCH_DATA_DIR, in this process, as the service's own database shares the proxy's process;
 *   `postgres`: PostgreSQL at BENCH_DATABASE_URL, in the schema BENCH_DATABASE_SCHEMA (the parent
 *     drops it afterwards);
 *   `none`: a sink that counts the rows and stores nothing (the proxy's own work alone).
 * At its end it prints how many rows were written, dropped and failed. Started by bench/apps-proxy.ts.
 */
import { randomUUID } from 'node:crypto';
import { MemoryPubSub } from '../adapters/memory/memory-pubsub.ts';
import { createPgDatabase } from '../adapters/pg/pg-database.ts';
import { createPgliteDatabase } from '../adapters/pglite/pglite-database.ts';
import { runMigrations } from '../adapters/sql/migrator.ts';
import type { Database, Queryable } from '../core/ports/database.ts';
import { appsProxyConfigSchema, appsProxyMigrations, startAppsProxy } from '../plugins/apps/proxy/index.ts';
import { exitWithParent, tellParent } from './ipc.ts';

/** The app's slug: the orchestrator sends `Host: <slug>.localhost`. */
const BENCH_APP = process.env.BENCH_APP ?? 'bench';
const ROWS = process.env.BENCH_APPS_ROWS ?? 'pglite';

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required with BENCH_APPS_ROWS=${ROWS}`);
  return value;
}

/** The rows' store; null for the sink. */
async function openDatabase(): Promise<Database | null> {
  if (ROWS === 'none') return null;
  const database =
    ROWS === 'postgres'
      ? await createPgDatabase({ url: required('BENCH_DATABASE_URL'), schema: required('BENCH_DATABASE_SCHEMA') })
      : ROWS === 'pglite'
        ? await createPgliteDatabase({ dataDir: required('BENCH_DATA_DIR') })
        : null;
  if (!database) throw new Error(`BENCH_APPS_ROWS=${ROWS}: must be pglite, postgres or none`);
  await runMigrations(database, appsProxyMigrations);
  return database;
}

async function main(): Promise<void> {
  const upstream = new URL(process.env.BENCH_UPSTREAM_URL ?? '');
  const database = await openDatabase();
  let rowsSunk = 0;
  const sink: Queryable = {
    async query(_sql, params) {
      rowsSunk += ((params ?? [])[0] as unknown[]).length;
      return { rows: [], rowCount: 0 };
    },
  };
  const running = await startAppsProxy({
    config: appsProxyConfigSchema.parse({ port: 0 }),
    database: database ?? sink,
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
    logger: {
      warn: (details, message) => console.log(message, JSON.stringify(details)),
      error: (details, message) => console.log(message, JSON.stringify(details)),
    },
  });
  exitWithParent(
    async () => {
      // stop() writes what is queued first.
      await running.stop(1_000);
      const { written, dropped, failedFlushes } = running.rows.snapshot();
      let stored = `${rowsSunk} handed to a sink that stores nothing`;
      if (database) {
        const { rows } = await database.query<{ n: string }>('SELECT count(*)::text AS n FROM app_requests');
        stored = `${rows[0]?.n} in app_requests (${database.kind})`;
        await database.close();
      }
      const counts = `${written} written, ${dropped} dropped, ${failedFlushes} failed writes`;
      console.log(`  apps proxy rows: ${counts}; ${stored}`);
    },
    undefined,
    30_000,
  );
  await tellParent({ type: 'ready', url: `http://127.0.0.1:${running.port}` });
}

main().catch(async (error: unknown) => {
  const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
  await tellParent({ type: 'error', message: `apps proxy failed to start: ${message}` });
  process.exit(1);
});

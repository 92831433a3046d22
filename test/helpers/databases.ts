import tap from 'tap';
import type { Database } from '../../core/ports/database.ts';
import { createPgDatabase } from '../../adapters/pg/pg-database.ts';
import { createPgliteDatabase } from '../../adapters/pglite/pglite-database.ts';
import { dropSchema, randomSchemaName, testPgUrl } from './pg-schemas.ts';

export { dropSchema, randomSchemaName, testPgUrl };

export interface DatabaseBackend {
  name: 'pglite' | 'postgres';
  create(): Promise<{ db: Database; cleanup(): Promise<void> }>;
}

/**
 * In-memory PGlite always; PostgreSQL only when TEST_PG_URL is set. Each create() is a fresh,
 * empty database (PGlite: a new instance; PostgreSQL: a new random schema dropped on cleanup).
 */
export function databaseBackends(): DatabaseBackend[] {
  if (testPgUrl() === undefined) reportSkippedBackend('postgres', 'TEST_PG_URL is not set: these storage tests ran on PGlite only');
  const backends: DatabaseBackend[] = [
    {
      name: 'pglite',
      async create() {
        const db = await createPgliteDatabase({ reuseClusterImage: true });
        return { db, cleanup: () => db.close() };
      },
    },
  ];
  const url = testPgUrl();
  if (url !== undefined) {
    backends.push({
      name: 'postgres',
      async create() {
        const schema = randomSchemaName();
        const db = await createPgDatabase({ url, schema, poolSize: 5, applicationName: 'svc-gateway-test' });
        return {
          db,
          async cleanup() {
            await db.close();
            await dropSchema(url, schema);
          },
        };
      },
    });
  }
  return backends;
}

/**
 * A fresh schema for tests that need several independent Database objects on the same data (two
 * replicas). Open as many createPgDatabase(options) as needed, close them, then call cleanup().
 * Requires TEST_PG_URL.
 */
export async function createSharedPgSchema(): Promise<{ options: { url: string; schema: string }; cleanup(): Promise<void> }> {
  const url = testPgUrl();
  if (url === undefined) throw new Error('createSharedPgSchema needs TEST_PG_URL');
  const schema = randomSchemaName();
  return { options: { url, schema }, cleanup: () => dropSchema(url, schema) };
}

const reportedSkips = new Set<string>();

/**
 * A local run without the real servers says so, once per test file and backend: a skipped test
 * named for the backend whose reason names the variable to set, which tap lists with the other skips.
 * Without it a contract suite that quietly ran on PGlite alone looks the same as one that ran on both.
 */
export function reportSkippedBackend(backend: string, reason: string): void {
  if (reportedSkips.has(backend)) return;
  reportedSkips.add(backend);
  tap.test(backend, { skip: reason }, () => undefined);
}

import type { Database } from '../core/ports/database.ts';
import { createPgDatabase } from './pg/pg-database.ts';
import { createPgliteDatabase } from './pglite/pglite-database.ts';

export type DatabaseConfig =
  | { driver: 'pglite'; dataDir?: string; reuseClusterImage?: boolean }
  | { driver: 'postgres'; url: string; schema?: string; poolSize?: number; applicationName?: string };

/** The returned adapters also implement ScriptQueryable (exec), which runMigrations relies on. */
export async function createDatabase(config: DatabaseConfig): Promise<Database> {
  switch (config.driver) {
    case 'pglite':
      // In-memory databases are throwaway (tests, demos): start each from a cached cluster image.
      return createPgliteDatabase({ ...config, reuseClusterImage: config.reuseClusterImage ?? config.dataDir === 'memory://' });
    case 'postgres':
      return createPgDatabase(config);
  }
}

import type { DatabaseConfig } from '../config/embedded-database.ts';
import type { Database } from '../core/ports/database.ts';

/** The returned adapters also implement ScriptQueryable (exec), which runMigrations relies on. */
export async function createDatabase(config: DatabaseConfig): Promise<Database> {
  switch (config.driver) {
    // Imported on use: each driver is tens of MiB of code the other deployments never need.
    case 'pglite': {
      const { createPgliteDatabase } = await import('../adapters/pglite/pglite-database.ts');
      // In-memory databases are throwaway (tests, demos): start each from a cached cluster image.
      return createPgliteDatabase({ ...config, reuseClusterImage: config.reuseClusterImage ?? config.dataDir === 'memory://' });
    }
    case 'postgres': {
      const { createPgDatabase } = await import('../adapters/pg/pg-database.ts');
      return createPgDatabase(config);
    }
  }
}

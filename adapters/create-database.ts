import type { Database } from '../core/ports/database.ts';

export type DatabaseConfig =
  | { driver: 'pglite'; dataDir?: string; reuseClusterImage?: boolean }
  | { driver: 'postgres'; url: string; schema?: string; poolSize?: number; applicationName?: string };

/** The returned adapters also implement ScriptQueryable (exec), which runMigrations relies on. */
export async function createDatabase(config: DatabaseConfig): Promise<Database> {
  switch (config.driver) {
    // Imported on use: each driver is tens of MiB of code the other deployments never need.
    case 'pglite': {
      const { createPgliteDatabase } = await import('./pglite/pglite-database.ts');
      // In-memory databases are throwaway (tests, demos): start each from a cached cluster image.
      return createPgliteDatabase({ ...config, reuseClusterImage: config.reuseClusterImage ?? config.dataDir === 'memory://' });
    }
    case 'postgres': {
      const { createPgDatabase } = await import('./pg/pg-database.ts');
      return createPgDatabase(config);
    }
  }
}

/** The embedded database kept in a directory: the default deployment, one process, files on its disk. */
export function isEmbeddedOnDisk(config: DatabaseConfig): boolean {
  return config.driver === 'pglite' && config.dataDir !== undefined && config.dataDir !== '' && !config.dataDir.startsWith('memory://');
}

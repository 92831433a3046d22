/**
 * The `storage.database` section as code builds it (the schema's defaults optional), beside the one
 * question about it that several layers ask. It lives in config/ so that neither config/ nor
 * core/ has to reach into the adapters to know what the operator chose.
 */
export type DatabaseConfig =
  | { driver: 'pglite'; dataDir?: string; reuseClusterImage?: boolean }
  | { driver: 'postgres'; url: string; schema?: string; poolSize?: number; applicationName?: string };

/** The embedded database kept in a directory: the default deployment, one process, files on its disk. */
export function isEmbeddedOnDisk(config: DatabaseConfig): boolean {
  return config.driver === 'pglite' && config.dataDir !== undefined && config.dataDir !== '' && !config.dataDir.startsWith('memory://');
}

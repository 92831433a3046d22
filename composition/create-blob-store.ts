import path from 'node:path';
import type { AppConfig } from '../config/schema.ts';
import type { BlobStore } from '../core/ports/blobs.ts';
import type { Queryable } from '../core/ports/database.ts';
import { isEmbeddedOnDisk } from '../config/embedded-database.ts';
import { FilesystemBlobStore } from '../adapters/filesystem/filesystem-blob-store.ts';
import { SqlBlobStore } from '../adapters/sql/blob-store.ts';

/** What `storage.blobs` means once its default is applied (see config/schema.ts). */
export function blobStorageOf(storage: AppConfig['storage']): { driver: 'filesystem'; dir: string } | { driver: 'database' } {
  const blobs = storage.blobs ?? (isEmbeddedOnDisk(storage.database) ? { driver: 'filesystem' as const } : { driver: 'database' as const });
  if (blobs.driver === 'database') return blobs;
  return { driver: 'filesystem', dir: path.resolve(blobs.dir ?? path.join(storage.dataDir, 'blobs')) };
}

/** Nothing is touched on disk until the first put. */
export function createBlobStore(storage: AppConfig['storage'], database: Queryable): BlobStore {
  const blobs = blobStorageOf(storage);
  return blobs.driver === 'database' ? new SqlBlobStore(database) : new FilesystemBlobStore(blobs.dir);
}

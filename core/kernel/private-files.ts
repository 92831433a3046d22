import { chmodSync, lstatSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import type { AppConfig } from '../../config/schema.ts';
import { isEmbeddedOnDisk } from '../../config/embedded-database.ts';

/**
 * Modes of the service's own files (the embedded database, the billing journal, blobs, the key
 * file): the user the service runs as, nobody else. They hold live set-password tokens, keys'
 * hashes and the key that opens customer secrets. Code that creates them states these modes, so
 * they hold whatever the process umask is (main.ts also narrows the umask, for files no code names
 * a mode for).
 */
export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

/** Permission bits for the group and for everyone else: what the service's own files never have. */
export const SHARED_BITS = 0o077;

/**
 * The directories holding the service's own files: `storage.dataDir`, and the embedded database's
 * and the blob store's directories when configured outside it. A directory inside another is left
 * to the walk of the outer one.
 */
export function privateDirectoriesOf(config: AppConfig): string[] {
  const { storage } = config;
  const { database, blobs } = storage;
  const directories = [path.resolve(storage.dataDir)];
  if (isEmbeddedOnDisk(database) && database.driver === 'pglite') directories.push(path.resolve(database.dataDir));
  if (blobs?.driver === 'filesystem' && blobs.dir !== undefined) directories.push(path.resolve(blobs.dir));
  const outermost = (dir: string) => !directories.some((other) => other !== dir && dir.startsWith(other + path.sep));
  return [...new Set(directories)].filter(outermost);
}

export interface Tightening {
  /** Files and directories whose group and other bits were cleared. */
  tightened: number;
  /** Paths that could not be changed (another user's files). */
  failed: string[];
}

/**
 * Clears the group and other permission bits of `root` and of everything under it, for a data
 * directory an earlier version (or a copy, or a permissive umask) left readable by other users.
 * Synchronous and one lstat per entry: it runs once at start, before anything opens these files,
 * and a 1,000-file embedded database takes milliseconds. Symbolic links are neither followed nor
 * changed (chmod would change their target, which may be anybody's), except a root that is one.
 * A missing root is nothing to do.
 */
export function tightenTree(root: string): Tightening {
  const result: Tightening = { tightened: 0, failed: [] };
  // Entries may vanish while the walk runs (a replica sharing the directory deletes a segment):
  // ENOENT is nothing to do; any other failure is reported, and the walk goes on.
  const attempt = <T>(file: string, work: () => T): T | null => {
    try {
      return work();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') result.failed.push(file);
      return null;
    }
  };
  const pending = [root];
  while (pending.length > 0) {
    const current = pending.pop()!;
    // The root itself may be a link to where the operator keeps the data; what is inside is not followed.
    const stats = attempt(current, () => (current === root ? statSync(current) : lstatSync(current)));
    if (stats === null || stats.isSymbolicLink()) continue;
    if ((stats.mode & SHARED_BITS) !== 0) {
      const changed = attempt(current, () => {
        chmodSync(current, stats.mode & 0o7777 & ~SHARED_BITS);
        return true;
      });
      if (changed) result.tightened += 1;
    }
    if (!stats.isDirectory()) continue;
    for (const name of attempt(current, () => readdirSync(current)) ?? []) pending.push(path.join(current, name));
  }
  return result;
}

import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite, types, type PGliteOptions, type Results } from '@electric-sql/pglite';
import type { Database, QueryResult, Transaction } from '../../core/ports/database.ts';
import { PRIVATE_DIR_MODE } from '../../core/kernel/private-files.ts';
import { translated, translateDatabaseError } from '../sql/database-errors.ts';
import { PrivateNodeFS } from './private-node-fs.ts';
import { runAfterCommit, type ScriptQueryable } from '../sql/script-runner.ts';

export interface PgliteDatabaseOptions {
  /** A directory (created if missing). Absent or `memory://…`: an in-memory database. */
  dataDir?: string;
  /**
   * In-memory only. Start from a copy of the first in-memory cluster this process initialised
   * instead of running initdb again (~1 s → ~0.3 s per instance). Costs one ~40 MB image kept for
   * the life of the process, so it is meant for test suites that create many databases.
   */
  reuseClusterImage?: boolean;
}

/** PGlite's default int8 parser returns a JS number, which silently rounds money above 2^53. */
const parsers: NonNullable<PGliteOptions['parsers']> = {
  [types.INT8]: (text: string) => BigInt(text),
};

/**
 * PostgreSQL's default 128 MB of shared buffers is sized for a server; embedded in the gateway's
 * process it would be most of its memory. 16 MB holds a small deployment's working set.
 */
const postgresqlconf = ['shared_buffers = 16MB'];
const base = { parsers, postgresqlconf } as PGliteOptions;

let clusterImage: Promise<File | Blob> | undefined;
/** The cluster image this process is writing to the cache file, if any (see clusterImageWritten). */
let imageWrite: Promise<void> = Promise.resolve();

/**
 * Resolves once the cluster image this process last started writing to the cache file is there
 * (or its write failed, which only costs speed). Databases open without waiting for it; a test
 * about the cache awaits it.
 */
export function clusterImageWritten(): Promise<void> {
  return imageWrite;
}

/**
 * Where a freshly initialised cluster is kept between processes (each test file is one): initdb
 * costs about a second of CPU, reading the image back a few milliseconds. The name carries
 * PGlite's version and the settings above, so an upgrade or a changed setting never loads a stale
 * image; a file that does not load is ignored and written again.
 */
export function clusterImageFile(): string | null {
  try {
    const entry = fileURLToPath(import.meta.resolve('@electric-sql/pglite'));
    let dir = path.dirname(entry);
    while (!existsSync(path.join(dir, 'package.json')) && path.dirname(dir) !== dir) dir = path.dirname(dir);
    const { version } = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string };
    const settings = createHash('sha1').update(JSON.stringify(postgresqlconf)).digest('hex').slice(0, 12);
    // The package's own node_modules: the cache lives and dies with the installed dependencies.
    return path.join(dir, '..', '..', '.cache', 'svc-pglite', `cluster-${version}-${settings}.tar`);
  } catch {
    return null;
  }
}

function readCachedImage(file: string | null): Blob | undefined {
  if (file === null || !existsSync(file)) return undefined;
  try {
    return new Blob([readFileSync(file)]);
  } catch {
    return undefined;
  }
}

async function writeCachedImage(file: string | null, image: File | Blob): Promise<void> {
  if (file === null) return;
  try {
    mkdirSync(path.dirname(file), { recursive: true });
    // Another test file may write the same image at the same time: whole files only, by rename.
    const temporary = `${file}.${process.pid}.${Date.now()}`;
    writeFileSync(temporary, Buffer.from(await image.arrayBuffer()));
    renameSync(temporary, file);
  } catch {
    // Only speed is lost.
  }
}

async function openInMemory(reuseImage: boolean): Promise<PGlite> {
  if (!reuseImage) return PGlite.create(base);
  if (clusterImage !== undefined) {
    // A failed image only costs speed: fall back to a normal initdb.
    const image = await clusterImage.catch(() => undefined);
    return PGlite.create(image === undefined ? base : { ...base, loadDataDir: image });
  }
  const file = clusterImageFile();
  const cached = readCachedImage(file);
  if (cached !== undefined) {
    const image = Promise.resolve(cached);
    clusterImage = image;
    try {
      return await PGlite.create({ ...base, loadDataDir: cached });
    } catch {
      // A damaged or foreign file: initialise afresh below, and replace it.
      if (clusterImage === image) clusterImage = undefined;
    }
  }
  // The first instance donates its freshly initialised files before anyone has written to it, so
  // no separate seed instance (another full initdb) is needed.
  const first = PGlite.create(base);
  const image = first.then((db) => db.dumpDataDir('none'));
  clusterImage = image;
  imageWrite = image.then((blob) => writeCachedImage(file, blob)).catch(() => undefined);
  image.catch(() => {
    if (clusterImage === image) clusterImage = undefined;
  });
  const db = await first;
  await image.catch(() => undefined);
  return db;
}

function resolveDataDir(dataDir: string | undefined): string | undefined {
  if (dataDir === undefined || dataDir === '' || dataDir.startsWith('memory://')) return undefined;
  return path.resolve(dataDir.startsWith('file://') ? fileURLToPath(dataDir) : dataDir);
}

function toResult<R>(result: Results<R>): QueryResult<R> {
  // affectedRows is only set for INSERT/UPDATE/DELETE; pg's rowCount also counts SELECTed rows.
  return { rows: result.rows, rowCount: Math.max(result.affectedRows ?? 0, result.rows.length) };
}

/**
 * PGlite is a single session, so isolation comes from its own mutex: pglite.query/exec and
 * pglite.transaction all queue on the same lock, and transaction() holds it until COMMIT/ROLLBACK.
 * A query on the Database issued while a transaction is open therefore waits for it instead of
 * running inside it. The flip side: calling the Database (not tx) from inside a transaction
 * callback and awaiting it deadlocks; inside a transaction always use tx.
 */
export async function createPgliteDatabase(options: PgliteDatabaseOptions = {}): Promise<Database & ScriptQueryable> {
  const dataDir = resolveDataDir(options.dataDir);
  let pglite: PGlite;
  if (dataDir === undefined) {
    pglite = await openInMemory(options.reuseClusterImage === true);
  } else {
    await mkdir(dataDir, { recursive: true, mode: PRIVATE_DIR_MODE });
    pglite = await PGlite.create({ ...base, fs: new PrivateNodeFS(dataDir) });
  }

  return {
    kind: 'pglite',
    async query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]) {
      return toResult(await translated(pglite.query<R>(sql, params === undefined ? [] : [...params])));
    },
    async exec(sql: string) {
      await translated(pglite.exec(sql));
    },
    async transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
      const committed: Array<() => void> = [];
      // The callback's own errors leave untouched; only BEGIN/COMMIT and a closed PGlite are translated here.
      let fromCallback: { error: unknown } | undefined;
      let result: T;
      try {
        result = await pglite.transaction(async (inner) => {
          const tx: ScriptQueryable & Transaction = {
            async query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]) {
              return toResult(await translated(inner.query<R>(sql, params === undefined ? [] : [...params])));
            },
            async exec(sql: string) {
              await translated(inner.exec(sql));
            },
            afterCommit(callback: () => void) {
              committed.push(callback);
            },
          };
          try {
            return await fn(tx);
          } catch (error) {
            fromCallback = { error };
            throw error;
          }
        });
      } catch (error) {
        throw fromCallback?.error === error ? error : translateDatabaseError(error);
      }
      runAfterCommit(committed);
      return result;
    },
    async close() {
      if (!pglite.closed) await pglite.close();
    },
  };
}

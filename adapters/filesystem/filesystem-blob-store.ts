import { randomBytes } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, rm, stat, unlink } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { assertBlobKey, assertBlobListPrefix, blobInfo, clampRange, measure, newBlobKey } from '../../core/services/blob-rules.ts';
import type { BlobInfo, BlobPutOptions, BlobStore, ByteRange } from '../../core/ports/blobs.ts';
import type { Queryable } from '../../core/ports/database.ts';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../../core/kernel/private-files.ts';

interface MetaFile {
  size: number;
  sha256: string;
  contentType: string;
  createdAt: string;
}

/** Temporary files older than this are leftovers of a crash mid-upload. */
const STALE_TEMP_MS = 24 * 60 * 60 * 1000;

const isMissing = (error: unknown): boolean => (error as { code?: unknown }).code === 'ENOENT';

/**
 * Blobs as files under one root: contents at `data/<key>`, their size, hash and type at
 * `meta/<key>.json`, uploads in progress under `tmp/`. A put writes and fsyncs both files under
 * `tmp/`, then renames the contents and last the metadata into place: a blob exists exactly when
 * its metadata file does, so a reader never sees a half-written one. Deleting removes the metadata
 * first for the same reason. Replicas can share it only on a shared volume.
 */
export class FilesystemBlobStore implements BlobStore {
  private readonly dataRoot: string;
  private readonly metaRoot: string;
  private readonly tmpRoot: string;

  constructor(root: string) {
    const base = path.resolve(root);
    this.dataRoot = path.join(base, 'data');
    this.metaRoot = path.join(base, 'meta');
    this.tmpRoot = path.join(base, 'tmp');
  }

  /** Files on a disk take no part in a database transaction: the store is the same inside one. */
  within(_tx: Queryable): BlobStore {
    return this;
  }

  async put(body: Readable | AsyncIterable<Uint8Array>, options: BlobPutOptions = {}): Promise<BlobInfo> {
    const key = newBlobKey(options.prefix);
    await mkdir(this.tmpRoot, { recursive: true, mode: PRIVATE_DIR_MODE });
    const tmpData = path.join(this.tmpRoot, `${randomBytes(12).toString('hex')}.data`);
    const tmpMeta = `${tmpData.slice(0, -'.data'.length)}.json`;
    try {
      const { chunks, result } = measure(body, options.maxBytes);
      const file = await open(tmpData, 'wx', PRIVATE_FILE_MODE);
      try {
        for await (const chunk of chunks) await file.write(chunk);
        await file.sync();
      } finally {
        await file.close();
      }
      const info = blobInfo(key, result.size, result.sha256, options.contentType, new Date());
      const meta: MetaFile = { size: info.size, sha256: info.sha256, contentType: info.contentType, createdAt: info.createdAt.toISOString() };
      await writeSynced(tmpMeta, JSON.stringify(meta));
      const dataPath = this.inside(this.dataRoot, key);
      const metaPath = this.inside(this.metaRoot, `${key}.json`);
      await mkdir(path.dirname(dataPath), { recursive: true, mode: PRIVATE_DIR_MODE });
      await mkdir(path.dirname(metaPath), { recursive: true, mode: PRIVATE_DIR_MODE });
      await rename(tmpData, dataPath);
      await rename(tmpMeta, metaPath);
      return info;
    } finally {
      await rm(tmpData, { force: true });
      await rm(tmpMeta, { force: true });
    }
  }

  async get(key: string, range?: ByteRange): Promise<{ info: BlobInfo; stream: Readable } | null> {
    const info = await this.head(key);
    if (info === null) return null;
    const span = clampRange(range, info.size);
    if (span === null) return { info, stream: Readable.from([]) };
    let file: FileHandle;
    try {
      file = await open(this.inside(this.dataRoot, key), 'r');
    } catch (error) {
      if (isMissing(error)) return null; // deleted between the two reads
      throw error;
    }
    return { info, stream: file.createReadStream(span) };
  }

  async head(key: string): Promise<BlobInfo | null> {
    assertBlobKey(key);
    let text: string;
    try {
      text = await readFile(this.inside(this.metaRoot, `${key}.json`), 'utf8');
    } catch (error) {
      if (isMissing(error)) return null;
      throw error;
    }
    const meta = JSON.parse(text) as MetaFile;
    return blobInfo(key, meta.size, meta.sha256, meta.contentType, new Date(meta.createdAt));
  }

  async delete(key: string): Promise<boolean> {
    assertBlobKey(key);
    try {
      await unlink(this.inside(this.metaRoot, `${key}.json`));
    } catch (error) {
      if (isMissing(error)) return false;
      throw error;
    }
    await rm(this.inside(this.dataRoot, key), { force: true });
    return true;
  }

  async list(prefix: string, options: { after?: string; limit?: number } = {}): Promise<BlobInfo[]> {
    assertBlobListPrefix(prefix);
    const directory = prefix.includes('/') ? prefix.slice(0, prefix.lastIndexOf('/')) : '';
    const start = directory === '' ? this.metaRoot : this.inside(this.metaRoot, directory);
    let entries: string[];
    try {
      entries = await readdir(start, { recursive: true });
    } catch (error) {
      if (isMissing(error)) return [];
      throw error;
    }
    const after = options.after ?? '';
    const keys = entries
      .filter((entry) => entry.endsWith('.json'))
      .map((entry) => (directory === '' ? '' : `${directory}/`) + entry.slice(0, -'.json'.length).split(path.sep).join('/'))
      .filter((key) => key.startsWith(prefix) && key > after)
      .sort()
      .slice(0, options.limit ?? 1000);
    const infos = await Promise.all(keys.map((key) => this.head(key)));
    return infos.filter((info): info is BlobInfo => info !== null);
  }

  /** Joins a checked key to a root and refuses, again, any result outside that root. */
  private inside(root: string, relative: string): string {
    const full = path.resolve(root, relative);
    if (!full.startsWith(root + path.sep)) throw new Error(`blob path escapes its root: ${JSON.stringify(relative)}`);
    return full;
  }

  async sweepAbandoned(): Promise<number> {
    const now = Date.now();
    let deleted = 0;
    for (const name of await readdir(this.tmpRoot).catch(() => [] as string[])) {
      const file = path.join(this.tmpRoot, name);
      const stats = await stat(file).catch(() => null);
      if (stats !== null && now - stats.mtimeMs > STALE_TEMP_MS) {
        await rm(file, { force: true });
        deleted += 1;
      }
    }
    return deleted;
  }
}

async function writeSynced(file: string, text: string): Promise<void> {
  const handle = await open(file, 'wx', PRIVATE_FILE_MODE);
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

import { Readable } from 'node:stream';
import { assertBlobKey, assertBlobListPrefix, blobInfo, clampRange, DEFAULT_CONTENT_TYPE, measure, newBlobKey } from '../../core/services/blob-rules.ts';
import type { BlobInfo, BlobPutOptions, BlobStore, ByteRange } from '../../core/ports/blobs.ts';
import type { Queryable } from '../../core/ports/database.ts';
import { bytesOf, type Row } from './rows.ts';

/** 256 KiB per row: a few rows per read query, and a row well under PostgreSQL's 1 GB value limit. */
const CHUNK_BYTES = 256 * 1024;
/** Chunks fetched per query while streaming a blob out. */
const CHUNKS_PER_READ = 4;
/** Uploads unfinished this long were cut off by a crash; their rows are swept. */
const STALE_UPLOAD_MS = 24 * 60 * 60 * 1000;

const COLUMNS = 'key, size, sha256, content_type, created_at';

function infoOf(row: Row): BlobInfo {
  return blobInfo(row.key as string, Number(row.size), row.sha256 as string, row.content_type as string, row.created_at as Date);
}

/** Regroups a stream of any-sized pieces into CHUNK_BYTES pieces (the last one shorter). */
async function* rechunk(source: AsyncIterable<Buffer>, size: number): AsyncGenerator<Buffer> {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  for await (const piece of source) {
    pending.push(piece);
    pendingBytes += piece.length;
    while (pendingBytes >= size) {
      const joined = pending.length === 1 ? pending[0]! : Buffer.concat(pending, pendingBytes);
      yield joined.subarray(0, size);
      const rest = joined.subarray(size);
      pending = rest.length > 0 ? [rest] : [];
      pendingBytes = rest.length;
    }
  }
  if (pendingBytes > 0) yield Buffer.concat(pending, pendingBytes);
}

/**
 * Blobs in the database replicas already share, as chunked bytea rows (works the same on PGlite and
 * PostgreSQL). Each chunk is its own short statement rather than one transaction around the
 * upload: a transaction held open while a slow client sends 500 MB would hold PGlite's single
 * session, and every other query of the process, for as long. The blob row is written first as
 * incomplete and turned complete when the last chunk is in; readers see only complete blobs, a
 * failed put deletes its rows, and rows a crash left behind are swept after a day.
 */
export class SqlBlobStore implements BlobStore {
  constructor(
    private readonly db: Queryable,
    private readonly now: () => number = Date.now,
  ) {}

  async put(body: Readable | AsyncIterable<Uint8Array>, options: BlobPutOptions = {}): Promise<BlobInfo> {
    const key = newBlobKey(options.prefix);
    await this.db.query('INSERT INTO blobs (key, content_type, chunk_size) VALUES ($1, $2, $3)', [key, options.contentType ?? DEFAULT_CONTENT_TYPE, CHUNK_BYTES]);
    try {
      const { chunks, result } = measure(body, options.maxBytes);
      let seq = 0;
      for await (const chunk of rechunk(chunks, CHUNK_BYTES)) {
        await this.db.query('INSERT INTO blob_chunks (blob_key, seq, data) VALUES ($1, $2, $3)', [key, seq++, chunk]);
      }
      const { rows } = await this.db.query(`UPDATE blobs SET size = $2, sha256 = $3, complete = true WHERE key = $1 RETURNING ${COLUMNS}`, [key, result.size, result.sha256]);
      return infoOf(rows[0]!);
    } catch (error) {
      await this.db.query('DELETE FROM blobs WHERE key = $1', [key]).catch(() => undefined);
      throw error;
    }
  }

  /** The same store over `tx`: its blobs commit, or vanish, with the caller's transaction. */
  within(tx: Queryable): BlobStore {
    return new SqlBlobStore(tx, this.now);
  }

  async get(key: string, range?: ByteRange): Promise<{ info: BlobInfo; stream: Readable } | null> {
    const info = await this.head(key);
    if (info === null) return null;
    const span = clampRange(range, info.size);
    if (span === null) return { info, stream: Readable.from([]) };
    return { info, stream: Readable.from(this.readSpan(key, span.start, span.end), { objectMode: false }) };
  }

  async head(key: string): Promise<BlobInfo | null> {
    assertBlobKey(key);
    const { rows } = await this.db.query(`SELECT ${COLUMNS} FROM blobs WHERE key = $1 AND complete`, [key]);
    return rows[0] === undefined ? null : infoOf(rows[0]);
  }

  async delete(key: string): Promise<boolean> {
    assertBlobKey(key);
    const { rowCount } = await this.db.query('DELETE FROM blobs WHERE key = $1 AND complete', [key]);
    return rowCount > 0;
  }

  async list(prefix: string, options: { after?: string; limit?: number } = {}): Promise<BlobInfo[]> {
    assertBlobListPrefix(prefix);
    // key >= prefix lets the primary key's index start at the prefix; starts_with bounds it.
    const { rows } = await this.db.query(`SELECT ${COLUMNS} FROM blobs WHERE complete AND key >= $1 AND key > $2 AND starts_with(key, $1) ORDER BY key LIMIT $3`, [
      prefix,
      options.after ?? '',
      options.limit ?? 1000,
    ]);
    return rows.map(infoOf);
  }

  private async *readSpan(key: string, start: number, end: number): AsyncGenerator<Buffer> {
    const last = Math.floor(end / CHUNK_BYTES);
    let seq = Math.floor(start / CHUNK_BYTES);
    while (seq <= last) {
      const { rows } = await this.db.query<{ seq: number; data: unknown }>('SELECT seq, data FROM blob_chunks WHERE blob_key = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq LIMIT $4', [
        key,
        seq,
        last,
        CHUNKS_PER_READ,
      ]);
      if (rows.length === 0) throw new Error(`blob ${key} was deleted while it was being read`);
      for (const row of rows) {
        if (row.seq !== seq) throw new Error(`blob ${key} was deleted while it was being read`);
        const data = bytesOf(row.data);
        const offset = seq * CHUNK_BYTES;
        const from = Math.max(0, start - offset);
        const to = Math.min(data.length, end - offset + 1);
        yield from === 0 && to === data.length ? data : data.subarray(from, to);
        seq++;
      }
    }
  }

  async sweepAbandoned(): Promise<number> {
    const { rowCount } = await this.db.query('DELETE FROM blobs WHERE NOT complete AND created_at < $1', [new Date(this.now() - STALE_UPLOAD_MS)]);
    return rowCount ?? 0;
  }
}

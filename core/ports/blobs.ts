import type { Readable } from 'node:stream';
import type { Queryable } from './database.ts';

/**
 * File contents (uploaded files, batch inputs and outputs, attachments) behind one port, so a
 * deployment keeps them on a disk or in the database replicas share. Blobs are immutable: `put`
 * names each new blob itself (the caller's prefix, then a time-ordered random id) and a blob is
 * visible only once it is whole. Keys are checked by core/services/blob-rules.ts (`assertBlobKey`).
 */
export interface BlobInfo {
  key: string;
  /** Bytes. */
  size: number;
  /** Hex SHA-256 of the contents. */
  sha256: string;
  contentType: string;
  createdAt: Date;
}

export interface BlobPutOptions {
  /** Groups blobs for `list`, e.g. `files/<organizationId>/`; segments as in a key, ending in `/`. */
  prefix?: string;
  contentType?: string;
  /** Over this many bytes the put fails with BlobTooLargeError and nothing is kept. */
  maxBytes?: number;
}

/** Inclusive byte offsets, as in an HTTP Range header; `end` absent means to the last byte. */
export interface ByteRange {
  start: number;
  end?: number;
}

export interface BlobStore {
  /** Streams `body` in; a body that errors, or grows past `maxBytes`, leaves nothing behind. */
  put(body: Readable | AsyncIterable<Uint8Array>, options?: BlobPutOptions): Promise<BlobInfo>;
  /** The contents (or the range of them, clamped to the blob) as a stream; null when absent. */
  get(key: string, range?: ByteRange): Promise<{ info: BlobInfo; stream: Readable } | null>;
  head(key: string): Promise<BlobInfo | null>;
  /** False when there was nothing to delete. */
  delete(key: string): Promise<boolean>;
  /** Blobs whose key starts with `prefix`, in key order (creation order within one prefix), after `after`. */
  list(prefix: string, options?: { after?: string; limit?: number }): Promise<BlobInfo[]>;
  /**
   * The store as seen from inside the caller's transaction. The database store reads and writes
   * through `tx`: a blob put there commits with the rows that name it, vanishes if `tx` rolls back,
   * and never waits on the transaction it is part of (on PGlite, a query on anything but `tx` waits
   * for `tx` to end, so a put on the shared store from inside `tx` would wait forever). A store
   * outside the database is not transactional and answers itself: its puts stay even if `tx` rolls back.
   */
  within(tx: Queryable): BlobStore;
  /**
   * Deletes what puts interrupted by a crash left behind (never visible as blobs) once it is a day
   * old; returns how many were deleted. The kernel's periodic `kernel.blobs-sweep` calls it on one replica.
   */
  sweepAbandoned(): Promise<number>;
}

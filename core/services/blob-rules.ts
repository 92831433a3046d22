import { createHash, randomBytes } from 'node:crypto';
import type { BlobInfo, ByteRange } from '../ports/blobs.ts';

/**
 * What both blob stores share: the key rules, the id a new blob gets, and the one pass over a body
 * that counts, hashes and enforces the size limit while it streams.
 */

const SEGMENT = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/;
const MAX_KEY_LENGTH = 512;

/** A key, a put prefix or a list prefix that breaks the rules (a path escaping the store's root, say). */
export class InvalidBlobKeyError extends Error {
  constructor(what: string, value: string) {
    super(`invalid blob ${what} ${JSON.stringify(value.slice(0, 80))}: segments of letters, digits, '.', '_' or '-' separated by '/', none starting with '.'`);
    this.name = 'InvalidBlobKeyError';
  }
}

export class BlobTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`blob is larger than its limit of ${maxBytes} bytes`);
    this.name = 'BlobTooLargeError';
  }
}

function validSegments(path: string): boolean {
  return path.length <= MAX_KEY_LENGTH && path.split('/').every((segment) => SEGMENT.test(segment));
}

/**
 * Segments can be neither `.`, `..` nor empty, and carry no separator but `/`, so a key joined to a
 * directory stays inside it; the filesystem store checks the joined path again all the same.
 */
export function assertBlobKey(key: string): void {
  if (typeof key !== 'string' || !validSegments(key)) throw new InvalidBlobKeyError('key', String(key));
}

/** '' or whole segments each followed by '/'. */
export function assertBlobPrefix(prefix: string): void {
  if (prefix === '') return;
  if (typeof prefix !== 'string' || !prefix.endsWith('/') || !validSegments(prefix.slice(0, -1))) {
    throw new InvalidBlobKeyError('prefix', String(prefix));
  }
}

/** A list prefix may stop inside a segment (`files/or`), but every whole segment before it must be valid. */
export function assertBlobListPrefix(prefix: string): void {
  if (prefix === '') return;
  const segments = prefix.split('/');
  const last = segments.pop() ?? '';
  if (segments.length > 0) assertBlobPrefix(`${segments.join('/')}/`);
  if (last !== '' && !SEGMENT.test(last)) throw new InvalidBlobKeyError('prefix', prefix);
}

let lastKeyMs = -1;
let keySequence = 0;

/**
 * The prefix, then 12 hex digits of the millisecond, 4 of a sequence within it and 64 random bits:
 * keys sort by creation, and those one process makes within a millisecond (or while the clock
 * stands behind its last key's) still sort in the order they were made; across processes, within
 * one millisecond, their order is arbitrary. The random part keeps a key unguessable from another.
 */
export function newBlobKey(prefix = '', nowMs = Date.now()): string {
  assertBlobPrefix(prefix);
  if (nowMs > lastKeyMs) {
    lastKeyMs = nowMs;
    keySequence = 0;
  } else if (++keySequence > 0xffff) {
    // 65,536 keys in one millisecond: borrow the next one rather than break the order.
    lastKeyMs += 1;
    keySequence = 0;
  }
  return `${prefix}${lastKeyMs.toString(16).padStart(12, '0')}${keySequence.toString(16).padStart(4, '0')}${randomBytes(8).toString('hex')}`;
}

export interface MeasuredBody {
  /** Final once the iteration has finished. */
  readonly size: number;
  readonly sha256: string;
}

/**
 * Yields the body as Buffers while counting and hashing it; past `maxBytes` it throws
 * BlobTooLargeError before yielding the chunk that crossed the limit.
 */
export function measure(body: AsyncIterable<Uint8Array | string>, maxBytes: number | undefined): { chunks: AsyncGenerator<Buffer>; result: MeasuredBody } {
  const hash = createHash('sha256');
  const result = { size: 0, sha256: '' };
  async function* chunks(): AsyncGenerator<Buffer> {
    for await (const piece of body) {
      const chunk = typeof piece === 'string' ? Buffer.from(piece) : Buffer.isBuffer(piece) ? piece : Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength);
      result.size += chunk.length;
      if (maxBytes !== undefined && result.size > maxBytes) throw new BlobTooLargeError(maxBytes);
      hash.update(chunk);
      yield chunk;
    }
    result.sha256 = hash.digest('hex');
  }
  return { chunks: chunks(), result };
}

/** The inclusive byte span of `range` within a blob of `size` bytes, or null when it holds nothing. */
export function clampRange(range: ByteRange | undefined, size: number): { start: number; end: number } | null {
  const start = Math.max(0, range?.start ?? 0);
  const end = Math.min(size - 1, range?.end ?? size - 1);
  return start > end ? null : { start, end };
}

export const DEFAULT_CONTENT_TYPE = 'application/octet-stream';

export function blobInfo(key: string, size: number, sha256: string, contentType: string | undefined, createdAt: Date): BlobInfo {
  return { key, size, sha256, contentType: contentType ?? DEFAULT_CONTENT_TYPE, createdAt };
}

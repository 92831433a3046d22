import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { RecordKind } from '../../core/identity/authorization.ts';
import { cleanFilename } from '../../core/http/operation-uploads.ts';
import { ApiError, requestTooLarge } from '../../core/kernel/errors.ts';
import type { BlobInfo, BlobStore } from '../../core/ports/blobs.ts';
import type { Transaction } from '../../core/ports/database.ts';
import type { FileOwner, GatewayFiles, StoredFile } from '../../core/ports/files.ts';
import { BlobTooLargeError } from '../../core/services/blob-rules.ts';
import { sniffStream } from '../../core/services/content-sniffing.ts';
import type { FileRecord, FileStore } from './file-store.ts';
import './files-errors.ts';

export interface StoredFilesDeps {
  readonly store: FileStore;
  readonly blobs: BlobStore;
  readonly clock: () => Date;
  readonly logger: { warn(details: Record<string, unknown>, message: string): void };
}

/** Where an organisation's file contents are: one prefix, so its erasure lists and deletes them all. */
export const organizationFilesPrefix = (organizationId: string) => `files/${organizationId}/`;

async function* bytesOf(buffer: Buffer): AsyncGenerator<Uint8Array> {
  yield buffer;
}

/** What a new file is besides its bytes. */
export interface FileDetails {
  readonly purpose: string;
  readonly filename: string;
  /** From the file's creation; absent or null: it never expires. */
  readonly expiresAfterSeconds?: number | null;
}

/**
 * The files of every project (GatewayFiles, core/ports/files.ts): bytes in the blob store under the
 * organisation's prefix, one row per file. A new file's bytes are put first and its row written after
 * (a blob store is not transactional); a row that cannot be written takes its blob with it.
 */
export class StoredFiles implements GatewayFiles {
  readonly kind: RecordKind<FileRecord>;

  constructor(private readonly deps: StoredFilesDeps) {
    this.kind = {
      name: 'file',
      notFound: 'file_not_found',
      find: async (organizationId, id) => {
        const file = await deps.store.get(organizationId, id, deps.clock());
        return file && { record: file, projectId: file.projectId };
      },
    };
  }

  get(organizationId: string, id: string): Promise<FileRecord | null> {
    return this.deps.store.get(organizationId, id, this.deps.clock());
  }

  async open(file: StoredFile): Promise<Readable> {
    const found = await this.deps.blobs.get(file.blobKey);
    if (!found) throw new ApiError('file_not_found', `The contents of file ${file.id} are gone`);
    return found.stream;
  }

  /**
   * With `tx`, the bytes go through `blobs.within(tx)`: in the database store they commit (or vanish)
   * with the row; on a disk they are written at once and stay if `tx` rolls back.
   */
  async create(owner: FileOwner, file: { purpose: string; filename: string; content: AsyncIterable<Uint8Array> | Buffer }, tx?: Transaction): Promise<FileRecord> {
    const content = Buffer.isBuffer(file.content) ? bytesOf(file.content) : file.content;
    const blob = await this.putContent(owner.organizationId, content, undefined, tx);
    return this.record(owner, blob, { purpose: file.purpose, filename: file.filename }, tx);
  }

  /**
   * Streams a file's bytes into the blob store, typed by sniffing its first bytes; over `maxBytes`,
   * 413 naming the upload's `file` field, and nothing kept.
   */
  async putContent(organizationId: string, content: AsyncIterable<Uint8Array>, maxBytes?: number, tx?: Transaction): Promise<BlobInfo> {
    const sniffed = await sniffStream(content);
    try {
      return await this.blobsIn(tx).put(sniffed.body, { prefix: organizationFilesPrefix(organizationId), contentType: sniffed.contentType, ...(maxBytes ? { maxBytes } : {}) });
    } catch (error) {
      if (error instanceof BlobTooLargeError) throw requestTooLarge(error.maxBytes, 'The file', 'file');
      throw error;
    }
  }

  /** Records a stored blob as the owner's new file (in `tx` when given); deletes the blob when the row cannot be written. */
  async record(owner: FileOwner, blob: BlobInfo, details: FileDetails, tx?: Transaction): Promise<FileRecord> {
    const createdAt = this.deps.clock();
    const after = details.expiresAfterSeconds;
    const file: FileRecord = {
      id: randomUUID(),
      organizationId: owner.organizationId,
      projectId: owner.projectId,
      keyId: owner.keyId,
      purpose: details.purpose,
      filename: cleanFilename(details.filename) || 'file',
      bytes: blob.size,
      contentType: blob.contentType,
      sha256: blob.sha256,
      blobKey: blob.key,
      createdAt,
      expiresAt: after ? new Date(createdAt.getTime() + after * 1000) : null,
    };
    try {
      await this.deps.store.insert(file, tx);
    } catch (error) {
      // In a transaction the failed insert has spoilt it: a database blob goes with its rollback.
      if (tx)
        await this.blobsIn(tx)
          .delete(blob.key)
          .catch(() => false);
      else await this.discard(blob.key);
      throw error;
    }
    return file;
  }

  private blobsIn(tx: Transaction | undefined): BlobStore {
    return tx ? this.deps.blobs.within(tx) : this.deps.blobs;
  }

  /** Deletes a file: its row, then its bytes (a row gone with its blob left is only space, never a file without contents). */
  async delete(file: StoredFile): Promise<boolean> {
    const deleted = await this.deps.store.delete(file.organizationId, file.id);
    if (deleted) await this.discard(deleted.blobKey);
    return deleted !== null;
  }

  /** Deletes a blob no row refers to; a failure is logged, the blob left to the organisation's erasure. */
  async discard(blobKey: string): Promise<void> {
    try {
      await this.deps.blobs.delete(blobKey);
    } catch (error) {
      this.deps.logger.warn({ err: error, blobKey }, 'deleting the contents of a file failed; they stay until the account is erased');
    }
  }
}

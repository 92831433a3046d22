import type { Readable } from 'node:stream';
import type { RecordKind } from '../identity/authorization.ts';
import { defineExtensionPoint } from '../kernel/extension-points.ts';
import type { Transaction } from './database.ts';

/**
 * Files of the /v1 surface (`/v1/files`: batch inputs, batch outputs and errors, anything else a
 * client uploads with an OpenAI purpose), as other plugins use them: the batches plugin reads an
 * input file and stores its output and error files. Each file belongs to one project of an
 * organisation, and to the key that made it when a key did; its bytes are a blob (core/ports/blobs.ts).
 * The files plugin provides the point (plugins/files/README.md); without it there is none.
 */
export interface StoredFile {
  id: string;
  organizationId: string;
  projectId: string;
  keyId: string | null;
  /** As uploaded (`batch`, `assistants`, …) or as created (`batch_output`). */
  purpose: string;
  filename: string;
  bytes: number;
  createdAt: Date;
  /** When the file goes away (OpenAI's `expires_after`); null: never. An expired file is not found. */
  expiresAt: Date | null;
  /** In the BlobStore. */
  blobKey: string;
}

/** Whom a file created by code belongs to: a batch's organisation, project and key. */
export interface FileOwner {
  organizationId: string;
  projectId: string;
  keyId: string | null;
}

export interface GatewayFiles {
  /** The file kind's record: `authorize` resolves it for routes that declare it (404 file_not_found). */
  readonly kind: RecordKind<StoredFile>;
  /** The organisation's file, or null (also when it expired). The caller checks the project. */
  get(organizationId: string, id: string): Promise<StoredFile | null>;
  /**
   * The file's bytes, streamed from the blob store (a node Readable). Throws ApiError
   * `file_not_found` when the contents are gone (the file was deleted meanwhile).
   */
  open(file: StoredFile): Promise<Readable>;
  /**
   * Stores content as a new file of the owner (a batch's output and error files), in `tx` when given:
   * the row is written in `tx`, the bytes through `blobs.within(tx)` (core/ports/blobs.ts), so in the
   * database blob store they commit or vanish with it; a blob store on disk is not transactional, and
   * bytes written there before `tx` rolls back stay until the organisation's erasure. No size limit:
   * the caller bounds what it writes.
   */
  create(owner: FileOwner, file: { purpose: string; filename: string; content: AsyncIterable<Uint8Array> | Buffer }, tx?: Transaction): Promise<StoredFile>;
}

export const GatewayFilesPoint = defineExtensionPoint<GatewayFiles>('GatewayFiles');

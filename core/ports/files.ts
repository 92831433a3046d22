import type { RecordKind } from '../identity/authorization.ts';
import { defineExtensionPoint } from '../kernel/extension-points.ts';
import type { Transaction } from './database.ts';

export interface StoredFile {
  id: string;
  organizationId: string;
  projectId: string;
  keyId: string | null;
  purpose: string;
  filename: string;
  bytes: number;
  createdAt: Date;
  expiresAt: Date | null;
  blobKey: string;
}
export interface FileOwner {
  organizationId: string;
  projectId: string;
  keyId: string | null;
}
export interface GatewayFiles {
  readonly kind: RecordKind<StoredFile>;
  get(organizationId: string, id: string): Promise<StoredFile | null>;
  open(file: StoredFile): Promise<NodeJS.ReadableStream>;
  create(owner: FileOwner, file: { purpose: string; filename: string; content: AsyncIterable<Uint8Array> | Buffer }, tx?: Transaction): Promise<StoredFile>;
}
export const GatewayFilesPoint = defineExtensionPoint<GatewayFiles>('GatewayFiles');

import type { StoredFile } from '../../core/ports/files.ts';

/** Seconds since the epoch, as OpenAI's objects carry times. */
const seconds = (at: Date) => Math.floor(at.getTime() / 1000);

/** OpenAI's file object. `status` is always `processed`: a file is checked before it is stored, never after. */
export function fileObject(file: StoredFile) {
  return {
    id: file.id,
    object: 'file' as const,
    bytes: file.bytes,
    created_at: seconds(file.createdAt),
    filename: file.filename,
    purpose: file.purpose,
    status: 'processed' as const,
    expires_at: file.expiresAt ? seconds(file.expiresAt) : null,
  };
}

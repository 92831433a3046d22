import type { JobQueue } from '../../core/jobs/job-queue.ts';
import type { QueueDefinition } from '../../core/jobs/queue-definitions.ts';
import type { OrganizationEraser } from '../../core/kernel/organization-erasure.ts';
import type { BlobStore } from '../../core/ports/blobs.ts';
import { blobPrefixErasure } from '../../core/services/blob-prefix-erasure.ts';
import type { FileStore } from './file-store.ts';
import { organizationFilesPrefix } from './gateway-files.ts';

/**
 * The files' contents go after the erasure committed (core/services/blob-prefix-erasure.ts), listed by
 * the organisation's prefix: a deleted project's files, whose rows went before, go too.
 */
export const filesErasure = blobPrefixErasure('files.erase-contents', organizationFilesPrefix);

/** The files plugin's part of an account deletion (core/kernel/organization-erasure.ts). */
export function filesEraser({ store, jobs }: { store: FileStore; jobs: JobQueue }): OrganizationEraser {
  return filesErasure.eraser('files', jobs, (tx, organizationId) => store.eraseOrganization(tx, organizationId));
}

export function filesErasureQueue({ blobs }: { blobs: BlobStore }): QueueDefinition {
  return filesErasure.handler(blobs);
}

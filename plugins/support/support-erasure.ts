import type { JobQueue } from '../../core/jobs/job-queue.ts';
import type { QueueDefinition } from '../../core/jobs/queue-definitions.ts';
import type { OrganizationEraser } from '../../core/kernel/organization-erasure.ts';
import type { BlobStore } from '../../core/ports/blobs.ts';
import { blobPrefixErasure } from '../../core/services/blob-prefix-erasure.ts';
import { organizationFilesPrefix } from './support-operations.ts';
import type { SupportStore } from './support-store.ts';

/** Attachments go after the erasure committed (core/services/blob-prefix-erasure.ts). */
export const supportFilesErasure = blobPrefixErasure('support.erase-files', organizationFilesPrefix);

/** Support's part of an account deletion (core/kernel/organization-erasure.ts): requests, messages, attachments. */
export function supportEraser({ store, jobs }: { store: SupportStore; jobs: JobQueue }): OrganizationEraser {
  return supportFilesErasure.eraser('support requests', jobs, (tx, organizationId) => store.eraseOrganization(tx, organizationId));
}

export function supportFilesErasureQueue({ blobs }: { blobs: BlobStore }): QueueDefinition {
  return supportFilesErasure.handler(blobs);
}

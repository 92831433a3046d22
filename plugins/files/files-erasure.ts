import { z } from 'zod';
import type { JobQueue } from '../../core/jobs/job-queue.ts';
import { defineQueue, type QueueDefinition } from '../../core/jobs/queue-definitions.ts';
import type { OrganizationEraser } from '../../core/kernel/organization-erasure.ts';
import type { BlobStore } from '../../core/ports/blobs.ts';
import type { FileStore } from './file-store.ts';
import { organizationFilesPrefix } from './gateway-files.ts';

/** Blobs deleted per listing: a page, then the next, until the organisation's prefix is empty. */
const PAGE = 100;

/**
 * The contents of an erased organisation's files, deleted after the erasure committed: a blob store
 * is not transactional, so the rows go in the deletion's transaction and this job, enqueued in that
 * same transaction, deletes the blobs once it commits (as support's attachments). It lists the
 * organisation's prefix rather than the rows (gone by then), so contents left by a failed delete, an
 * upload that finished while the deletion ran, or a deleted project's files go too.
 */
export const filesErasure = defineQueue({
  name: 'files.erase-contents',
  payload: z.strictObject({ organizationId: z.uuid() }),
  maxAttempts: 20,
  leaseMs: 120_000,
  backoff: { baseMs: 10_000, maxMs: 3_600_000 },
});

/** The files plugin's part of an account deletion (core/kernel/organization-erasure.ts). */
export function filesEraser({ store, jobs }: { store: FileStore; jobs: JobQueue }): OrganizationEraser {
  return {
    name: 'files',
    async erase(tx, organizationId) {
      const erased = await store.eraseOrganization(tx, organizationId);
      await jobs.enqueue(filesErasure, { organizationId }, { tx, idempotencyKey: organizationId });
      return erased;
    },
  };
}

export function filesErasureQueue({ blobs }: { blobs: BlobStore }): QueueDefinition {
  return filesErasure.handle(async (job) => {
    const prefix = organizationFilesPrefix(job.payload.organizationId);
    for (;;) {
      job.signal.throwIfAborted();
      const page = await blobs.list(prefix, { limit: PAGE });
      if (page.length === 0) return;
      // A blob already deleted (a repeated run) answers false: nothing to undo.
      for (const blob of page) await blobs.delete(blob.key);
    }
  });
}

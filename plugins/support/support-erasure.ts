import { z } from 'zod';
import { defineQueue, type QueueDefinition } from '../../core/jobs/queue-definitions.ts';
import type { JobQueue } from '../../core/jobs/job-queue.ts';
import type { OrganizationEraser } from '../../core/kernel/organization-erasure.ts';
import type { BlobStore } from '../../core/ports/blobs.ts';
import { organizationFilesPrefix } from './support-operations.ts';
import type { SupportStore } from './support-store.ts';

/** Blobs deleted per listing: a page, then the next, until the organisation's prefix is empty. */
const PAGE = 100;

/**
 * The files of an erased organisation, deleted after the erasure committed. A blob store is not
 * transactional (a disk, or chunks written outside any transaction), so the rows go in the
 * deletion's transaction and this job, enqueued in that same transaction, deletes the blobs once
 * it commits: a rolled-back deletion leaves every file, a committed one always gets its job, and a
 * job that fails part-way is retried. It lists the organisation's prefix rather than the rows (gone
 * by then), so a file whose upload finished while the deletion ran goes too.
 */
export const supportFilesErasure = defineQueue({
  name: 'support.erase-files',
  payload: z.strictObject({ organizationId: z.uuid() }),
  maxAttempts: 20,
  leaseMs: 120_000,
  backoff: { baseMs: 10_000, maxMs: 3_600_000 },
});

/** Support's part of an account deletion (core/kernel/organization-erasure.ts): requests, messages, attachments. */
export function supportEraser({ store, jobs }: { store: SupportStore; jobs: JobQueue }): OrganizationEraser {
  return {
    name: 'support requests',
    async erase(tx, organizationId) {
      const erased = await store.eraseOrganization(tx, organizationId);
      await jobs.enqueue(supportFilesErasure, { organizationId }, { tx, idempotencyKey: organizationId });
      return erased;
    },
  };
}

export function supportFilesErasureQueue({ blobs }: { blobs: BlobStore }): QueueDefinition {
  return supportFilesErasure.handle(async (job) => {
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

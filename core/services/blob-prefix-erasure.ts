import { z } from 'zod';
import type { JobQueue } from '../jobs/job-queue.ts';
import { defineQueue, type QueueDefinition } from '../jobs/queue-definitions.ts';
import type { OrganizationEraser } from '../kernel/organization-erasure.ts';
import type { BlobStore } from '../ports/blobs.ts';
import type { Transaction } from '../ports/database.ts';

/** Blobs deleted per listing: a page, then the next, until the organisation's prefix is empty. */
const PAGE = 100;

/**
 * The blobs of an erased organisation (a plugin's uploaded files), deleted after its erasure
 * committed. A blob store is not transactional (a disk, or chunks written outside any transaction),
 * so the plugin's rows go in the deletion's transaction and a job enqueued in that same transaction
 * deletes the blobs once it commits: a rolled-back deletion leaves every blob, a committed one always
 * gets its job, and a job that fails part-way is retried. The job lists the organisation's prefix
 * rather than the rows (gone by then), so blobs left by a failed delete or an upload that finished
 * while the deletion ran go too.
 */
export function blobPrefixErasure(queueName: string, prefixOf: (organizationId: string) => string) {
  const queue = defineQueue({
    name: queueName,
    payload: z.strictObject({ organizationId: z.uuid() }),
    maxAttempts: 20,
    leaseMs: 120_000,
    backoff: { baseMs: 10_000, maxMs: 3_600_000 },
  });
  return {
    queue,
    /**
     * The plugin's eraser: `eraseRows` deletes its rows in the deletion's transaction, then the
     * blobs' job is enqueued in it.
     */
    eraser(name: string, jobs: JobQueue, eraseRows: (tx: Transaction, organizationId: string) => Promise<number>): OrganizationEraser {
      return {
        name,
        async erase(tx, organizationId) {
          const erased = await eraseRows(tx, organizationId);
          await jobs.enqueue(queue, { organizationId }, { tx, idempotencyKey: organizationId });
          return erased;
        },
      };
    },
    /** The job's handler, for the plugin's `queues()`. */
    handler(blobs: BlobStore): QueueDefinition {
      return queue.handle(async (job) => {
        const prefix = prefixOf(job.payload.organizationId);
        for (;;) {
          job.signal.throwIfAborted();
          const page = await blobs.list(prefix, { limit: PAGE });
          if (page.length === 0) return;
          // A blob already deleted (a repeated run) answers false: nothing to undo.
          for (const blob of page) await blobs.delete(blob.key);
        }
      });
    },
  };
}

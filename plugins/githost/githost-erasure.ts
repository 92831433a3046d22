import { z } from 'zod';
import type { JobQueue } from '../../core/jobs/job-queue.ts';
import { defineQueue, type QueueDefinition } from '../../core/jobs/queue-definitions.ts';
import type { OrganizationEraser } from '../../core/kernel/organization-erasure.ts';
import type { LocalRepositories } from './local/local-repos.ts';

const queue = defineQueue({
  name: 'githost.erase-repositories',
  payload: z.strictObject({ organizationId: z.uuid() }),
  maxAttempts: 20,
  leaseMs: 120_000,
  backoff: { baseMs: 10_000, maxMs: 3_600_000 },
});

/**
 * An erased organisation's git repositories. They are folders on disk, which no transaction covers:
 * the eraser enqueues, in the deletion's transaction, a job that removes the organisation's folder
 * once the deletion has committed (a rolled-back deletion keeps every repository; a committed one
 * always gets its job, retried until it succeeds). A repository pushed to while the deletion ran
 * goes with the folder.
 */
export const githostErasure = {
  queue,
  eraser(repos: LocalRepositories, jobs: JobQueue): OrganizationEraser {
    return {
      name: 'git repositories',
      async erase(tx, organizationId) {
        await jobs.enqueue(queue, { organizationId }, { tx, idempotencyKey: organizationId });
        return (await repos.list(organizationId)).length;
      },
    };
  },
  handler(repos: LocalRepositories): QueueDefinition {
    return queue.handle(async (job) => {
      await repos.eraseOrganization(job.payload.organizationId);
    });
  },
};

import { z } from 'zod';
import { defineQueue } from '../../core/jobs/queue-definitions.ts';
import type { BatchesConfig } from './batch-config.ts';

/** The batches plugin's queues: one job per line, one to finalize a batch, one to release its hold. */
export function batchQueues(config: BatchesConfig) {
  return {
    line: defineQueue({
      name: 'batches.line',
      payload: z.object({ batchId: z.uuid(), line: z.number().int().min(1) }),
      concurrency: config.lineConcurrency,
      maxAttempts: config.lineMaxAttempts,
      timeoutMs: config.lineTimeoutMs,
    }),
    finalize: defineQueue({ name: 'batches.finalize', payload: z.object({ batchId: z.uuid() }), maxAttempts: 20, leaseMs: 120_000 }),
    releaseHold: defineQueue({ name: 'batches.release-hold', payload: z.object({ holdId: z.uuid() }), maxAttempts: 20 }),
  };
}

export type BatchQueues = ReturnType<typeof batchQueues>;

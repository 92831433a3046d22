import { z } from 'zod';

/** `plugins.batches`: how batch lines are run. */
export const batchesConfigSchema = z.strictObject({
  /** Lines one process runs at the same time, over every organisation. */
  lineConcurrency: z.number().int().min(1).max(256).default(16),
  /**
   * Lines of one organisation running at the same time over every replica (a coordination lease per
   * organisation): one customer's large batch cannot take every worker. A line that finds it full waits
   * its turn without spending an attempt.
   */
  perOrganizationConcurrency: z.number().int().min(1).max(1_000).default(8),
  /** One line's run, from its claim to its answer: past it the run is abandoned and retried. */
  lineTimeoutMs: z
    .number()
    .int()
    .min(1_000)
    .max(60 * 60_000)
    .default(10 * 60_000),
  /** Runs of a line whose upstream failed (5xx, 429, timeout) before it is recorded as failed. */
  lineMaxAttempts: z.number().int().min(1).max(20).default(5),
  /** Lines one batch may hold. */
  maxLines: z.number().int().min(1).max(100_000).default(50_000),
  /**
   * The wait between a batch's end and the release of its spend hold: every line's request-log row
   * is stored by then (the writer flushes every second), so the hold gives back exactly what the
   * lines did not spend.
   */
  holdReleaseDelayMs: z.number().int().min(0).max(600_000).default(5_000),
});

export type BatchesConfig = z.output<typeof batchesConfigSchema>;

/** OpenAI's one completion window; the batch expires this long after it was created. */
export const COMPLETION_WINDOWS = { '24h': 24 * 3_600_000 } as const;
export type CompletionWindow = keyof typeof COMPLETION_WINDOWS;

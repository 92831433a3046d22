import { z } from 'zod';

/**
 * `plugins.webhooks`. Where endpoints may point is not set here: the kernel's outbound client
 * decides (`outbound.allowPrivateNetwork`), for webhooks as for every customer URL.
 */
export const webhooksConfigSchema = z.strictObject({
  /** One attempt, from connecting to the answer's last byte; past it the attempt fails `timeout`. */
  timeoutMs: z.number().int().min(100).max(60_000).default(15_000),
  /**
   * The wait before each retry after a failed attempt: Standard Webhooks' schedule (5 s, 5 min,
   * 30 min, 2 h, 5 h, 10 h, 10 h), eight attempts over about 28 hours.
   */
  retryScheduleSeconds: z
    .array(
      z
        .number()
        .int()
        .min(1)
        .max(7 * 86_400),
    )
    .max(20)
    .default([5, 300, 1_800, 7_200, 18_000, 36_000, 36_000]),
  /** The longest a receiver's `retry-after` may postpone a retry. */
  maxRetryAfterSeconds: z.number().int().min(0).max(86_400).default(36_000),
  /** An endpoint is switched off when a delivery fails for good and no attempt to it has succeeded for this long. */
  disableAfterFailingHours: z.number().min(1).max(8_760).default(120),
  /** Deliveries (and their attempts) older than this are deleted. */
  retentionDays: z.number().int().min(1).max(3_650).default(30),
  /** Deliveries one process sends at the same time. */
  concurrency: z.number().int().min(1).max(256).default(8),
  maxEndpointsPerOrganization: z.number().int().min(1).max(10_000).default(50),
  /** How much of a receiver's answer each attempt keeps. */
  responseBodyBytes: z.number().int().min(0).max(65_536).default(4_096),
});

export type WebhooksConfig = z.output<typeof webhooksConfigSchema>;

import { z } from 'zod';
import { usdAmount } from '../../core/vocabulary/money.ts';

const limitSet = z.strictObject({
  requestsPerMinute: z.number().int().positive().nullable().default(null),
  tokensPerMinute: z.number().int().positive().nullable().default(null),
  concurrency: z.number().int().positive().nullable().default(null),
});

export const meteringConfigSchema = z.strictObject({
  /** Credit a new organisation starts with, in USD (an opening adjustment line). */
  initialCreditUsd: usdAmount.default(0),
  limits: z
    .strictObject({
      /** For keys without limits of their own. */
      keyDefaults: limitSet.prefault({ requestsPerMinute: 600, concurrency: 50 }),
      project: limitSet.prefault({}),
      account: limitSet.prefault({}),
    })
    .prefault({}),
  requestLog: z
    .strictObject({
      flushIntervalMs: z.number().int().min(10).default(100),
      batchSize: z.number().int().min(1).max(2000).default(500),
      maxQueue: z.number().int().min(100).default(20_000),
      /**
       * The billing journal's folder (local disk, not a network share), or false for none: then rows
       * still queued in memory are lost if the process dies. Default: `<storage.dataDir>/journal`,
       * and none when the database itself is in memory.
       */
      journalDir: z.union([z.string().min(1), z.literal(false)]).optional(),
    })
    .prefault({}),
  /** Concurrency leases lapse after this unless renewed (streams renew them). */
  leaseTtlMs: z.number().int().min(1000).default(60_000),
  /** Money counters idle this long are re-read from the ledger. */
  counterTtlMs: z
    .number()
    .int()
    .min(1000)
    .default(30 * 60_000),
  /** How long account and project caps are cached per replica. */
  policyCacheTtlMs: z.number().int().min(0).default(2_000),
  /**
   * Promotion codes tried (redeemed or refused) per organisation and per client address, in each
   * windowMinutes, on every replica together: enough for people typing codes, far too few to guess one.
   */
  promotionCodes: z
    .strictObject({
      attemptsPerOrganization: z.number().int().min(1).default(10),
      attemptsPerAddress: z.number().int().min(1).default(20),
      windowMinutes: z.number().int().min(1).max(1440).default(60),
    })
    .prefault({}),
});

export type MeteringConfig = z.output<typeof meteringConfigSchema>;

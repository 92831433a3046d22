import { z } from 'zod';
import { usdAmount, usdToMicros } from '../../core/vocabulary/money.ts';

const MiB = 1024 * 1024;

/**
 * What an instance costs per hour by its memory tier: the smallest tier whose memory holds the
 * instance's memory cap (`runtime.limits.memoryBytes`, or a deploy's own), the largest beyond them.
 * Defaults: $0.005 an hour per 512 MiB (about $3.60 a month for the smallest app), doubling with memory.
 */
export const DEFAULT_HOSTING_PRICES = [
  { memoryMiB: 512, usdPerHour: 0.005 },
  { memoryMiB: 1024, usdPerHour: 0.01 },
  { memoryMiB: 2048, usdPerHour: 0.02 },
  { memoryMiB: 4096, usdPerHour: 0.04 },
  { memoryMiB: 8192, usdPerHour: 0.08 },
];

/** `plugins.apps.hosting.prices`: the tiers, any order, each memory size once. */
export const hostingPricesSchema = z
  .array(z.strictObject({ memoryMiB: z.number().int().min(64), usdPerHour: usdAmount }))
  .min(1)
  .refine((tiers) => new Set(tiers.map((tier) => tier.memoryMiB)).size === tiers.length, 'each memoryMiB once')
  .default(DEFAULT_HOSTING_PRICES);

export interface HostingTier {
  memoryBytes: number;
  microsPerHour: bigint;
  /** `512MiB`: what an entry says its tier was. */
  name: string;
}

export class HostingPrices {
  private readonly tiers: readonly HostingTier[];

  constructor(prices: z.output<typeof hostingPricesSchema>) {
    this.tiers = [...prices]
      .sort((a, b) => a.memoryMiB - b.memoryMiB)
      .map((tier) => ({ memoryBytes: tier.memoryMiB * MiB, microsPerHour: usdToMicros(tier.usdPerHour), name: `${tier.memoryMiB}MiB` }));
  }

  /** The tier an instance capped at `memoryBytes` is billed at. */
  tierOf(memoryBytes: number): HostingTier {
    return this.tiers.find((tier) => tier.memoryBytes >= memoryBytes) ?? this.tiers.at(-1)!;
  }

  /** `ms` of one instance at `tier`, in µUSD, rounded half up once per entry (an entry's cost is exact). */
  costMicros(tier: HostingTier, ms: number): bigint {
    return (BigInt(ms) * tier.microsPerHour + 1_800_000n) / 3_600_000n;
  }
}

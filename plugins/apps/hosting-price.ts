import type { z } from 'zod';
import type { hostingPricesSchema } from './hosting-prices.ts';

/**
 * What hosting an app costs: instance-seconds × the hourly price of the memory tier each sample
 * fell in. Pure, so the usage routes and the daily ledger lines (`hosting`) compute the same µUSD
 * from the same samples (README.md: "Usage and its cost").
 */

const MiB = 1024 * 1024;

/** One memory tier: an instance whose sampled memory is at most `upToBytes` costs `microsPerHour`. */
export interface PriceTier {
  upToBytes: number;
  /** µUSD per instance-hour. */
  microsPerHour: number;
}

export interface HostingPrices {
  /** Ascending by upToBytes; memory above the last tier is priced as the last tier. */
  tiers: readonly PriceTier[];
}

/** What a sample contributes: the running time it accounts for and the memory the instance held. */
export interface CostSample {
  /** Milliseconds of one instance's running time the sample accounts for. */
  coversMs: number;
  memoryBytes: number;
}

/**
 * The tiers of `plugins.apps.hosting.prices` (hosting-prices.ts, what the ledger charges) as this
 * module prices samples with them: one price list for the ledger and the usage routes.
 */
export function priceTiersOf(prices: z.output<typeof hostingPricesSchema>): HostingPrices {
  const tiers = [...prices].sort((a, b) => a.memoryMiB - b.memoryMiB).map((tier) => ({ upToBytes: tier.memoryMiB * MiB, microsPerHour: Math.round(tier.usdPerHour * 1e6) }));
  return { tiers };
}

/** The tier a memory figure falls in: the smallest holding it, else the largest. */
export function tierOf(memoryBytes: number, prices: HostingPrices): PriceTier {
  const tiers = prices.tiers;
  if (tiers.length === 0) throw new Error('hosting prices: no tiers');
  return tiers.find((tier) => memoryBytes <= tier.upToBytes) ?? tiers[tiers.length - 1]!;
}

const MS_PER_HOUR = 3_600_000n;

/** Σ coversMs × tier price per hour, exactly (integers; ms·µUSD/h). */
function exactSum(samples: Iterable<CostSample>, prices: HostingPrices): bigint {
  let sum = 0n;
  for (const sample of samples) {
    if (sample.coversMs <= 0) continue;
    sum += BigInt(Math.round(sample.coversMs)) * BigInt(tierOf(sample.memoryBytes, prices).microsPerHour);
  }
  return sum;
}

/**
 * The µUSD the samples cost, summed exactly and rounded down once at the end: a caller that prices
 * a day's samples gets that day's figure to the µUSD, whatever order the samples come in. Prices of
 * separate groups (days, apps) are each rounded down, so their sum can be a few µUSD under the
 * price of all their samples together; the ledger prices per organisation and UTC day, and the
 * usage routes say which window they priced.
 */
export function hostingCostMicros(samples: Iterable<CostSample>, prices: HostingPrices): number {
  return Number(exactSum(samples, prices) / MS_PER_HOUR);
}

/** Instance-seconds and µUSD per tier, for the usage views. */
export function hostingCostByTier(samples: readonly CostSample[], prices: HostingPrices): Array<{ upToBytes: number; microsPerHour: number; instanceSeconds: number; micros: number }> {
  return prices.tiers
    .map((tier) => {
      const own = samples.filter((sample) => tierOf(sample.memoryBytes, prices) === tier);
      const ms = own.reduce((total, sample) => total + Math.max(0, sample.coversMs), 0);
      return { upToBytes: tier.upToBytes, microsPerHour: tier.microsPerHour, instanceSeconds: ms / 1000, micros: hostingCostMicros(own, prices) };
    })
    .filter((tier) => tier.instanceSeconds > 0);
}

import { type HostingPrices, hostingCostByTier, hostingCostMicros } from '../hosting-price.ts';
import type { UsageSample } from './usage-samples.ts';

/** Memory and CPU figures of a set of samples (README.md: usage and its cost). */
export interface UsageFigures {
  instanceSeconds: number;
  memoryAverageBytes: number | null;
  memoryPeakBytes: number | null;
  cpuAverageCores: number | null;
  cpuPeakCores: number | null;
}

const coresOf = (sample: UsageSample): number | null => (sample.coversMs > 0 ? sample.cpuMs / sample.coversMs : null);

/** Averages are per instance, weighted by the running time each sample covers. */
export function usageFigures(samples: readonly UsageSample[]): UsageFigures {
  const coveredMs = samples.reduce((total, sample) => total + sample.coversMs, 0);
  if (samples.length === 0) return { instanceSeconds: 0, memoryAverageBytes: null, memoryPeakBytes: null, cpuAverageCores: null, cpuPeakCores: null };
  const cores = samples.map(coresOf).filter((value): value is number => value !== null);
  return {
    instanceSeconds: coveredMs / 1000,
    memoryAverageBytes: coveredMs > 0 ? Math.round(samples.reduce((total, sample) => total + sample.memoryBytes * sample.coversMs, 0) / coveredMs) : null,
    memoryPeakBytes: Math.max(...samples.map((sample) => sample.memoryBytes)),
    cpuAverageCores: coveredMs > 0 ? samples.reduce((total, sample) => total + sample.cpuMs, 0) / coveredMs : null,
    cpuPeakCores: cores.length > 0 ? Math.max(...cores) : null,
  };
}

/** The instances of the newest sampling round: their total memory and CPU. */
export function latestRound(samples: readonly UsageSample[]): { at: Date | null; instances: number; memoryBytes: number | null; cores: number | null } {
  const last = samples[samples.length - 1];
  if (!last) return { at: null, instances: 0, memoryBytes: null, cores: null };
  const round = samples.filter((sample) => sample.sampledAt.getTime() === last.sampledAt.getTime());
  const cores = round.map(coresOf).filter((value): value is number => value !== null);
  return {
    at: last.sampledAt,
    instances: round.length,
    memoryBytes: round.reduce((total, sample) => total + sample.memoryBytes, 0),
    cores: cores.length > 0 ? cores.reduce((total, value) => total + value, 0) : null,
  };
}

export function costOf(samples: readonly UsageSample[], prices: HostingPrices) {
  const micros = hostingCostMicros(samples, prices);
  return {
    micros,
    usd: micros / 1e6,
    instanceSeconds: samples.reduce((total, sample) => total + sample.coversMs, 0) / 1000,
    tiers: hostingCostByTier(samples, prices),
  };
}

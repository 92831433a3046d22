/**
 * GCRA arithmetic shared by the coordination adapters. The memory adapter calls these functions;
 * the Redis adapter's Lua scripts (adapters/redis/redis-scripts.ts) repeat the same expressions in
 * the same order, so both produce bit-identical doubles and therefore the same decisions.
 *
 * State per key is one number, the theoretical arrival time (TAT). A missing key, or a TAT in the
 * past, is a full bucket.
 *
 * - Emission interval T = periodMs / limit; burst tolerance = periodMs, so a full bucket admits
 *   `limit` units at once.
 * - A call of `cost` is allowed iff newTat - now <= periodMs, with newTat = max(TAT, now) + cost*T.
 * - remaining = floor((periodMs - (TAT' - now)) / T) clamped to [0, floor(limit)], where TAT' is the
 *   state after the call (unchanged when refused).
 * - resetMs = max(0, ceil(TAT' - now)): time until the bucket is full again.
 * - retryAfterMs (refused only) = ceil(newTat - periodMs - now): time until `cost` would fit.
 * - cost > limit can never fit. It is refused with retryAfterMs = time until the bucket is full,
 *   which is 0 when it already is: callers must reject such a request outright, not retry it.
 * - limit <= 0 refuses every call (remaining 0, resetMs 0, retryAfterMs 0) and nothing is stored.
 */
import type { RateDecision } from '../../core/ports/coordination.ts';

/**
 * Tolerance for float rounding in every comparison and rounding above. T is rarely exact
 * (200 / 3), so `limit` additions of T can land a hair past periodMs and wrongly refuse the last
 * unit of a burst. One microsecond is below the resolution of Redis TIME and far above the
 * accumulated error at the magnitudes used (Redis scripts count from GCRA_EPOCH_S, see there).
 */
export const GCRA_EPSILON_MS = 0.001;

/**
 * Redis scripts measure time from this epoch (2023-11-14) instead of 1970: doubles near 1e12 ms
 * only resolve ~0.25 µs and that error accumulates over a burst; near 1e10 it is ~100x smaller.
 */
export const GCRA_EPOCH_S = 1_700_000_000;

export interface GcraAttempt {
  fits: boolean;
  /** max(TAT, now): the state if nothing is taken. */
  base: number;
  /** The state if this cost is taken (equal to base when the entry can never fit). */
  newTat: number;
  /** 0 when it fits. */
  retryAfterMs: number;
}

export function gcraAttempt(tat: number | undefined, now: number, limit: number, periodMs: number, cost: number): GcraAttempt {
  const base = Math.max(tat ?? now, now);
  if (limit <= 0) return { fits: false, base, newTat: base, retryAfterMs: 0 };
  if (cost > limit) {
    return { fits: false, base, newTat: base, retryAfterMs: Math.max(0, Math.ceil(base - now - GCRA_EPSILON_MS)) };
  }
  const interval = periodMs / limit;
  const newTat = base + cost * interval;
  const ahead = newTat - now;
  if (ahead <= periodMs + GCRA_EPSILON_MS) return { fits: true, base, newTat, retryAfterMs: 0 };
  return { fits: false, base, newTat, retryAfterMs: Math.max(1, Math.ceil(ahead - periodMs - GCRA_EPSILON_MS)) };
}

export function gcraDecision(key: string, limit: number, periodMs: number, tatAfter: number, now: number, retryAfterMs: number): RateDecision {
  if (limit <= 0) return { key, limit, remaining: 0, resetMs: 0, retryAfterMs };
  const interval = periodMs / limit;
  const raw = Math.floor((periodMs - (tatAfter - now) + GCRA_EPSILON_MS) / interval);
  const remaining = Math.min(Math.max(raw, 0), Math.floor(limit));
  const resetMs = Math.max(0, Math.ceil(tatAfter - now - GCRA_EPSILON_MS));
  return { key, limit, remaining, resetMs, retryAfterMs };
}

/**
 * The TAT after an `adjust`. A charge may push the bucket into debt (TAT beyond now + periodMs),
 * which later calls wait out; a refund never moves TAT below now, so it cannot bank extra burst.
 */
export function gcraAdjusted(tat: number | undefined, now: number, limit: number, periodMs: number, cost: number): number {
  const base = Math.max(tat ?? now, now);
  const moved = base + cost * (periodMs / limit);
  return cost < 0 ? Math.max(moved, now) : moved;
}

/** A TAT this close to now is a full bucket: the key can be dropped. */
export function gcraIsFull(tat: number, now: number): boolean {
  return tat - now <= GCRA_EPSILON_MS;
}

/**
 * Rejects entries the arithmetic cannot make sense of. These are programming errors in the caller,
 * not client input, hence plain exceptions rather than refusals.
 */
export function assertRateEntry(entry: { key: string; limit: number; periodMs: number; cost?: number }): void {
  if (typeof entry.key !== 'string') throw new TypeError('rate entry key must be a string');
  if (!Number.isFinite(entry.limit)) throw new RangeError(`rate entry ${entry.key}: limit must be a finite number`);
  if (!Number.isFinite(entry.periodMs) || entry.periodMs <= 0) {
    throw new RangeError(`rate entry ${entry.key}: periodMs must be a positive number`);
  }
  if (entry.cost !== undefined && !Number.isFinite(entry.cost)) {
    throw new RangeError(`rate entry ${entry.key}: cost must be a finite number`);
  }
}

/** consume takes units; giving them back is what adjust is for. */
export function assertConsumeEntry(entry: { key: string; limit: number; periodMs: number; cost: number }): void {
  assertRateEntry(entry);
  if (entry.cost < 0) throw new RangeError(`rate entry ${entry.key}: consume cost must not be negative (use adjust)`);
}

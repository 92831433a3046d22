/**
 * Rounds a TTL up to whole milliseconds, which is all Redis PX/PEXPIRE accept, so both adapters
 * expire an entry at the same moment. A non-positive TTL would make the lease or cache entry
 * meaningless, so it is a caller bug rather than something to clamp.
 */
export function wholeTtlMs(ttlMs: number, what: string): number {
  if (!Number.isFinite(ttlMs) || ttlMs <= 0) throw new RangeError(`${what}: ttlMs must be a positive number`);
  return Math.ceil(ttlMs);
}

/** Money counters hold integer micro-USD; anything else is a caller bug, refused the same way by both adapters. */
export function assertAllowanceAmount(value: number, what: string): void {
  if (!Number.isSafeInteger(value)) throw new RangeError(`allowance ${what}: amounts must be safe integers`);
}

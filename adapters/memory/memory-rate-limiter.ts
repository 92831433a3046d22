import type { RateDecision, RateEntry, RateLimiter, RateResult } from '../../core/ports/coordination.ts';
import {
  assertConsumeEntry,
  assertRateEntry,
  gcraAdjusted,
  gcraAttempt,
  gcraDecision,
  gcraIsFull,
  type GcraAttempt,
} from './gcra.ts';

/** GCRA in one process; see gcra.ts for the semantics shared with the Redis adapter. */
export class MemoryRateLimiter implements RateLimiter {
  /** key -> TAT. Only buckets that are not full are kept. */
  private readonly tats = new Map<string, number>();

  constructor(private readonly now: () => number) {}

  async consume(entries: RateEntry[]): Promise<RateResult> {
    entries.forEach(assertConsumeEntry);
    const now = this.now();
    // Several entries may name the same key; each sees what the earlier ones of this call took.
    const pending = new Map<string, number>();
    const attempts: GcraAttempt[] = [];
    let allowed = true;
    for (const entry of entries) {
      const tat = pending.get(entry.key) ?? this.read(entry.key, now);
      const attempt = gcraAttempt(tat, now, entry.limit, entry.periodMs, entry.cost);
      if (attempt.fits) pending.set(entry.key, attempt.newTat);
      else allowed = false;
      attempts.push(attempt);
    }
    if (allowed) for (const [key, tat] of pending) this.write(key, tat, now);
    const decisions = entries.map((entry, i) => {
      const attempt = attempts[i]!;
      return gcraDecision(entry.key, entry.limit, entry.periodMs, allowed ? attempt.newTat : attempt.base, now, attempt.retryAfterMs);
    });
    return { allowed, decisions };
  }

  async peek(entries: Omit<RateEntry, 'cost'>[]): Promise<RateDecision[]> {
    entries.forEach((entry) => assertRateEntry(entry));
    const now = this.now();
    return entries.map((entry) => {
      // retryAfterMs of a peek: how long until one unit fits.
      const attempt = gcraAttempt(this.read(entry.key, now), now, entry.limit, entry.periodMs, 1);
      return gcraDecision(entry.key, entry.limit, entry.periodMs, attempt.base, now, attempt.retryAfterMs);
    });
  }

  async adjust(entries: RateEntry[]): Promise<void> {
    entries.forEach((entry) => assertRateEntry(entry));
    const now = this.now();
    for (const entry of entries) {
      if (entry.limit <= 0 || entry.cost === 0) continue;
      this.write(entry.key, gcraAdjusted(this.read(entry.key, now), now, entry.limit, entry.periodMs, entry.cost), now);
    }
  }

  sweep(now: number): void {
    for (const [key, tat] of this.tats) if (gcraIsFull(tat, now)) this.tats.delete(key);
  }

  clear(): void {
    this.tats.clear();
  }

  private read(key: string, now: number): number | undefined {
    const tat = this.tats.get(key);
    if (tat === undefined) return undefined;
    if (tat <= now) {
      this.tats.delete(key);
      return undefined;
    }
    return tat;
  }

  private write(key: string, tat: number, now: number): void {
    if (gcraIsFull(tat, now)) this.tats.delete(key);
    else this.tats.set(key, tat);
  }
}

import type { RateDecision, RateEntry, RateLimiter, RateResult } from '../../core/ports/coordination.ts';
import { assertConsumeEntry, assertRateEntry, gcraAdjusted, gcraAttempt, gcraDecision, gcraIsFull, type GcraAttempt } from './gcra.ts';

/** A consume worked out but not yet written: the admission gate checks other stores in between. */
export interface RateCheck {
  allowed: boolean;
  attempts: GcraAttempt[];
  /** key -> TAT to write if the call goes ahead. */
  pending: Map<string, number>;
}

/** GCRA in one process; see gcra.ts for the semantics shared with the Redis adapter. */
export class MemoryRateLimiter implements RateLimiter {
  /** key -> TAT. Only buckets that are not full are kept. */
  private readonly tats = new Map<string, number>();

  constructor(private readonly now: () => number) {}

  async consume(entries: RateEntry[]): Promise<RateResult> {
    const now = this.now();
    const check = this.check(entries, now);
    if (check.allowed) this.commit(check, now);
    return { allowed: check.allowed, decisions: this.decisions(entries, check, check.allowed, now) };
  }

  async peek(entries: Omit<RateEntry, 'cost'>[]): Promise<RateDecision[]> {
    for (const entry of entries) assertRateEntry(entry);
    const now = this.now();
    return entries.map((entry) => {
      // retryAfterMs of a peek: how long until one unit fits.
      const attempt = gcraAttempt(this.read(entry.key, now), now, entry.limit, entry.periodMs, 1);
      return gcraDecision(entry.key, entry.limit, entry.periodMs, attempt.base, now, attempt.retryAfterMs);
    });
  }

  async adjust(entries: RateEntry[]): Promise<void> {
    this.adjustNow(entries, this.now());
  }

  /** Works out whether every entry fits, writing nothing. Several entries may name one key: each sees what the earlier ones took. */
  check(entries: RateEntry[], now: number): RateCheck {
    const pending = new Map<string, number>();
    const attempts: GcraAttempt[] = [];
    let allowed = true;
    for (const entry of entries) {
      assertConsumeEntry(entry);
      const tat = pending.get(entry.key) ?? this.read(entry.key, now);
      const attempt = gcraAttempt(tat, now, entry.limit, entry.periodMs, entry.cost);
      if (attempt.fits) pending.set(entry.key, attempt.newTat);
      else allowed = false;
      attempts.push(attempt);
    }
    return { allowed, attempts, pending };
  }

  commit(check: RateCheck, now: number): void {
    for (const [key, tat] of check.pending) this.write(key, tat, now);
  }

  /** The decisions of a check: the buckets after it when `taken`, as they are otherwise. */
  decisions(entries: RateEntry[], check: RateCheck, taken: boolean, now: number): RateDecision[] {
    return entries.map((entry, i) => {
      const attempt = check.attempts[i]!;
      return gcraDecision(entry.key, entry.limit, entry.periodMs, taken ? attempt.newTat : attempt.base, now, attempt.retryAfterMs);
    });
  }

  adjustNow(entries: RateEntry[], now: number): void {
    for (const entry of entries) {
      assertRateEntry(entry);
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

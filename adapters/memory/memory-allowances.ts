import type { AllowanceResult, AllowanceStore, AllowanceTake } from '../../core/ports/coordination.ts';
import { assertAllowanceAmount, wholeTtlMs } from './ttl.ts';

interface Counter {
  value: number;
  expiresAt: number;
}

export class MemoryAllowances implements AllowanceStore {
  private readonly counters = new Map<string, Counter>();

  constructor(private readonly now: () => number) {}

  async seed(key: string, value: number, ttlMs: number): Promise<void> {
    assertAllowanceAmount(value, 'seed');
    const now = this.now();
    if (!this.live(key, now)) this.counters.set(key, { value, expiresAt: now + wholeTtlMs(ttlMs, 'allowance seed') });
  }

  async take(entries: AllowanceTake[], ttlMs: number): Promise<AllowanceResult> {
    const ttl = wholeTtlMs(ttlMs, 'allowance take');
    const now = this.now();
    const check = this.check(entries, now);
    if (check.result.ok) this.commit(check.pending, now + ttl);
    return check.result;
  }

  async give(entries: Array<{ key: string; amount: number }>, ttlMs: number): Promise<void> {
    this.giveNow(entries, wholeTtlMs(ttlMs, 'allowance give'), this.now());
  }

  /** Works out a take without writing: the result, and what each counter would lose. */
  check(entries: AllowanceTake[], now: number): { result: AllowanceResult; pending: Map<string, number> } {
    const pending = new Map<string, number>();
    const counters = entries.map((entry) => this.live(entry.key, now));
    if (counters.includes(undefined)) {
      const missing = entries.filter((_, i) => !counters[i]).map((entry) => entry.key);
      return { result: { ok: false, reason: 'missing', keys: [...new Set(missing)] }, pending };
    }
    // Several entries may name one counter: check against what the earlier ones took.
    const taken: number[] = [];
    for (let i = 0; i < entries.length; i += 1) {
      const entry = entries[i]!;
      assertAllowanceAmount(entry.amount, 'take');
      if (entry.headroom !== undefined) assertAllowanceAmount(entry.headroom, 'headroom');
      const left = counters[i]!.value + (entry.headroom ?? 0) - (pending.get(entry.key) ?? 0);
      const amount = entry.shrink ? Math.min(entry.amount, Math.max(left, 0)) : entry.amount;
      if (entry.shrink ? left <= 0 && entry.amount > 0 : left < entry.amount) {
        return { result: { ok: false, reason: 'insufficient', key: entry.key, remaining: left }, pending };
      }
      pending.set(entry.key, (pending.get(entry.key) ?? 0) + amount);
      taken.push(amount);
    }
    return { result: { ok: true, taken }, pending };
  }

  /** Applies a successful check; only for counters the check found alive in this same turn. */
  commit(pending: Map<string, number>, expiresAt: number): void {
    for (const [key, amount] of pending) {
      const counter = this.counters.get(key)!;
      counter.value -= amount;
      counter.expiresAt = expiresAt;
    }
  }

  giveNow(entries: Array<{ key: string; amount: number }>, ttl: number, now: number): void {
    for (const entry of entries) {
      assertAllowanceAmount(entry.amount, 'give');
      const counter = this.live(entry.key, now);
      if (!counter) continue;
      counter.value += entry.amount;
      counter.expiresAt = now + ttl;
    }
  }

  async peek(keys: string[]): Promise<Array<number | null>> {
    const now = this.now();
    return keys.map((key) => this.live(key, now)?.value ?? null);
  }

  async delete(keys: string[]): Promise<void> {
    for (const key of keys) this.counters.delete(key);
  }

  sweep(now: number): void {
    for (const [key, counter] of this.counters) if (counter.expiresAt <= now) this.counters.delete(key);
  }

  clear(): void {
    this.counters.clear();
  }

  private live(key: string, now: number): Counter | undefined {
    const counter = this.counters.get(key);
    if (counter && counter.expiresAt <= now) {
      this.counters.delete(key);
      return undefined;
    }
    return counter;
  }
}

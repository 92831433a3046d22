import type { RateDecision, RateEntry, RateLimiter, RateResult } from '../../core/ports/coordination.ts';
import { assertConsumeEntry, assertRateEntry } from '../memory/gcra.ts';
import { GCRA_ADJUST, GCRA_CONSUME, GCRA_PEEK, integerReply, runScript } from './redis-scripts.ts';
import type { RedisClient } from './redis-client.ts';
import { redisKeyNames } from './redis-key-names.ts';

/** GCRA with one script per call, so a multi-entry call is checked and written atomically. */
export class RedisRateLimiter implements RateLimiter {
  private readonly rateKey: (key: string) => string;

  constructor(
    private readonly client: RedisClient,
    prefix: string,
  ) {
    this.rateKey = redisKeyNames(prefix).rate;
  }

  async consume(entries: RateEntry[]): Promise<RateResult> {
    entries.forEach(assertConsumeEntry);
    if (entries.length === 0) return { allowed: true, decisions: [] };
    const args = entries.flatMap((entry) => [String(entry.limit), String(entry.periodMs), String(entry.cost)]);
    const reply = integerReply(await runScript(this.client, GCRA_CONSUME, this.keys(entries), args), GCRA_CONSUME);
    return { allowed: reply[0] === 1, decisions: readDecisions(entries, reply, 1) };
  }

  async peek(entries: Omit<RateEntry, 'cost'>[]): Promise<RateDecision[]> {
    for (const entry of entries) assertRateEntry(entry);
    if (entries.length === 0) return [];
    const args = entries.flatMap((entry) => [String(entry.limit), String(entry.periodMs)]);
    const reply = integerReply(await runScript(this.client, GCRA_PEEK, this.keys(entries), args), GCRA_PEEK);
    return readDecisions(entries, reply, 0);
  }

  async adjust(entries: RateEntry[]): Promise<void> {
    for (const entry of entries) assertRateEntry(entry);
    if (entries.length === 0) return;
    const args = entries.flatMap((entry) => [String(entry.limit), String(entry.periodMs), String(entry.cost)]);
    await runScript(this.client, GCRA_ADJUST, this.keys(entries), args);
  }

  private keys(entries: { key: string }[]): string[] {
    return entries.map((entry) => this.rateKey(entry.key));
  }
}

/** Scripts answer remaining, resetMs, retryAfterMs per entry, starting at `offset`. */
/** `exact`: the reply ends with these decisions (the gate's reply goes on with more values). */
export function readDecisions(entries: ReadonlyArray<{ key: string; limit: number }>, reply: number[], offset: number, exact = true): RateDecision[] {
  const end = offset + entries.length * 3;
  if (exact ? reply.length !== end : reply.length < end) throw new Error(`a rate script answered ${reply.length} values for ${entries.length} entries from ${offset}`);
  return entries.map((entry, i) => ({
    key: entry.key,
    limit: entry.limit,
    remaining: reply[offset + i * 3]!,
    resetMs: reply[offset + i * 3 + 1]!,
    retryAfterMs: reply[offset + i * 3 + 2]!,
  }));
}

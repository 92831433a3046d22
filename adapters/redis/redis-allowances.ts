import type { AllowanceResult, AllowanceStore, AllowanceTake } from '../../core/ports/coordination.ts';
import { assertAllowanceAmount, wholeTtlMs } from '../memory/ttl.ts';
import type { RedisClient } from './redis-client.ts';
import { redisKeyNames } from './redis-key-names.ts';
import { ALLOWANCE_GIVE, ALLOWANCE_TAKE, integerReply, runScript } from './redis-scripts.ts';

export class RedisAllowances implements AllowanceStore {
  private readonly key: (key: string) => string;

  constructor(
    private readonly client: RedisClient,
    prefix: string,
  ) {
    this.key = redisKeyNames(prefix).allowance;
  }

  async seed(key: string, value: number, ttlMs: number): Promise<void> {
    assertAllowanceAmount(value, 'seed');
    const ttl = wholeTtlMs(ttlMs, 'allowance seed');
    await this.client.set(this.key(key), String(value), { condition: 'NX', expiration: { type: 'PX', value: ttl } });
  }

  async take(entries: AllowanceTake[], ttlMs: number): Promise<AllowanceResult> {
    if (entries.length === 0) return { ok: true, taken: [] };
    const ttl = wholeTtlMs(ttlMs, 'allowance take');
    const args = [String(ttl)];
    for (const entry of entries) {
      assertAllowanceAmount(entry.amount, 'take');
      if (entry.headroom !== undefined) assertAllowanceAmount(entry.headroom, 'headroom');
      args.push(String(entry.amount), entry.shrink ? '1' : '0', String(entry.headroom ?? 0));
    }
    const reply = integerReply(
      await runScript(
        this.client,
        ALLOWANCE_TAKE,
        entries.map((e) => this.key(e.key)),
        args,
      ),
      ALLOWANCE_TAKE,
    );
    const [status, ...rest] = reply;
    if (status === 1) return { ok: true, taken: rest };
    if (status === 0) return { ok: false, reason: 'missing', keys: [...new Set(rest.map((i) => entries[i - 1]!.key))] };
    return { ok: false, reason: 'insufficient', key: entries[rest[0]! - 1]!.key, remaining: rest[1]! };
  }

  async give(entries: Array<{ key: string; amount: number }>, ttlMs: number): Promise<void> {
    if (entries.length === 0) return;
    const ttl = wholeTtlMs(ttlMs, 'allowance give');
    for (const entry of entries) assertAllowanceAmount(entry.amount, 'give');
    await runScript(
      this.client,
      ALLOWANCE_GIVE,
      entries.map((e) => this.key(e.key)),
      [String(ttl), ...entries.map((e) => String(e.amount))],
    );
  }

  async peek(keys: string[]): Promise<Array<number | null>> {
    if (keys.length === 0) return [];
    const values = await this.client.mGet(keys.map((key) => this.key(key)));
    return values.map((value) => (value === null ? null : Number(value)));
  }

  async delete(keys: string[]): Promise<void> {
    if (keys.length > 0) await this.client.del(keys.map((key) => this.key(key)));
  }
}

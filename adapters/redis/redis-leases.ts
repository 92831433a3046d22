import type { LeaseEntry, LeaseResult, LeaseStore } from '../../core/ports/coordination.ts';
import { wholeTtlMs } from '../memory/ttl.ts';
import { LEASE_ACQUIRE, LEASE_ACTIVE, LEASE_RENEW, integerReply, runScript } from './redis-scripts.ts';
import type { RedisClient } from './redis-client.ts';
import { redisKeyNames } from './redis-key-names.ts';

/** Leases as one ZSET per key (member = lease id, score = expiry in server ms). */
export class RedisLeaseStore implements LeaseStore {
  private readonly key: (key: string) => string;

  constructor(
    private readonly client: RedisClient,
    prefix: string,
  ) {
    this.key = redisKeyNames(prefix).lease;
  }

  async acquire(entries: LeaseEntry[], leaseId: string, ttlMs: number): Promise<LeaseResult> {
    const ttl = wholeTtlMs(ttlMs, 'lease acquire');
    if (entries.length === 0) return { acquired: true };
    const args = [leaseId, String(ttl), ...entries.map((entry) => String(entry.limit))];
    const reply = integerReply(
      await runScript(
        this.client,
        LEASE_ACQUIRE,
        entries.map((entry) => this.key(entry.key)),
        args,
      ),
      LEASE_ACQUIRE,
    );
    if (reply[0] === 1) return { acquired: true };
    const full = entries[(reply[1] ?? 0) - 1];
    if (!full) throw new Error(`lease acquire script named no full key: ${JSON.stringify(reply)}`);
    return { acquired: false, fullKey: full.key };
  }

  /** Extends the lease under every key where it is still alive; true only if it was alive under all. */
  async renew(keys: string[], leaseId: string, ttlMs: number): Promise<boolean> {
    const ttl = wholeTtlMs(ttlMs, 'lease renew');
    if (keys.length === 0) return true;
    const reply = await runScript(
      this.client,
      LEASE_RENEW,
      keys.map((key) => this.key(key)),
      [leaseId, String(ttl)],
    );
    return reply === 1;
  }

  async release(keys: string[], leaseId: string): Promise<void> {
    if (keys.length === 0) return;
    const multi = this.client.multi();
    for (const key of keys) multi.zRem(this.key(key), leaseId);
    await multi.exec();
  }

  async active(key: string): Promise<number> {
    const reply = await runScript(this.client, LEASE_ACTIVE, [this.key(key)], []);
    if (typeof reply !== 'number') throw new Error(`unexpected reply from ${LEASE_ACTIVE.name}: ${JSON.stringify(reply)}`);
    return reply;
  }
}

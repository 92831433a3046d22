import type { LeaseEntry, LeaseResult, LeaseStore } from '../../core/ports/coordination.ts';
import { wholeTtlMs } from './ttl.ts';

/**
 * Leases in one process. A lease is alive while its expiry is strictly after now. Acquire is
 * all-or-nothing; a lease id already alive under a key occupies one slot however often it is
 * acquired again, and re-acquiring refreshes its expiry.
 */
export class MemoryLeaseStore implements LeaseStore {
  /** key -> leaseId -> expiry. Empty keys are dropped. */
  private readonly leases = new Map<string, Map<string, number>>();

  constructor(private readonly now: () => number) {}

  async acquire(entries: LeaseEntry[], leaseId: string, ttlMs: number): Promise<LeaseResult> {
    const ttl = wholeTtlMs(ttlMs, 'lease acquire');
    const now = this.now();
    const fullKey = this.firstFull(entries, leaseId, now);
    if (fullKey !== null) return { acquired: false, fullKey };
    this.grant(entries, leaseId, now + ttl);
    return { acquired: true };
  }

  /** The first key without room for this lease, or null when every key has room. Writes nothing but purging. */
  firstFull(entries: LeaseEntry[], leaseId: string, now: number): string | null {
    for (const entry of entries) {
      if (entry.limit <= 0) return entry.key;
      const holders = this.leases.get(entry.key);
      if (!holders) continue;
      const own = holders.get(leaseId);
      if (own !== undefined && own > now) continue;
      // Expired holders only ever make room, so they are purged only when the key looks full:
      // a key below its limit is answered without walking its holders.
      if (holders.size >= entry.limit && (this.live(entry.key, now)?.size ?? 0) >= entry.limit) return entry.key;
    }
    return null;
  }

  grant(entries: LeaseEntry[], leaseId: string, expiresAt: number): void {
    for (const entry of entries) {
      let holders = this.leases.get(entry.key);
      if (!holders) this.leases.set(entry.key, (holders = new Map()));
      holders.set(leaseId, expiresAt);
    }
  }

  /** Extends the lease under every key where it is still alive; true only if it was alive under all. */
  async renew(keys: string[], leaseId: string, ttlMs: number): Promise<boolean> {
    const ttl = wholeTtlMs(ttlMs, 'lease renew');
    const now = this.now();
    let alive = true;
    for (const key of keys) {
      const holders = this.live(key, now);
      if (holders?.has(leaseId)) holders.set(leaseId, now + ttl);
      else alive = false;
    }
    return alive;
  }

  async release(keys: string[], leaseId: string): Promise<void> {
    this.releaseNow(keys, leaseId);
  }

  releaseNow(keys: string[], leaseId: string): void {
    for (const key of keys) {
      const holders = this.leases.get(key);
      if (!holders) continue;
      holders.delete(leaseId);
      if (holders.size === 0) this.leases.delete(key);
    }
  }

  async active(key: string): Promise<number> {
    return this.live(key, this.now())?.size ?? 0;
  }

  sweep(now: number): void {
    for (const key of [...this.leases.keys()]) this.live(key, now);
  }

  clear(): void {
    this.leases.clear();
  }

  /** The key's holders with expired ones purged; undefined when none are left. */
  private live(key: string, now: number): Map<string, number> | undefined {
    const holders = this.leases.get(key);
    if (!holders) return undefined;
    holders.forEach((expiresAt, id) => {
      if (expiresAt <= now) holders.delete(id);
    });
    if (holders.size === 0) {
      this.leases.delete(key);
      return undefined;
    }
    return holders;
  }
}

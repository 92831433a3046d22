import type { KeyValueCache } from '../../core/ports/coordination.ts';
import { wholeTtlMs } from './ttl.ts';

interface CacheEntry {
  value: string;
  expiresAt: number;
}

// Mirrors what Redis INCRBY accepts, so both adapters fail on the same stored values.
const INTEGER = /^-?\d+$/;

export class MemoryCache implements KeyValueCache {
  private readonly entries = new Map<string, CacheEntry>();

  constructor(private readonly now: () => number) {}

  async get(key: string): Promise<string | null> {
    return this.live(key, this.now())?.value ?? null;
  }

  async set(key: string, value: string, ttlMs: number): Promise<void> {
    const ttl = wholeTtlMs(ttlMs, 'cache set');
    this.entries.set(key, { value, expiresAt: this.now() + ttl });
  }

  async delete(key: string): Promise<void> {
    this.entries.delete(key);
  }

  async increment(key: string, by: number, ttlMs: number): Promise<number> {
    if (!Number.isSafeInteger(by)) throw new RangeError('cache increment: by must be a safe integer');
    const ttl = wholeTtlMs(ttlMs, 'cache increment');
    const now = this.now();
    const entry = this.live(key, now);
    if (!entry) {
      this.entries.set(key, { value: String(by), expiresAt: now + ttl });
      return by;
    }
    if (!INTEGER.test(entry.value)) throw new Error(`cache increment: value of ${key} is not an integer`);
    const next = Number(entry.value) + by;
    if (!Number.isSafeInteger(next)) throw new RangeError(`cache increment: ${key} would overflow`);
    entry.value = String(next);
    return next;
  }

  sweep(now: number): void {
    for (const [key, entry] of this.entries) if (entry.expiresAt <= now) this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }

  private live(key: string, now: number): CacheEntry | undefined {
    const entry = this.entries.get(key);
    if (entry && entry.expiresAt <= now) {
      this.entries.delete(key);
      return undefined;
    }
    return entry;
  }
}

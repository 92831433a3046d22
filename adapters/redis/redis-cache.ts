import type { KeyValueCache } from '../../core/ports/coordination.ts';
import { wholeTtlMs } from '../memory/ttl.ts';
import { CACHE_INCREMENT, runScript } from './redis-scripts.ts';
import type { RedisClient } from './redis-client.ts';

export class RedisCache implements KeyValueCache {
  constructor(
    private readonly client: RedisClient,
    private readonly prefix: string,
  ) {}

  async get(key: string): Promise<string | null> {
    return this.client.get(this.key(key));
  }

  async set(key: string, value: string, ttlMs: number): Promise<void> {
    const ttl = wholeTtlMs(ttlMs, 'cache set');
    await this.client.set(this.key(key), value, { expiration: { type: 'PX', value: ttl } });
  }

  async delete(key: string): Promise<void> {
    await this.client.del(this.key(key));
  }

  async increment(key: string, by: number, ttlMs: number): Promise<number> {
    if (!Number.isSafeInteger(by)) throw new RangeError('cache increment: by must be a safe integer');
    const ttl = wholeTtlMs(ttlMs, 'cache increment');
    const reply = await runScript(this.client, CACHE_INCREMENT, [this.key(key)], [String(by), String(ttl)]);
    if (typeof reply !== 'number') throw new Error(`unexpected reply from ${CACHE_INCREMENT.name}: ${JSON.stringify(reply)}`);
    return reply;
  }

  private key(key: string): string {
    return `${this.prefix}kv:${key}`;
  }
}

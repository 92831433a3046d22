import type { AppConfig } from '../config/schema.ts';
import type { Coordination } from '../core/ports/coordination.ts';
import { createMemoryCoordination } from './memory/memory-coordination.ts';
import { createRedisCoordination } from './redis/redis-coordination.ts';

export async function createCoordination(config: AppConfig['storage']['coordination']): Promise<Coordination> {
  return config.driver === 'redis'
    ? createRedisCoordination({ url: config.url, keyPrefix: config.keyPrefix })
    : createMemoryCoordination();
}

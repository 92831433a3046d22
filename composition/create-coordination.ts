import type { AppConfig } from '../config/schema.ts';
import type { Coordination } from '../core/ports/coordination.ts';
import type { Queryable } from '../core/ports/database.ts';
import { createMemoryCoordination } from '../adapters/memory/memory-coordination.ts';
import { SqlCoordinationEpochs } from '../adapters/sql/coordination-epochs.ts';

export async function createCoordination(config: AppConfig['storage']['coordination'], db: Queryable): Promise<Coordination> {
  if (config.driver === 'memory') return createMemoryCoordination();
  // Imported on use, so a single-process deployment never loads the Redis client.
  const { createRedisCoordination } = await import('../adapters/redis/redis-coordination.ts');
  return createRedisCoordination({
    url: config.url,
    keyPrefix: config.keyPrefix,
    recoveryWindowMs: config.recoveryWindowMs,
    epochs: new SqlCoordinationEpochs(db, config.keyPrefix),
  });
}

import type { Coordination, StoreEpochRecord } from '../../core/ports/coordination.ts';
import { closeClient, connectWithin, makeClient, reportErrors } from './redis-client.ts';
import { RedisAdmissionGate } from './redis-admission-gate.ts';
import { RedisAllowances } from './redis-allowances.ts';
import { RedisCache } from './redis-cache.ts';
import { RedisLeaseStore } from './redis-leases.ts';
import { RedisPubSub } from './redis-pubsub.ts';
import { RedisRateLimiter } from './redis-rate-limiter.ts';
import { loadScripts } from './redis-scripts.ts';

export interface RedisCoordinationOptions {
  url: string;
  /**
   * Namespace for every key and channel (default `svc:`), so several deployments or test runs can
   * share one server. Keys are `<prefix>rl:`, `<prefix>lease:` and `<prefix>kv:` plus the caller's
   * key; channels are `<prefix>ch:<channel>`.
   */
  keyPrefix?: string;
  /**
   * After the server lost its data, the longest admissions wait for every live replica to report
   * what its calls in flight hold (default 5 s; see GateRecovery in core/ports/coordination.ts);
   * they resume as soon as all have. Replicas look for a lost store four times per window.
   */
  recoveryWindowMs?: number;
  /** The database's memory of this store's epoch: tells a new store from one that lost its data. */
  epochs: StoreEpochRecord;
}

/** Where a replica that found the store's data lost tells the others to report what they hold. */
const EPOCH_CHANNEL = 'coordination-epoch';

/** Reports of outstanding money outlive their last refresh by this much: longer than any call runs. */
const OUTSTANDING_TTL_MS = 60 * 60_000;

/**
 * Coordination shared by every replica through one Redis server. Resolves once connected and the
 * scripts are loaded; rejects if Redis is not reachable within a few seconds. Multi-key scripts
 * need all their keys on one node: this speaks to a single server, not a Cluster.
 */
export async function createRedisCoordination(options: RedisCoordinationOptions): Promise<Coordination> {
  const prefix = options.keyPrefix ?? 'svc:';
  const client = makeClient(options.url);
  reportErrors(client, 'command');
  await connectWithin(client, 'command');
  try {
    await loadScripts(client);
  } catch (err) {
    await closeClient(client);
    throw err;
  }

  const pubsub = new RedisPubSub(client, prefix, async () => {
    const subscriber = client.duplicate();
    reportErrors(subscriber, 'subscriber');
    await connectWithin(subscriber, 'subscriber');
    return subscriber;
  });

  const gate = new RedisAdmissionGate(client, prefix, {
    recoveryWindowMs: options.recoveryWindowMs ?? 5_000,
    outstandingTtlMs: OUTSTANDING_TTL_MS,
    epochs: options.epochs,
    announce: () => pubsub.publish(EPOCH_CHANNEL, 'lost'),
  });
  try {
    await pubsub.subscribe(EPOCH_CHANNEL, () => gate.nudge());
  } catch (err) {
    await gate.close();
    await Promise.all([pubsub.close(closeClient), closeClient(client)]);
    throw err;
  }
  let closing: Promise<void> | undefined;
  return {
    kind: 'redis',
    gate,
    rateLimiter: new RedisRateLimiter(client, prefix),
    allowances: new RedisAllowances(client, prefix),
    leases: new RedisLeaseStore(client, prefix),
    cache: new RedisCache(client, prefix),
    pubsub,
    async ping() {
      await client.ping();
    },
    close() {
      closing ??= gate
        .close()
        .then(() => Promise.all([pubsub.close(closeClient), closeClient(client)]))
        .then(() => undefined);
      return closing;
    },
  };
}

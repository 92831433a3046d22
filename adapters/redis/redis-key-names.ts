/**
 * Where each kind of coordination state lives under the deployment's prefix. The stores and the
 * admission gate name the same counters, so they share these.
 */
export const redisKeyNames = (prefix: string) => ({
  rate: (key: string) => `${prefix}rl:${key}`,
  lease: (key: string) => `${prefix}lease:${key}`,
  allowance: (key: string) => `${prefix}allow:${key}`,
  /** Set once and never expiring: its absence means the server lost its data (redis-scripts.ts EPOCH_FUNCTIONS). */
  epoch: `${prefix}epoch`,
  epochReady: `${prefix}epoch:ready`,
  /** Per scope, a hash of replica id → micro-USD that replica reported after the server lost its data. */
  outstanding: (scope: string) => `${prefix}out:${scope}`,
});

export type RedisKeyNames = ReturnType<typeof redisKeyNames>;

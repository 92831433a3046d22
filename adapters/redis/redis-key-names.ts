/**
 * Where each kind of coordination state lives under the deployment's prefix. The stores and the
 * admission gate name the same counters, so they share these.
 */
export const redisKeyNames = (prefix: string) => ({
  rate: (key: string) => `${prefix}rl:${key}`,
  lease: (key: string) => `${prefix}lease:${key}`,
  allowance: (key: string) => `${prefix}allow:${key}`,
  /** Set once and never expiring: its absence means the server lost its data or is new (redis-epoch.ts). */
  epoch: `${prefix}epoch`,
  /** The server time of the loss that began the current epoch; absent when it began without one. */
  epochLost: `${prefix}epoch:lost`,
  /** The replicas that reported what they hold in an epoch begun after a loss. */
  epochReported: (epoch: string) => `${prefix}epoch:reported:${epoch}`,
  /** Per scope, a hash from replica id to what that replica reported holding after the server lost its data. */
  outstanding: (scope: string) => `${prefix}out:${scope}`,
  /** A rate bucket's mark: re-seeded in this epoch (redis-scripts.ts WINDOW_SEED). */
  seeded: (key: string) => `${prefix}seeded:${key}`,
});

export type RedisKeyNames = ReturnType<typeof redisKeyNames>;

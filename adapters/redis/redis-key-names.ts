/**
 * Where each kind of coordination state lives under the deployment's prefix. The stores and the
 * admission gate name the same counters, so they share these.
 */
export const redisKeyNames = (prefix: string) => ({
  rate: (key: string) => `${prefix}rl:${key}`,
  lease: (key: string) => `${prefix}lease:${key}`,
  allowance: (key: string) => `${prefix}allow:${key}`,
});

export type RedisKeyNames = ReturnType<typeof redisKeyNames>;

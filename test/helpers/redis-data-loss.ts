import { createClient } from 'redis';

/**
 * What a Redis restart without persistence (or a failover to an empty replica) does to one
 * deployment: every key under its prefix is gone. Only that prefix: other tests share the server,
 * so never FLUSHALL. Resolves to the number of keys deleted.
 */
export async function loseRedisData(url: string, prefix: string): Promise<number> {
  const admin = createClient({ url });
  await admin.connect();
  let deleted = 0;
  try {
    for await (const keys of admin.scanIterator({ MATCH: `${prefix}*`, COUNT: 500 })) if (keys.length > 0) deleted += await admin.del(keys);
  } finally {
    await admin.close();
  }
  return deleted;
}

import t, { type Test } from 'tap';
import { randomUUID } from 'node:crypto';
import { createMemoryCoordination } from '../../adapters/memory/memory-coordination.ts';
import { createRedisCoordination } from '../../adapters/redis/redis-coordination.ts';
import { coordinationEpochDatabase } from '../helpers/coordination-epochs.ts';
import type { Coordination } from '../../core/ports/coordination.ts';

const TTL = 60_000;

async function allowanceContract(t: Test, make: () => Promise<Coordination>) {
  const coordination = await make();
  t.teardown(() => coordination.close());
  const store = coordination.allowances;
  const fresh = () => `a-${randomUUID()}`;

  t.test('take on a missing counter asks for seeding and changes nothing', async (t) => {
    const key = fresh();
    const result = await store.take([{ key, amount: 5, shrink: false }], TTL);
    t.same(result, { ok: false, reason: 'missing', keys: [key] });
    t.same(await store.peek([key]), [null]);
  });

  t.test('seed creates once; the first seeder wins', async (t) => {
    const key = fresh();
    await store.seed(key, 100, TTL);
    await store.seed(key, 999, TTL);
    t.same(await store.peek([key]), [100]);
  });

  t.test('a strict take needs the whole amount', async (t) => {
    const key = fresh();
    await store.seed(key, 10, TTL);
    t.same(await store.take([{ key, amount: 7, shrink: false }], TTL), { ok: true, taken: [7] });
    t.same(await store.take([{ key, amount: 4, shrink: false }], TTL), { ok: false, reason: 'insufficient', key, remaining: 3 });
    t.same(await store.peek([key]), [3]);
  });

  t.test('a shrinking take takes what is left and refuses only at zero', async (t) => {
    const key = fresh();
    await store.seed(key, 10, TTL);
    t.same(await store.take([{ key, amount: 25, shrink: true }], TTL), { ok: true, taken: [10] });
    const refused = await store.take([{ key, amount: 1, shrink: true }], TTL);
    t.equal(refused.ok, false);
  });

  t.test('take is all or nothing across counters', async (t) => {
    const plenty = fresh();
    const scarce = fresh();
    await store.seed(plenty, 100, TTL);
    await store.seed(scarce, 2, TTL);
    const result = await store.take(
      [
        { key: plenty, amount: 5, shrink: false },
        { key: scarce, amount: 5, shrink: false },
      ],
      TTL,
    );
    t.match(result, { ok: false, reason: 'insufficient', key: scarce });
    t.same(await store.peek([plenty, scarce]), [100, 2]);
  });

  t.test('give refunds and charges without a floor, and leaves missing counters missing', async (t) => {
    const key = fresh();
    const absent = fresh();
    await store.seed(key, 10, TTL);
    await store.give(
      [
        { key, amount: 5 },
        { key: absent, amount: 5 },
      ],
      TTL,
    );
    t.same(await store.peek([key, absent]), [15, null]);
    await store.give([{ key, amount: -20 }], TTL);
    t.same(await store.peek([key]), [-5]);
  });

  t.test('concurrent takes never overdraw a strict counter', async (t) => {
    const key = fresh();
    await store.seed(key, 50, TTL);
    const results = await Promise.all(Array.from({ length: 200 }, () => store.take([{ key, amount: 1, shrink: false }], TTL)));
    t.equal(results.filter((r) => r.ok).length, 50);
    t.same(await store.peek([key]), [0]);
  });

  t.test('headroom: a counter holding minus the spend admits against the cap its take carries, so a changed cap covers what is already taken', async (t) => {
    const key = fresh();
    await store.seed(key, -30, TTL);
    t.same(await store.take([{ key, amount: 60, shrink: false, headroom: 100 }], TTL), { ok: true, taken: [60] });
    t.same(await store.take([{ key, amount: 20, shrink: false, headroom: 100 }], TTL), { ok: false, reason: 'insufficient', key, remaining: 10 });
    t.same(await store.take([{ key, amount: 20, shrink: false, headroom: 110 }], TTL), { ok: true, taken: [20] }, 'a raised cap leaves exactly the difference');
    t.same(await store.take([{ key, amount: 1, shrink: false, headroom: 50 }], TTL), { ok: false, reason: 'insufficient', key, remaining: -60 }, 'a lowered cap counts everything taken');
    t.same(await store.peek([key]), [-110]);
  });

  t.test('delete removes counters', async (t) => {
    const key = fresh();
    await store.seed(key, 1, TTL);
    await store.delete([key]);
    t.same(await store.peek([key]), [null]);
  });
}

t.test('memory allowances', (t) => allowanceContract(t, async () => createMemoryCoordination()));

const redisUrl = process.env.TEST_REDIS_URL;
t.test('redis allowances', { skip: redisUrl ? false : 'needs TEST_REDIS_URL' }, async (t) => {
  const { epochsFor } = await coordinationEpochDatabase(t);
  const keyPrefix = `svc-test:${randomUUID()}:`;
  return allowanceContract(t, () => createRedisCoordination({ url: redisUrl!, keyPrefix, recoveryWindowMs: 100, epochs: epochsFor(keyPrefix) }));
});

t.test('two redis connections racing takes admit exactly the counter', { skip: redisUrl ? false : 'needs TEST_REDIS_URL' }, async (t) => {
  const { epochsFor } = await coordinationEpochDatabase(t);
  const keyPrefix = `svc-test:${randomUUID()}:`;
  const a = await createRedisCoordination({ url: redisUrl!, keyPrefix, epochs: epochsFor(keyPrefix) });
  const b = await createRedisCoordination({ url: redisUrl!, keyPrefix, epochs: epochsFor(keyPrefix) });
  t.teardown(async () => {
    await a.allowances.delete(['race']);
    await Promise.all([a.close(), b.close()]);
  });
  await a.allowances.seed('race', 30, TTL);
  const results = await Promise.all(Array.from({ length: 100 }, (_, i) => (i % 2 ? a : b).allowances.take([{ key: 'race', amount: 1, shrink: false }], TTL)));
  t.equal(results.filter((r) => r.ok).length, 30);
});

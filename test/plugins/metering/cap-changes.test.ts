import t, { type Test } from 'tap';
import { generateToken, SESSION_PREFIX } from '../../../core/identity/api-tokens.ts';
import { periodStart } from '../../../core/vocabulary/periods.ts';
import { startFakeOpenAIUpstream, type FakeOpenAIUpstream } from '../../fakes/fake-openai-upstream.ts';
import { realServersConfig } from '../../helpers/app.ts';
import { startMeteredGateway, user, waitFor, type ChatResult, type MeteredGateway } from './metered-gateway.ts';

/**
 * Blocking caps hold while calls are in flight, whatever happens to the counters meanwhile: the
 * cap is changed, a counter idles out, or the coordination store loses its data.
 *
 * Every call reserves its worst case: max_tokens 10,000 output tokens at 2 µ$ plus the input
 * bound (a few hundred µ$ at most for this prompt), so ~20,000–20,500 µ$. The fake upstream holds
 * each answer until the test lets it go and then reports 5 input and 10,000 output tokens,
 * 20,005 µ$, so every admitted call really spends about what it reserved.
 */
const CALL = { model: 'solo', messages: user('hold'), max_tokens: 10_000 };
const CALL_COST = 5n + 2n * 10_000n;
/** A cap in micro-USD that fits `calls` reservations and not one more (whatever the input bound, within 1,000 µ$ a call). */
const capFitting = (calls: number) => calls * 20_000 + 10_000;
const usd = (micros: number) => micros / 1e6;

interface Hold {
  upstream: FakeOpenAIUpstream;
  release(): void;
}

async function heldUpstream(t: Test): Promise<Hold> {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const upstream = await startFakeOpenAIUpstream({ defaultReply: { usage: { prompt_tokens: 5, completion_tokens: 10_000 }, holdUntil: held } });
  t.teardown(() => upstream.close());
  return { upstream, release };
}

/** Starts `count` calls and waits until all of them are held at the upstream (admitted and in flight). */
async function inFlight(gateways: MeteredGateway[], key: string, count: number, upstream: FakeOpenAIUpstream): Promise<Array<Promise<ChatResult>>> {
  const before = upstream.requests.length;
  const calls = Array.from({ length: count }, (_, i) => gateways[i % gateways.length]!.chat(key, CALL));
  if (!(await waitFor(() => upstream.requests.length === before + count, 10_000))) throw new Error(`only ${upstream.requests.length - before} of ${count} calls reached the upstream`);
  return calls;
}

async function loggedFor(g: MeteredGateway, keyId: string): Promise<{ calls: number; cost: bigint }> {
  const { rows } = await g.db.query<{ n: bigint; cost: bigint }>(
    'SELECT count(*)::bigint AS n, COALESCE(sum(cost_micros), 0)::bigint AS cost FROM request_logs WHERE key_id = $1 AND status_code = 200',
    [keyId],
  );
  return { calls: Number(rows[0]!.n), cost: BigInt(rows[0]!.cost) };
}

const real = realServersConfig();
/** Storage for one gateway (undefined: the embedded default); a fresh schema and prefix per test on the real servers. */
const backends = [
  { name: 'embedded: PGlite + in-memory coordination', skip: false as const, storage: (_t: Test) => undefined },
  {
    name: 'PostgreSQL + Redis',
    skip: real ? (false as const) : 'needs TEST_PG_URL and TEST_REDIS_URL',
    storage: (t: Test) => {
      const fresh = realServersConfig()!;
      t.teardown(() => fresh.dropSchema());
      return fresh.storage;
    },
  },
];

for (const backend of backends) {
  t.test(backend.name, { skip: backend.skip }, async (t) => {
    t.test('a cap raised while capped calls are in flight admits only what the new cap leaves', async (t) => {
      const hold = await heldUpstream(t);
      const g = await startMeteredGateway(t, { storage: backend.storage(t), upstream: hold.upstream });
      const { id, key } = await g.newKey({ spendCap: { usd: usd(capFitting(10)), period: 'total', mode: 'blocking' } });
      const first = await inFlight([g], key, 10, hold.upstream);
      t.equal((await g.chat(key, CALL)).status, 402, 'the cap is full with ten calls in flight');

      await g.patchKey(id, { spendCap: { usd: usd(capFitting(11)), period: 'total', mode: 'blocking' } });
      let answered = 0;
      const more = Array.from({ length: 11 }, () => g.chat(key, CALL).finally(() => (answered += 1)));
      // Decided: ten answered at once, one held at the upstream with the first ten.
      t.ok(await waitFor(() => answered === 10 && hold.upstream.requests.length === 11, 10_000), 'eleven new calls decided');
      hold.release();
      const statuses = (await Promise.all(more)).map((r) => r.status);
      t.equal(statuses.filter((s) => s === 402).length, 10, 'ten of eleven new calls are refused: the raised cap leaves room for exactly one more');
      await Promise.all(first);
      await g.flush();
      const logged = await loggedFor(g, id);
      t.equal(logged.calls, 11, 'eleven calls were served');
      t.ok(logged.cost <= BigInt(capFitting(11)), `spent ${logged.cost} µ$ of a ${capFitting(11)} µ$ cap (0 over)`);
      t.equal(logged.cost, 11n * CALL_COST);
    });

    t.test('a cap lowered while capped calls are in flight admits nothing more', async (t) => {
      const hold = await heldUpstream(t);
      const g = await startMeteredGateway(t, { storage: backend.storage(t), upstream: hold.upstream });
      const { id, key } = await g.newKey({ spendCap: { usd: usd(capFitting(20)), period: 'total', mode: 'blocking' } });
      const first = await inFlight([g], key, 20, hold.upstream);

      await g.patchKey(id, { spendCap: { usd: usd(capFitting(10)), period: 'total', mode: 'blocking' } });
      const more = await Promise.all(Array.from({ length: 10 }, () => g.chat(key, CALL)));
      t.same(
        more.map((r) => r.status),
        Array(10).fill(402),
        'every new call is refused: the calls in flight already hold more than the lowered cap',
      );
      t.equal(more[0]!.body.error.code, 'budget_exceeded');

      hold.release();
      await Promise.all(first);
      await g.flush();
      t.equal((await loggedFor(g, id)).calls, 20, 'only the calls admitted before the change were served');
    });

    t.test('a money counter that vanishes while capped calls are in flight (idle expiry) is seeded again with their reservations', async (t) => {
      const hold = await heldUpstream(t);
      const g = await startMeteredGateway(t, { storage: backend.storage(t), upstream: hold.upstream });
      const { id, key } = await g.newKey({ spendCap: { usd: usd(capFitting(10)), period: 'total', mode: 'blocking' } });
      const first = await inFlight([g], key, 10, hold.upstream);

      const counter = `cap:key:${id}:total:${periodStart('total', new Date()).getTime()}`;
      t.notSame(await g.coordination.allowances.peek([counter]), [null], 'the cap counter exists while calls run');
      await g.coordination.allowances.delete([counter, `credit:${g.test.organizationId}`]);

      const more = await Promise.all(Array.from({ length: 5 }, () => g.chat(key, CALL)));
      t.same(
        more.map((r) => r.status),
        Array(5).fill(402),
        'the re-seeded counter still holds the ten reservations',
      );

      hold.release();
      await Promise.all(first);
      await g.flush();
      const logged = await loggedFor(g, id);
      t.equal(logged.calls, 10);
      t.ok(logged.cost <= BigInt(capFitting(10)), `spent ${logged.cost} µ$ of a ${capFitting(10)} µ$ cap`);
    });
  });
}

t.test(
  'Redis losing its data while capped calls are in flight on two replicas admits nothing past the cap',
  { skip: real ? false : 'needs TEST_PG_URL and TEST_REDIS_URL (two replicas share the real servers)' },
  async (t) => {
    if (!real) return;
    t.teardown(() => real.dropSchema());
    const hold = await heldUpstream(t);
    const ownerToken = generateToken(SESSION_PREFIX);
    const a = await startMeteredGateway(t, { storage: real.storage, ownerToken, upstream: hold.upstream });
    const b = await startMeteredGateway(t, { storage: real.storage, ownerToken, upstream: hold.upstream });
    const { id, key } = await a.newKey({ spendCap: { usd: usd(capFitting(10)), period: 'total', mode: 'blocking' } });
    const first = await inFlight([a, b], key, 10, hold.upstream);

    // What a restart without persistence (or a failover to an empty replica) leaves: nothing under the prefix.
    const { createClient } = await import('redis');
    const admin = createClient({ url: process.env.TEST_REDIS_URL });
    await admin.connect();
    let deleted = 0;
    for await (const keys of admin.scanIterator({ MATCH: `${real.prefix}*`, COUNT: 500 })) {
      if (keys.length > 0) deleted += await admin.del(keys);
    }
    await admin.quit();
    t.ok(deleted > 0, `the replicas' coordination state is gone (${deleted} keys)`);

    const more = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? a : b).chat(key, CALL)));
    t.same(
      more.map((r) => r.status),
      Array(10).fill(402),
      'every new call on either replica is refused: the reservations in flight were reported back',
    );

    hold.release();
    await Promise.all(first);
    await a.flush();
    await b.flush();
    const logged = await loggedFor(a, id);
    t.equal(logged.calls, 10, 'only the ten calls admitted before the loss were served');
    t.ok(logged.cost <= BigInt(capFitting(10)), `spent ${logged.cost} µ$ of a ${capFitting(10)} µ$ cap (0 over)`);
  },
);

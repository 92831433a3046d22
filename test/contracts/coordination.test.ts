/**
 * Contract for core/ports/coordination.ts. The same subtests run against the memory adapter
 * (always, on a fake clock) and the Redis adapter (when TEST_REDIS_URL is set, on real time with
 * short periods and a random key prefix that teardown deletes).
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { createClient } from 'redis';
import type { Coordination, GateRequest, RateEntry } from '../../core/ports/coordination.ts';
import { createMemoryCoordination } from '../../adapters/memory/memory-coordination.ts';
import type { RedisAdmissionGate } from '../../adapters/redis/redis-admission-gate.ts';
import { createRedisCoordination } from '../../adapters/redis/redis-coordination.ts';
import { coordinationEpochDatabase } from '../helpers/coordination-epochs.ts';
import { eventually, waitFor } from '../helpers/eventually.ts';
import { loseRedisData } from '../helpers/redis-data-loss.ts';

/** The type of a subtest's `t` (the last overload of t.test takes just the callback). */
type Test = Parameters<Parameters<typeof t.test>[0]>[0];

interface Harness {
  coordination: Coordination;
  /** Lets time pass: moves the fake clock, or sleeps on real time. */
  advance(ms: number): Promise<void>;
  /**
   * How far a duration read back later may have shrunk because real time passed between calls
   * (0 on the fake clock, where every expected value is exact).
   */
  slack: number;
  /** A second instance sharing the same state through another connection (Redis only). */
  another?: () => Promise<Coordination>;
}

let unique = 0;
function key(name: string): string {
  unique += 1;
  return `${name}:${unique}`;
}

/** actual is expected, or at most `slack` below it (time only ever runs forward). */
function near(t: Test, actual: number | undefined, expected: number, slack: number, what: string): void {
  t.ok(actual !== undefined && actual <= expected && actual >= expected - slack, `${what}: ${actual} should be ${slack === 0 ? '' : `within ${slack} below `}${expected}`);
}

function contract(t: Test, h: Harness): void {
  const { coordination: c } = h;
  const rate = (k: string, limit: number, periodMs: number, cost: number): RateEntry => ({ key: k, limit, periodMs, cost });

  // Rate limiter

  t.test('a fresh bucket admits exactly limit units, then refuses with a positive retryAfterMs', async (t) => {
    const k = key('fresh');
    for (let i = 1; i <= 5; i++) {
      const r = await c.rateLimiter.consume([rate(k, 5, 60_000, 1)]);
      t.equal(r.allowed, true, `unit ${i} admitted`);
      t.equal(r.decisions[0]?.remaining, 5 - i);
      t.equal(r.decisions[0]?.retryAfterMs, 0);
    }
    const refused = await c.rateLimiter.consume([rate(k, 5, 60_000, 1)]);
    t.equal(refused.allowed, false);
    t.equal(refused.decisions[0]?.remaining, 0);
    t.ok((refused.decisions[0]?.retryAfterMs ?? 0) > 0, 'retryAfterMs is positive');
    // One unit drips back every T = 12 s.
    near(t, refused.decisions[0]?.retryAfterMs, 12_000, h.slack, 'retryAfterMs');
  });

  t.test('consume is all-or-nothing: a full second entry leaves the first unchanged', async (t) => {
    const wide = key('wide');
    const narrow = key('narrow');
    t.equal((await c.rateLimiter.consume([rate(narrow, 1, 60_000, 1)])).allowed, true);
    const r = await c.rateLimiter.consume([rate(wide, 10, 60_000, 3), rate(narrow, 1, 60_000, 1)]);
    t.equal(r.allowed, false);
    t.equal(r.decisions[0]?.retryAfterMs, 0, 'the entry that fits has nothing to wait for');
    t.equal(r.decisions[0]?.remaining, 10, 'the entry that fits reports its untouched bucket');
    t.ok((r.decisions[1]?.retryAfterMs ?? 0) > 0, 'the full entry says how long to wait');
    const [peeked] = await c.rateLimiter.peek([{ key: wide, limit: 10, periodMs: 60_000 }]);
    t.equal(peeked?.remaining, 10, 'nothing was taken from the first bucket');
    t.equal(peeked?.resetMs, 0);
  });

  t.test('units refill over time', async (t) => {
    const k = key('refill');
    // T = 1 s; 1.1 s later exactly one unit is back. On Redis the clock is real time: the margins (0.9 s
    // either side) hold on a loaded machine, where two calls in a row may be 100 ms apart.
    t.equal((await c.rateLimiter.consume([rate(k, 2, 2_000, 2)])).allowed, true);
    t.equal((await c.rateLimiter.consume([rate(k, 2, 2_000, 1)])).allowed, false);
    await h.advance(1_100);
    t.equal((await c.rateLimiter.consume([rate(k, 2, 2_000, 1)])).allowed, true, 'one unit came back');
    t.equal((await c.rateLimiter.consume([rate(k, 2, 2_000, 1)])).allowed, false, 'but only one');
    await h.advance(2_500);
    const [peeked] = await c.rateLimiter.peek([{ key: k, limit: 2, periodMs: 2_000 }]);
    t.equal(peeked?.remaining, 2, 'full again after a whole period');
    t.equal(peeked?.resetMs, 0);
  });

  t.test('remaining and resetMs describe the bucket after the call', async (t) => {
    const k = key('values');
    // limit 10 per minute: T = 6 s.
    const r = await c.rateLimiter.consume([rate(k, 10, 60_000, 3)]);
    t.same(r.decisions[0], { key: k, limit: 10, remaining: 7, resetMs: 18_000, retryAfterMs: 0 });
    const [peeked] = await c.rateLimiter.peek([{ key: k, limit: 10, periodMs: 60_000 }]);
    t.equal(peeked?.remaining, 7);
    near(t, peeked?.resetMs, 18_000, h.slack, 'resetMs');
    t.equal(peeked?.retryAfterMs, 0, 'a unit fits right now');
    const [untouched] = await c.rateLimiter.peek([{ key: key('untouched'), limit: 10, periodMs: 60_000 }]);
    t.equal(untouched?.remaining, 10);
    t.equal(untouched?.resetMs, 0);
  });

  t.test('adjust gives units back and takes more', async (t) => {
    const k = key('adjust');
    const peek = async () => (await c.rateLimiter.peek([{ key: k, limit: 10, periodMs: 60_000 }]))[0];
    await c.rateLimiter.consume([rate(k, 10, 60_000, 5)]);
    await c.rateLimiter.adjust([rate(k, 10, 60_000, -3)]);
    t.equal((await peek())?.remaining, 8, 'a refund returns units');
    await c.rateLimiter.adjust([rate(k, 10, 60_000, -100)]);
    const full = await peek();
    t.equal(full?.remaining, 10, 'a refund stops at a full bucket');
    t.equal(full?.resetMs, 0, 'it banks no extra burst');
    await c.rateLimiter.adjust([rate(k, 10, 60_000, 12)]);
    const indebted = await peek();
    t.equal(indebted?.remaining, 0, 'a charge may go into debt');
    near(t, indebted?.resetMs, 72_000, h.slack, 'resetMs includes the debt');
    const r = await c.rateLimiter.consume([rate(k, 10, 60_000, 1)]);
    t.equal(r.allowed, false);
    // 13 units owed against a 10-unit burst: 3 units of 6 s.
    near(t, r.decisions[0]?.retryAfterMs, 18_000, h.slack, 'retryAfterMs waits out the debt');
  });

  t.test('a cost above the limit is always refused', async (t) => {
    const k = key('oversize');
    const fresh = await c.rateLimiter.consume([rate(k, 3, 60_000, 4)]);
    t.equal(fresh.allowed, false, 'even from a full bucket');
    t.equal(fresh.decisions[0]?.retryAfterMs, 0, 'retryAfterMs is the time to a full bucket: none');
    t.equal((await c.rateLimiter.peek([{ key: k, limit: 3, periodMs: 60_000 }]))[0]?.remaining, 3, 'nothing taken');
    await c.rateLimiter.consume([rate(k, 3, 60_000, 1)]);
    const later = await c.rateLimiter.consume([rate(k, 3, 60_000, 4)]);
    t.equal(later.allowed, false);
    near(t, later.decisions[0]?.retryAfterMs, 20_000, h.slack, 'retryAfterMs is the time to a full bucket');
  });

  t.test('a limit of zero refuses every call', async (t) => {
    const r = await c.rateLimiter.consume([rate(key('zero'), 0, 60_000, 1)]);
    t.equal(r.allowed, false);
    t.equal(r.decisions[0]?.remaining, 0);
  });

  // Leases

  t.test('leases: the limit caps simultaneous holders', async (t) => {
    const k = key('lease-cap');
    t.same(await c.leases.acquire([{ key: k, limit: 2 }], 'a', 60_000), { acquired: true });
    t.same(await c.leases.acquire([{ key: k, limit: 2 }], 'b', 60_000), { acquired: true });
    t.same(await c.leases.acquire([{ key: k, limit: 2 }], 'c', 60_000), { acquired: false, fullKey: k });
    t.equal(await c.leases.active(k), 2);
  });

  t.test('leases: acquire is all-or-nothing across keys', async (t) => {
    const roomy = key('lease-roomy');
    const tight = key('lease-tight');
    await c.leases.acquire([{ key: tight, limit: 1 }], 'x', 60_000);
    const r = await c.leases.acquire(
      [
        { key: roomy, limit: 5 },
        { key: tight, limit: 1 },
      ],
      'y',
      60_000,
    );
    t.same(r, { acquired: false, fullKey: tight });
    t.equal(await c.leases.active(roomy), 0, 'the first key was not taken');
  });

  t.test('leases: release frees a slot', async (t) => {
    const k = key('lease-release');
    await c.leases.acquire([{ key: k, limit: 1 }], 'a', 60_000);
    t.equal((await c.leases.acquire([{ key: k, limit: 1 }], 'b', 60_000)).acquired, false);
    await c.leases.release([k], 'a');
    t.equal(await c.leases.active(k), 0);
    t.equal((await c.leases.acquire([{ key: k, limit: 1 }], 'b', 60_000)).acquired, true);
  });

  t.test('leases: an expired lease frees its slot', async (t) => {
    const k = key('lease-expiry');
    await c.leases.acquire([{ key: k, limit: 1 }], 'a', 100);
    t.equal(await c.leases.active(k), 1);
    await h.advance(150);
    t.equal(await c.leases.active(k), 0);
    t.equal((await c.leases.acquire([{ key: k, limit: 1 }], 'b', 60_000)).acquired, true);
  });

  t.test('leases: an expired lease makes room for the next acquire with nothing read in between', async (t) => {
    const k = key('lease-expiry-acquire');
    await c.leases.acquire([{ key: k, limit: 2 }], 'a', 100);
    await c.leases.acquire([{ key: k, limit: 2 }], 'b', 60_000);
    await h.advance(150);
    t.equal((await c.leases.acquire([{ key: k, limit: 2 }], 'c', 60_000)).acquired, true);
    t.equal(await c.leases.active(k), 2);
  });

  t.test('leases: an expired id acquired again counts as new, so a full key refuses it', async (t) => {
    const k = key('lease-expired-own');
    await c.leases.acquire([{ key: k, limit: 1 }], 'a', 100);
    await h.advance(150);
    await c.leases.acquire([{ key: k, limit: 1 }], 'b', 60_000);
    t.same(await c.leases.acquire([{ key: k, limit: 1 }], 'a', 60_000), { acquired: false, fullKey: k });
    t.equal(await c.leases.active(k), 1);
  });

  t.test('leases: renew extends a live lease and fails once it has expired', async (t) => {
    const k = key('lease-renew');
    // Margins of 300 ms: on Redis the time passes for real, and a loaded machine may take 100 ms a call.
    await c.leases.acquire([{ key: k, limit: 1 }], 'a', 600);
    await h.advance(300);
    t.equal(await c.leases.renew([k], 'a', 600), true);
    await h.advance(400);
    t.equal(await c.leases.active(k), 1, 'alive past its first expiry');
    await h.advance(800);
    t.equal(await c.leases.renew([k], 'a', 600), false);
    t.equal(await c.leases.active(k), 0, 'a failed renew does not resurrect it');
  });

  t.test('leases: re-acquiring the same id counts once', async (t) => {
    const k = key('lease-same');
    t.equal((await c.leases.acquire([{ key: k, limit: 2 }], 'a', 60_000)).acquired, true);
    t.equal((await c.leases.acquire([{ key: k, limit: 2 }], 'a', 60_000)).acquired, true);
    t.equal(await c.leases.active(k), 1);
    t.equal((await c.leases.acquire([{ key: k, limit: 2 }], 'b', 60_000)).acquired, true);
    t.equal((await c.leases.acquire([{ key: k, limit: 2 }], 'a', 60_000)).acquired, true, 'a holder refreshes even when full');
    t.equal((await c.leases.acquire([{ key: k, limit: 2 }], 'c', 60_000)).acquired, false);
  });

  t.test('leases: a limit of zero or less is refused', async (t) => {
    const k = key('lease-zero');
    t.same(await c.leases.acquire([{ key: k, limit: 0 }], 'a', 60_000), { acquired: false, fullKey: k });
    t.equal(await c.leases.active(k), 0);
  });

  // Admission gate

  const TTL = 60_000;
  const gateRequest = (parts: Partial<GateRequest>): GateRequest => ({
    requests: [],
    leases: [],
    leaseId: 'call-1',
    leaseTtlMs: TTL,
    tokens: [],
    takes: [],
    counterTtlMs: TTL,
    ...parts,
  });

  t.test('gate: admits by taking from every kind at once', async (t) => {
    const [rpm, tpm, conc, credit] = [key('g-rpm'), key('g-tpm'), key('g-conc'), key('g-credit')];
    await c.allowances.seed(credit, 1_000, TTL);
    const result = await c.gate.admit(
      gateRequest({ requests: [rate(rpm, 10, 60_000, 1)], tokens: [rate(tpm, 1_000, 60_000, 300)], leases: [{ key: conc, limit: 2 }], takes: [{ key: credit, amount: 400, shrink: true }] }),
    );
    t.match(result, { ok: true, taken: [400] });
    t.same(result.requests, [{ key: rpm, limit: 10, remaining: 9, resetMs: 6_000, retryAfterMs: 0 }]);
    t.same(result.tokens, [{ key: tpm, limit: 1_000, remaining: 700, resetMs: 18_000, retryAfterMs: 0 }]);
    t.equal(await c.leases.active(conc), 1);
    t.same(await c.allowances.peek([credit]), [600]);
  });

  t.test('gate: a refusal by any check takes nothing from the others', async (t) => {
    const [rpm, tpm, conc, credit, full] = [key('g-rpm'), key('g-tpm'), key('g-conc'), key('g-credit'), key('g-full')];
    await c.allowances.seed(credit, 1_000, TTL);
    await c.leases.acquire([{ key: full, limit: 1 }], 'holder', TTL);
    const result = await c.gate.admit(
      gateRequest({
        requests: [rate(rpm, 10, 60_000, 1)],
        tokens: [rate(tpm, 1_000, 60_000, 300)],
        leases: [
          { key: conc, limit: 5 },
          { key: full, limit: 1 },
        ],
        takes: [{ key: credit, amount: 400, shrink: true }],
      }),
    );
    t.match(result, { ok: false, refused: 'concurrency', fullKey: full });
    t.equal(result.requests[0]?.remaining, 10, 'the request bucket reports itself untouched');
    t.equal(result.tokens[0]?.remaining, 1_000);
    t.equal((await c.rateLimiter.peek([{ key: rpm, limit: 10, periodMs: 60_000 }]))[0]?.remaining, 10, 'no request was counted');
    t.equal((await c.rateLimiter.peek([{ key: tpm, limit: 1_000, periodMs: 60_000 }]))[0]?.remaining, 1_000, 'no tokens were reserved');
    t.equal(await c.leases.active(conc), 0, 'no lease was granted');
    t.same(await c.allowances.peek([credit]), [1_000], 'no money was reserved');
  });

  t.test('gate: refusals come in the order requests, concurrency, tokens, money', async (t) => {
    const [rpm, tpm, conc, credit] = [key('g-rpm'), key('g-tpm'), key('g-conc'), key('g-credit')];
    await c.allowances.seed(credit, 0, TTL);
    await c.leases.acquire([{ key: conc, limit: 1 }], 'holder', TTL);
    await c.rateLimiter.consume([rate(rpm, 1, 60_000, 1)]);
    const all = { leases: [{ key: conc, limit: 1 }], tokens: [rate(tpm, 100, 60_000, 500)], takes: [{ key: credit, amount: 10, shrink: true }] };
    const first = await c.gate.admit(gateRequest({ ...all, requests: [rate(rpm, 1, 60_000, 1)] }));
    t.match(first, { ok: false, refused: 'requests' });
    t.ok((first.requests[0]?.retryAfterMs ?? 0) > 0, 'the full request bucket says how long to wait');
    t.match(await c.gate.admit(gateRequest({ ...all, requests: [] })), { ok: false, refused: 'concurrency', fullKey: conc });
    t.match(await c.gate.admit(gateRequest({ ...all, leases: [] })), { ok: false, refused: 'tokens' });
    t.match(await c.gate.admit(gateRequest({ takes: all.takes })), { ok: false, refused: 'money', allowance: { reason: 'insufficient', key: credit, remaining: 0 } });
  });

  t.test('gate: a missing counter asks for seeding and nothing is taken', async (t) => {
    const [rpm, credit, cap] = [key('g-rpm'), key('g-credit'), key('g-cap')];
    await c.allowances.seed(credit, 50, TTL);
    const result = await c.gate.admit(
      gateRequest({
        requests: [rate(rpm, 5, 60_000, 1)],
        takes: [
          { key: credit, amount: 10, shrink: true },
          { key: cap, amount: 10, shrink: false },
        ],
      }),
    );
    t.match(result, { ok: false, refused: 'money', allowance: { reason: 'missing', keys: [cap] } });
    t.equal((await c.rateLimiter.peek([{ key: rpm, limit: 5, periodMs: 60_000 }]))[0]?.remaining, 5);
    t.same(await c.allowances.peek([credit, cap]), [50, null]);
  });

  t.test('gate: a blocking cap refuses a call it cannot cover whole; the balance shrinks to what is left', async (t) => {
    const [credit, cap] = [key('g-credit'), key('g-cap')];
    await c.allowances.seed(credit, 30, TTL);
    await c.allowances.seed(cap, 100, TTL);
    t.match(
      await c.gate.admit(
        gateRequest({
          takes: [
            { key: credit, amount: 40, shrink: true },
            { key: cap, amount: 40, shrink: false },
          ],
        }),
      ),
      { ok: true, taken: [30, 40] },
    );
    t.match(await c.gate.admit(gateRequest({ leaseId: 'call-2', takes: [{ key: credit, amount: 40, shrink: true }] })), {
      ok: false,
      refused: 'money',
      allowance: { reason: 'insufficient', key: credit },
    });
    t.same(await c.allowances.peek([credit, cap]), [0, 60]);
  });

  t.test('gate: settle releases the lease, gives back the unused reservation and corrects the token estimate', async (t) => {
    const [tpm, conc, credit] = [key('g-tpm'), key('g-conc'), key('g-credit')];
    await c.allowances.seed(credit, 1_000, TTL);
    // A token comes back every 3.6 s: real time passing on Redis cannot refill one before the peek.
    const tokens = [rate(tpm, 1_000, 3_600_000, 600)];
    const admitted = await c.gate.admit(gateRequest({ tokens, leases: [{ key: conc, limit: 1 }], takes: [{ key: credit, amount: 500, shrink: true }] }));
    t.match(admitted, { ok: true, taken: [500] });
    await c.gate.settle({ leaseKeys: [conc], leaseId: 'call-1', gives: [{ key: credit, amount: 500 - 120 }], counterTtlMs: TTL, tokens: [rate(tpm, 1_000, 3_600_000, 150 - 600)] });
    t.equal(await c.leases.active(conc), 0);
    t.same(await c.allowances.peek([credit]), [880], 'the real cost stays spent');
    t.equal((await c.rateLimiter.peek([{ key: tpm, limit: 1_000, periodMs: 3_600_000 }]))[0]?.remaining, 850, 'the real token count stays counted');
  });

  t.test('gate: a call that cost more than reserved takes the rest at settlement', async (t) => {
    const credit = key('g-credit');
    await c.allowances.seed(credit, 100, TTL);
    await c.gate.admit(gateRequest({ takes: [{ key: credit, amount: 10, shrink: true }] }));
    await c.gate.settle({ leaseKeys: [], leaseId: 'call-1', gives: [{ key: credit, amount: 10 - 25 }], counterTtlMs: TTL, tokens: [] });
    t.same(await c.allowances.peek([credit]), [75]);
  });

  // Cache

  t.test('cache: set then get; a missing key is null', async (t) => {
    const k = key('kv');
    t.equal(await c.cache.get(k), null);
    await c.cache.set(k, 'hello', 60_000);
    t.equal(await c.cache.get(k), 'hello');
  });

  t.test('cache: a value expires after its ttl', async (t) => {
    const k = key('kv-ttl');
    await c.cache.set(k, 'soon gone', 100);
    await h.advance(150);
    t.equal(await c.cache.get(k), null);
  });

  t.test('cache: delete removes a value', async (t) => {
    const k = key('kv-delete');
    await c.cache.set(k, 'x', 60_000);
    await c.cache.delete(k);
    t.equal(await c.cache.get(k), null);
  });

  t.test('cache: increment starts at zero and keeps the expiry of its first call', async (t) => {
    const k = key('kv-incr');
    t.equal(await c.cache.increment(k, 2, 100), 2);
    t.equal(await c.cache.increment(k, 3, 60_000), 5);
    t.equal(await c.cache.get(k), '5');
    await h.advance(150);
    t.equal(await c.cache.get(k), null, 'the first ttl still applied');
    t.equal(await c.cache.increment(k, 1, 60_000), 1, 'and a new count starts afterwards');
  });

  // Pub/sub

  t.test('pubsub: a subscriber receives published messages', async (t) => {
    const channel = key('ch');
    const got: string[] = [];
    const unsubscribe = await c.pubsub.subscribe(channel, (m) => got.push(m));
    t.teardown(unsubscribe);
    await c.pubsub.publish(channel, 'one');
    await c.pubsub.publish(channel, 'two');
    await eventually(() => got.length === 2, 'two messages');
    t.same(got, ['one', 'two']);
  });

  t.test('pubsub: every handler on a channel receives each message', async (t) => {
    const channel = key('ch-many');
    const first: string[] = [];
    const second: string[] = [];
    const offs = [await c.pubsub.subscribe(channel, (m) => first.push(m)), await c.pubsub.subscribe(channel, (m) => second.push(m))];
    t.teardown(() => Promise.all(offs.map((off) => off())));
    await c.pubsub.publish(channel, 'hi');
    await eventually(() => first.length === 1 && second.length === 1, 'both handlers');
    t.same([first, second], [['hi'], ['hi']]);
  });

  t.test('pubsub: unsubscribe removes only that handler', async (t) => {
    const channel = key('ch-unsub');
    const first: string[] = [];
    const second: string[] = [];
    const offFirst = await c.pubsub.subscribe(channel, (m) => first.push(m));
    const offSecond = await c.pubsub.subscribe(channel, (m) => second.push(m));
    t.teardown(offSecond);
    await offFirst();
    await offFirst();
    await c.pubsub.publish(channel, 'after');
    // Both handlers share one ordered stream, so once the second has it the first would have too.
    await eventually(() => second.length === 1, 'the remaining handler');
    t.same(first, []);
    t.same(second, ['after']);
  });

  t.test('pubsub: channels are separate', async (t) => {
    const here = key('ch-here');
    const there = key('ch-there');
    const got: string[] = [];
    const offs = [await c.pubsub.subscribe(here, (m) => got.push(`here:${m}`)), await c.pubsub.subscribe(there, (m) => got.push(`there:${m}`))];
    t.teardown(() => Promise.all(offs.map((off) => off())));
    await c.pubsub.publish(there, 'x');
    await eventually(() => got.length === 1, 'one message');
    t.same(got, ['there:x']);
  });

  // Shared state across instances

  const another = h.another;
  if (!another) return;

  t.test('concurrency: two instances racing 200 consumes against limit 50 admit exactly 50', async (t) => {
    const other = await another();
    t.teardown(() => other.close());
    const k = key('race-rate');
    // An hour-long period: nothing refills while the race runs.
    const calls = Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? c : other).rateLimiter.consume([rate(k, 50, 3_600_000, 1)]));
    const results = await Promise.all(calls);
    t.equal(results.filter((r) => r.allowed).length, 50);
  });

  t.test('concurrency: two instances racing gate admissions never exceed a lease limit or a counter', async (t) => {
    const other = await another();
    t.teardown(() => other.close());
    const [conc, cap] = [key('race-gate-conc'), key('race-gate-cap')];
    await c.allowances.seed(cap, 70, 60_000);
    // 60 calls: the lease limit admits 8 at once, the counter covers 7 calls of 10.
    const calls = Array.from({ length: 60 }, (_, i) =>
      (i % 2 === 0 ? c : other).gate.admit({
        requests: [],
        tokens: [],
        leases: [{ key: conc, limit: 8 }],
        leaseId: `call-${i}`,
        leaseTtlMs: 60_000,
        takes: [{ key: cap, amount: 10, shrink: false }],
        counterTtlMs: 60_000,
      }),
    );
    const results = await Promise.all(calls);
    t.equal(results.filter((r) => r.ok).length, 7);
    t.equal(await other.leases.active(conc), 7);
    t.same(await other.allowances.peek([cap]), [0]);
  });

  t.test('concurrency: two instances racing lease acquires against limit 5 grant exactly 5', async (t) => {
    const other = await another();
    t.teardown(() => other.close());
    const k = key('race-lease');
    const calls = Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? c : other).leases.acquire([{ key: k, limit: 5 }], `lease-${i}`, 60_000));
    const results = await Promise.all(calls);
    t.equal(results.filter((r) => r.acquired).length, 5);
    t.equal(await other.leases.active(k), 5, 'both instances see the same holders');
  });
}

t.test('memory', async (t) => {
  let now = 1_000_000;
  const coordination = createMemoryCoordination({ now: () => now });
  t.teardown(() => coordination.close());
  t.equal(coordination.kind, 'memory');
  contract(t, {
    coordination,
    slack: 0,
    async advance(ms) {
      now += ms;
    },
  });
});

const redisUrl = process.env.TEST_REDIS_URL;
const RECOVERY_WINDOW_MS = 300;
t.test('redis', { skip: redisUrl ? false : 'TEST_REDIS_URL is not set' }, async (t) => {
  if (!redisUrl) return;
  const { epochsFor } = await coordinationEpochDatabase(t);
  const keyPrefix = `svc-test:${randomUUID()}:`;
  const open: Coordination[] = [];
  const replicaOf = async (prefix: string, windowMs = RECOVERY_WINDOW_MS, epochs = epochsFor(prefix)): Promise<Coordination> => {
    const instance = await createRedisCoordination({ url: redisUrl, keyPrefix: prefix, recoveryWindowMs: windowMs, epochs });
    open.push(instance);
    return instance;
  };
  const create = () => replicaOf(keyPrefix);
  const loseData = (prefix: string) => loseRedisData(redisUrl, prefix);
  const coordination = await create();
  const prefixes = [keyPrefix];
  t.teardown(async () => {
    await Promise.all(open.map((instance) => instance.close()));
    for (const prefix of prefixes) await loseData(prefix);
  });
  t.equal(coordination.kind, 'redis');

  t.test('keys carry the prefix and expire on their own', async (t) => {
    const admin = createClient({ url: redisUrl });
    await admin.connect();
    t.teardown(() => admin.close());
    const k = key('ttl-check');
    await coordination.rateLimiter.consume([{ key: k, limit: 10, periodMs: 60_000, cost: 1 }]);
    await coordination.leases.acquire([{ key: k, limit: 1 }], 'a', 60_000);
    await coordination.cache.increment(k, 1, 60_000);
    for (const full of [`${keyPrefix}rl:${k}`, `${keyPrefix}lease:${k}`, `${keyPrefix}kv:${k}`]) {
      const ttl = await admin.pTTL(full);
      t.ok(ttl > 0 && ttl <= 61_000, `${full} expires (pttl ${ttl})`);
    }
  });

  contract(t, {
    coordination,
    // Real time passes between calls (a loaded CI machine can take a second): values read back
    // may be this much lower than exact.
    slack: 1_000,
    // Redis keeps time on its server's clock (TIME in the scripts, key expiry), which every
    // replica shares and no test can move: here time has to pass for real.
    advance: (ms) => sleep(ms),
    another: create,
  });

  const TTL = 60_000;
  const gateRequest = (parts: Partial<GateRequest>): GateRequest => ({ requests: [], leases: [], leaseId: 'a-1', leaseTtlMs: TTL, tokens: [], takes: [], counterTtlMs: TTL, ...parts });
  /** A deployment of its own (this test wipes its prefix, as a restart without persistence would). */
  const deployment = () => {
    const prefix = `svc-test:${randomUUID()}:`;
    prefixes.push(prefix);
    return prefix;
  };

  t.test('gate: replicas starting together on a new store admit at once, without recovering, even when it is flushed between them', async (t) => {
    const prefix = deployment();
    // The recovery window is long: a replica that took the new store for a lost one would wait it out.
    const [a, b] = await Promise.all([replicaOf(prefix, 30_000), replicaOf(prefix, 30_000)]);
    const rpm = (leaseId: string) => gateRequest({ leaseId, requests: [{ key: 'rpm:fresh', limit: 100, periodMs: TTL, cost: 1 }] });
    const first = await a.gate.admit(rpm('a-1'));
    t.equal(first.ok, true);
    const recorded = await epochsFor(prefix).read();
    t.match(recorded, { established: true, afterLoss: false }, 'the database recorded the epoch, begun without a loss');
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? a : b).gate.admit(rpm(`burst-${i}`))));
    t.equal(results.filter((r) => r.ok).length, 40, 'every call of the burst was admitted');
    for (const [name, replica] of [
      ['a', a],
      ['b', b],
    ] as const) {
      t.same(replica.gate.recovery.counts(), { recoveries: 0, admissionsHeld: 0 }, `replica ${name} never recovered and held no admission back`);
    }
  });

  t.test("gate: two replicas racing to establish a new store's epoch agree on one, even when the store is flushed after the first wrote it", async (t) => {
    const prefix = deployment();
    const epochs = epochsFor(prefix);
    // Replica a has recorded and written its epoch but not yet marked it established when the store is flushed.
    await epochs.begin('epoch-of-a');
    const admin = createClient({ url: redisUrl });
    await admin.connect();
    t.teardown(() => admin.close());
    await admin.set(`${prefix}epoch`, 'epoch-of-a');
    await loseData(prefix);
    const b = await replicaOf(prefix, 30_000);
    t.equal((await b.gate.admit(gateRequest({ leaseId: 'b-1' }))).ok, true, 'b admits at once');
    t.equal(await admin.get(`${prefix}epoch`), 'epoch-of-a', 'b wrote the recorded epoch again instead of beginning a lost one');
    t.match(await epochs.read(), { epoch: 'epoch-of-a', established: true, afterLoss: false });
    t.same(b.gate.recovery.counts(), { recoveries: 0, admissionsHeld: 0 });
  });

  t.test('gate: after Redis loses its data, admissions wait until every live replica reported, leases come back, and a seed can read what the others hold', async (t) => {
    const prefix = deployment();
    // A long window (a replica looks for a loss every quarter of it): admissions resume once both replicas reported.
    const [a, b] = [await replicaOf(prefix, 8_000), await replicaOf(prefix, 8_000)];
    const credit = key('lost-credit');
    const take = { takes: [{ key: credit, amount: 10, shrink: true }] };
    t.match(await a.gate.admit(gateRequest(take)), { ok: false, allowance: { reason: 'missing' } }, 'a fresh store: the counter is seeded first');
    await a.allowances.seed(credit, 1_000, TTL);
    const lease = { leases: [{ key: 'conc:lost', limit: 1 }] };
    t.match(await b.gate.admit(gateRequest({ ...take, ...lease, leaseId: 'b-1' })), { ok: true });
    let aHolds = new Map([['account:acme', { micros: 700, requests: 3, tokens: 90 }]]);
    a.gate.recovery.setHoldingsSource(() => ({ outstanding: aHolds, leases: [], leaseTtlMs: TTL }));
    b.gate.recovery.setHoldingsSource(() => ({
      outstanding: new Map([['account:acme', { micros: 50, requests: 1, tokens: 10 }]]),
      leases: [{ keys: ['conc:lost'], leaseId: 'b-1' }],
      leaseTtlMs: TTL,
    }));
    await Promise.all([a, b].map((replica) => (replica.gate as RedisAdmissionGate).watched()));
    t.same(await b.gate.recovery.othersOutstanding('account:acme'), { micros: 0, requests: 0, tokens: 0 }, 'nobody reports while the store keeps its data');

    await loseData(prefix);

    t.match(await b.gate.admit(gateRequest({ ...take, leaseId: 'b-2' })), { ok: false, allowance: { reason: 'missing', keys: [credit] } }, 'the lost counter must be seeded again');
    t.same(b.gate.recovery.counts(), { recoveries: 1, admissionsHeld: 1 }, 'b noticed the loss and held its admission until a had reported');
    t.same(await b.gate.recovery.othersOutstanding('account:acme'), { micros: 700, requests: 3, tokens: 90 }, 'replica a reported what it holds without admitting anything itself');
    t.same(await a.gate.recovery.othersOutstanding('account:acme'), { micros: 50, requests: 1, tokens: 10 }, 'each replica reads the others, never its own report');
    t.equal(await a.leases.active('conc:lost'), 1, 'the lease of the call in flight on b is back');
    t.match(await a.gate.admit(gateRequest({ ...lease, leaseId: 'a-2' })), { ok: false, refused: 'concurrency' }, 'so the concurrency limit still counts it');
    t.match(await epochsFor(prefix).read(), { established: true, afterLoss: true }, 'the database recorded a new epoch begun after a loss');

    aHolds = new Map();
    t.ok(await waitFor(async () => (await b.gate.recovery.othersOutstanding('account:acme')).micros === 0), 'a report is withdrawn once the replica holds nothing');
  });

  t.test('gate: a replica whose first heartbeat found the database unmigrated registers before it admits, so a loss waits for its report', async (t) => {
    // As an app starts: coordination opens and its watch ticks before migrations make the replica registry.
    const database = await coordinationEpochDatabase(t, { migrated: false });
    const prefix = deployment();
    const epochs = database.epochsFor(prefix);
    // Heartbeats are due every 8 s (the window): none falls due again during this test on its own.
    const [a, b] = [await replicaOf(prefix, 8_000, epochs), await replicaOf(prefix, 8_000, epochs)];
    await Promise.all([a, b].map((replica) => (replica.gate as RedisAdmissionGate).watched()));
    await database.migrate();
    const lease = { leases: [{ key: 'conc:early', limit: 1 }] };
    t.match(await a.gate.admit(gateRequest({ ...lease, leaseId: 'a-1' })), { ok: true }, 'a call in flight on a');
    a.gate.recovery.setHoldingsSource(() => ({ outstanding: new Map(), leases: [{ keys: ['conc:early'], leaseId: 'a-1' }], leaseTtlMs: TTL }));
    t.match(await b.gate.admit(gateRequest({ leaseId: 'b-1' })), { ok: true }, 'b admits too');
    t.equal((await epochs.liveReplicas(60_000)).length, 2, 'both replicas are registered live by their first admission');

    await loseData(prefix);

    t.match(await b.gate.admit(gateRequest({ ...lease, leaseId: 'b-2' })), { ok: false, refused: 'concurrency' }, "b admitted only after a restored its call's lease");
    t.equal(b.gate.recovery.counts().recoveries, 1, 'b recovered from the loss');
  });

  t.test('gate: for a minute after a loss, each rate bucket is seeded once before its first admission', async (t) => {
    const prefix = deployment();
    const [a, b] = [await replicaOf(prefix), await replicaOf(prefix)];
    const bucket = { key: 'rpm:seeded', limit: 10, periodMs: TTL };
    const call = (leaseId: string) => gateRequest({ leaseId, requests: [{ ...bucket, cost: 1 }] });
    t.equal((await a.gate.admit(call('a-1'))).ok, true, 'no seeding while the store keeps its data');
    await loseData(prefix);
    t.match(await a.gate.admit(call('a-2')), { ok: false, refused: 'unseeded', keys: ['rpm:seeded'] });
    t.match(await b.gate.admit(call('b-1')), { ok: false, refused: 'unseeded', keys: ['rpm:seeded'] });
    await a.gate.recovery.seedWindow({ ...bucket, cost: 8 });
    await b.gate.recovery.seedWindow({ ...bucket, cost: 8 }); // a second seeder changes nothing
    const admitted = [];
    for (let i = 0; i < 5; i += 1) admitted.push((await b.gate.admit(call(`b-${i + 2}`))).ok);
    t.same(admitted, [true, true, false, false, false], 'the seeded bucket has room for 2 of its 10, seeded once');
  });
});

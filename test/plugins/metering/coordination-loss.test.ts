import t, { type Test } from 'tap';
import { generateToken, SESSION_PREFIX } from '../../../core/identity/api-tokens.ts';
import { startFakeOpenAIUpstream, type FakeOpenAIUpstream } from '../../fakes/fake-openai-upstream.ts';
import { realServersConfig } from '../../helpers/app.ts';
import { eventually } from '../../helpers/eventually.ts';
import { loseRedisData } from '../../helpers/redis-data-loss.ts';
import { reservedInputTokens, startMeteredGateway, user, type ChatResult, type MeteredGateway } from './metered-gateway.ts';

/**
 * Two gateway replicas sharing PostgreSQL and Redis, on a brand-new deployment and after Redis
 * loses its data (every key under the deployment's prefix deleted, as a restart without
 * persistence leaves it). A new store admits at once; after a loss, rate windows, concurrency
 * leases and money counters are re-seeded from the request log and the replicas' calls in flight,
 * so no limit admits more than it would have without the loss.
 */
const real = realServersConfig();
const skip = real ? false : 'needs TEST_PG_URL and TEST_REDIS_URL (two replicas share the real servers)';

const PROMPT = 'count me';
const CALL = { model: 'solo', messages: user(PROMPT), max_tokens: 20 };
/** What one call reserves: tokens per minute, and micro-USD at $1/M input and $2/M output. */
const TOKENS_RESERVED = reservedInputTokens(PROMPT) + CALL.max_tokens;
const MICROS_RESERVED = reservedInputTokens(PROMPT) + 2 * CALL.max_tokens;

interface Replicas {
  a: MeteredGateway;
  b: MeteredGateway;
  upstream: FakeOpenAIUpstream;
  prefix: string;
  /** `count` calls alternating between the replicas, all at once. */
  burst(key: string, count: number): Promise<ChatResult[]>;
}

async function twoReplicas(t: Test): Promise<Replicas> {
  const servers = realServersConfig()!;
  t.teardown(() => servers.dropSchema()); // registered first: runs after both gateways have closed
  t.teardown(() => loseRedisData(process.env.TEST_REDIS_URL!, servers.prefix));
  const upstream = await startFakeOpenAIUpstream();
  t.teardown(() => upstream.close());
  const ownerToken = generateToken(SESSION_PREFIX);
  const [a, b] = await Promise.all([startMeteredGateway(t, { storage: servers.storage, ownerToken, upstream }), startMeteredGateway(t, { storage: servers.storage, ownerToken, upstream })]);
  return {
    a,
    b,
    upstream,
    prefix: servers.prefix,
    burst: (key, count) => Promise.all(Array.from({ length: count }, (_, i) => (i % 2 === 0 ? a : b).chat(key, CALL))),
  };
}

/** Answers held at the upstream until released: calls stay in flight, holding what they reserved. */
function upstreamHold(t: Test): { held: Promise<void>; release(): void } {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  t.teardown(() => release());
  return { held, release };
}

/**
 * `count` calls at once, half on each replica, every answer held at the upstream: resolves once
 * each call is either held there (admitted) or answered (refused), with how many were admitted.
 */
async function heldBurst(replicas: Replicas, key: string, count: number, held: Promise<void>): Promise<{ admitted: number; calls: Promise<ChatResult[]> }> {
  const before = replicas.upstream.requests.length;
  replicas.upstream.enqueue(...Array.from({ length: count }, () => ({ kind: 'reply' as const, holdUntil: held })));
  let answered = 0;
  const calls = Promise.all(Array.from({ length: count }, (_, i) => (i % 2 === 0 ? replicas.a : replicas.b).chat(key, CALL).finally(() => (answered += 1))));
  const arrived = () => replicas.upstream.requests.length - before;
  await eventually(() => answered + arrived() === count, 'every call of the burst to be held or refused', { timeoutMs: 30_000 });
  return { admitted: arrived(), calls };
}

const admitted = (results: ChatResult[]) => results.filter((r) => r.status === 200).length;
const loseData = async (t: Test, replicas: Replicas) => t.ok((await loseRedisData(process.env.TEST_REDIS_URL!, replicas.prefix)) > 0, "Redis lost the deployment's data");

t.test('a fresh two-replica deployment answers its first burst with no recovery wait', { skip }, async (t) => {
  const replicas = await twoReplicas(t);
  const { key } = await replicas.a.newKey({ rateLimits: { requestsPerMinute: 1_000, concurrency: 200 } });
  const results = await replicas.burst(key, 100);
  t.equal(admitted(results), 100, 'every call of the first burst was answered 200');
  for (const [name, replica] of [
    ['a', replicas.a],
    ['b', replicas.b],
  ] as const) {
    t.same(replica.coordination.gate.recovery.counts(), { recoveries: 0, admissionsHeld: 0 }, `replica ${name} took the new store for new: no recovery, no admission held back`);
  }
});

t.test('rpm 30 stays at most 30 plus refills right after Redis loses its data', { skip }, async (t) => {
  const replicas = await twoReplicas(t);
  const { key } = await replicas.a.newKey({ rateLimits: { requestsPerMinute: 30 } });
  const started = Date.now();
  t.equal(admitted(await replicas.burst(key, 20)), 20, 'twenty calls before the loss');
  await loseData(t, replicas);
  const after = admitted(await replicas.burst(key, 40));
  // GCRA refills one request every 2 s: the bound allows for a slow machine.
  const refills = Math.floor((Date.now() - started) / 2_000);
  t.ok(20 + after <= 30 + refills, `${20 + after} calls admitted in the minute (30 plus ${refills} refilled at most)`);
  // A row stored between a replica's report and a seed is counted twice (the safe way round), so
  // the room left is not exact: the window is re-seeded, not shut.
  t.ok(after > 0, `the re-seeded window still admits calls (${after})`);
  t.same(replicas.a.coordination.gate.recovery.counts().recoveries + replicas.b.coordination.gate.recovery.counts().recoveries, 2, 'both replicas recovered once');
});

t.test('concurrency leases are not exceeded right after a loss while calls are in flight on both replicas', { skip }, async (t) => {
  const replicas = await twoReplicas(t);
  const { id, key } = await replicas.a.newKey({ rateLimits: { concurrency: 4 } });
  const hold = upstreamHold(t);
  const first = await heldBurst(replicas, key, 4, hold.held);
  t.equal(first.admitted, 4, 'four calls in flight, two on each replica');
  await loseData(t, replicas);
  const more = await replicas.burst(key, 6);
  t.same(
    more.map((r) => r.status),
    Array(6).fill(429),
    'every new call is refused: the four calls in flight hold every slot',
  );
  t.equal(await replicas.a.coordination.leases.active(`conc:key:${id}`), 4, 'their leases were restored by the replicas holding them');
  hold.release();
  t.equal(admitted(await first.calls), 4, 'the calls in flight finished');
});

t.test('a tpm limit is not exceeded after a loss mid-burst', { skip }, async (t) => {
  const replicas = await twoReplicas(t);
  const { key } = await replicas.a.newKey({ rateLimits: { tokensPerMinute: 10 * TOKENS_RESERVED } });
  const started = Date.now();
  // Every answer is held, so no call settles (and gives back what it reserved beyond its use) during the test.
  const hold = upstreamHold(t);
  const first = await heldBurst(replicas, key, 5, hold.held);
  t.equal(first.admitted, 5, 'five calls in flight before the loss');
  await loseData(t, replicas);
  const after = await heldBurst(replicas, key, 20, hold.held);
  // The bucket refills a tenth of the limit (one call's reservation) every 6 s.
  const refills = Math.floor((Date.now() - started) / 6_000);
  t.ok(5 + after.admitted <= 10 + refills, `${5 + after.admitted} calls admitted against a limit that fits 10 (plus ${refills} refilled at most)`);
  t.ok(after.admitted > 0, 'the re-seeded window still admits calls');
  hold.release();
  await Promise.all([first.calls, after.calls]);
});

t.test('a spend cap is not exceeded after a loss mid-burst', { skip }, async (t) => {
  const replicas = await twoReplicas(t);
  const { key } = await replicas.a.newKey({ spendCap: { usd: (10 * MICROS_RESERVED) / 1e6, period: 'total', mode: 'blocking' } });
  const hold = upstreamHold(t);
  const first = await heldBurst(replicas, key, 5, hold.held);
  t.equal(first.admitted, 5, 'five calls in flight before the loss');
  await loseData(t, replicas);
  const after = await heldBurst(replicas, key, 20, hold.held);
  t.equal(after.admitted, 5, 'five more calls fit beside the five in flight, and no more');
  hold.release();
  const results = await after.calls;
  t.equal(results.filter((r) => r.status === 402).length, 15, 'the rest were refused at the cap');
});

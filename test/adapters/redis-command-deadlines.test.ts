/**
 * CommandDeadlines (adapters/redis/redis-command-deadlines.ts): the per-call scripts' bound on an
 * unanswered command, on an injected clock; and, against the real Redis when TEST_REDIS_URL is
 * set, that its client sends commands without node-redis's per-command timer.
 */
import t from 'tap';
import { createClient, TimeoutError } from 'redis';
import type { RedisClient } from '../../adapters/redis/redis-client.ts';
import { CommandDeadlines } from '../../adapters/redis/redis-command-deadlines.ts';

/**
 * A real node-redis client, never connected: the deadline cases bound commands whose answers the test
 * gives, so nothing is sent; the client is only asked for its view without the per-command timeout.
 */
const unconnectedClient = createClient() as unknown as RedisClient;

/** A command whose answer the test gives (or never gives). */
function command<T>() {
  let answer!: (value: T) => void;
  let fail!: (error: Error) => void;
  const promise = new Promise<T>((resolve, reject) => {
    answer = resolve;
    fail = reject;
  });
  return { promise, answer, fail };
}

/** What the bounded command failed with (undefined when it did not fail). */
function failure(bounded: Promise<unknown>): Promise<unknown> {
  return bounded.then(
    () => undefined,
    (error: unknown) => error,
  );
}

function clock() {
  let now = 1_000;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

t.test('a command answered in time gives its answer', async (t) => {
  const time = clock();
  const deadlines = new CommandDeadlines(unconnectedClient, 5_000, time.now);
  t.teardown(() => deadlines.close());
  const sent = command<number>();
  const bounded = deadlines.bound(sent.promise);
  time.advance(4_999);
  deadlines.expire();
  sent.answer(42);
  t.equal(await bounded, 42);
});

t.test("a command's own failure reaches the caller as it is", async (t) => {
  const deadlines = new CommandDeadlines(unconnectedClient, 5_000, clock().now);
  t.teardown(() => deadlines.close());
  const sent = command<number>();
  const bounded = deadlines.bound(sent.promise);
  sent.fail(new Error('NOSCRIPT No matching script'));
  await t.rejects(bounded, { message: 'NOSCRIPT No matching script' });
});

t.test("a command unanswered at its deadline fails with node-redis's TimeoutError", async (t) => {
  const time = clock();
  const deadlines = new CommandDeadlines(unconnectedClient, 5_000, time.now);
  t.teardown(() => deadlines.close());
  const bounded = deadlines.bound(command<number>().promise);
  time.advance(5_000);
  deadlines.expire();
  t.ok((await failure(bounded)) instanceof TimeoutError);
});

t.test('only the commands past their deadline fail; a later one still gets its answer', async (t) => {
  const time = clock();
  const deadlines = new CommandDeadlines(unconnectedClient, 5_000, time.now);
  t.teardown(() => deadlines.close());
  const first = deadlines.bound(command<number>().promise);
  time.advance(3_000);
  const second = command<number>();
  const secondBounded = deadlines.bound(second.promise);
  time.advance(2_000);
  deadlines.expire();
  t.ok((await failure(first)) instanceof TimeoutError, 'the first timed out');
  second.answer(7);
  t.equal(await secondBounded, 7);
});

t.test('an answer that arrives after the deadline changes nothing', async (t) => {
  const time = clock();
  const deadlines = new CommandDeadlines(unconnectedClient, 5_000, time.now);
  t.teardown(() => deadlines.close());
  const sent = command<number>();
  const bounded = deadlines.bound(sent.promise);
  time.advance(6_000);
  deadlines.expire();
  sent.answer(1);
  t.ok((await failure(bounded)) instanceof TimeoutError);
});

const redisUrl = process.env.TEST_REDIS_URL;
const needsRedis = { skip: redisUrl ? false : 'needs TEST_REDIS_URL' };
t.test('its client sends commands without a timer each; the client it came from keeps its own', needsRedis, async (t) => {
  const client = createClient({ url: redisUrl }) as unknown as RedisClient;
  await client.connect();
  t.teardown(() => client.destroy());
  const deadlines = new CommandDeadlines(client);
  t.teardown(() => deadlines.close());
  // node-redis arms its per-command timeout with AbortSignal.timeout: count those.
  const original = AbortSignal.timeout;
  let timers = 0;
  AbortSignal.timeout = (ms: number) => {
    timers += 1;
    return original.call(AbortSignal, ms);
  };
  t.teardown(() => {
    AbortSignal.timeout = original;
  });
  t.equal(await deadlines.bound(deadlines.client.ping()), 'PONG');
  t.equal(timers, 0, 'no timer for the bounded client');
  await client.ping();
  t.equal(timers, 1, 'the plain client still has its own');
});

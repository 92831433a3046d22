import t from 'tap';
import { coreMigrations } from '../../adapters/sql/core-migrations.ts';
import { ENQUEUE_CHUNK, SqlPeriodicStore } from '../../adapters/sql/job-store.ts';
import { runMigrations } from '../../adapters/sql/migrator.ts';
import { z } from 'zod';
import { JobQueue } from '../../core/jobs/job-queue.ts';
import { JobRegistry } from '../../core/jobs/job-registry.ts';
import { defineQueue, definePeriodic, JobInterrupted, PermanentJobError, RetryJobAt, SnoozeJob, type Job } from '../../core/jobs/queue-definitions.ts';
import type { Database } from '../../core/ports/database.ts';
import { databaseBackends, type DatabaseBackend } from '../helpers/databases.ts';
import { eventually } from '../helpers/eventually.ts';
import { deferred, jobKit, recordingLogger, testClock } from '../helpers/jobs.ts';

/**
 * One database per backend for the whole file, emptied before each test: a fresh PGlite costs seconds,
 * and this file judges the queue's mutants (mutation/groups.mjs), where every second counts per mutant.
 */
async function sharedDatabase(backend: DatabaseBackend, t: { teardown(fn: () => unknown): void }): Promise<() => Promise<Database>> {
  const { db, cleanup } = await backend.create();
  t.teardown(cleanup);
  await runMigrations(db, coreMigrations);
  return async () => {
    await db.query('DROP TABLE IF EXISTS effects, runs');
    await db.query('TRUNCATE jobs, periodic_jobs');
    return db;
  };
}

const work = defineQueue({ name: 'test.work', payload: z.object({ n: z.number().int() }), concurrency: 4 });

async function jobState(db: Database, id: string) {
  const { rows } = await db.query<{ state: string; attempts: number; run_at: Date; last_error: string | null; lease_token: string | null }>(
    'SELECT state, attempts, run_at, last_error, lease_token FROM jobs WHERE id = $1',
    [id],
  );
  return rows[0]!;
}

/**
 * The lease fence, seen while both workers hold the job: the old worker claims it and stalls past its
 * lease, a new worker takes it over and is still running it when the old one wakes and does `late`.
 * (The earlier takeover test lets the new worker finish first, where `state = 'running'` alone refuses.)
 */
async function overtakenWorker(db: Database, late: (job: Job<Record<string, never>>) => Promise<unknown>) {
  const clock = testClock();
  const kit = await jobKit(db, { clock });
  await db.query('CREATE TABLE effects (job_id text NOT NULL, worker text NOT NULL)');
  // A long lease: neither worker's first heartbeat (a third of it, in real time) comes during the test.
  const taken = defineQueue({ name: 'test.taken', payload: z.object({}), leaseMs: 300_000 });
  kit.registry.addQueue(taken.handle(async () => undefined));
  const oldStarted = deferred();
  const oldWakes = deferred();
  let lateError: unknown;
  const oldHandlers = new JobRegistry();
  oldHandlers.addQueue(
    taken.handle(async (job) => {
      oldStarted.resolve();
      await oldWakes.promise;
      try {
        await late(job);
      } catch (error) {
        lateError = error;
        throw error;
      }
    }),
  );
  const newStarted = deferred();
  const newFinishes = deferred();
  const newHandlers = new JobRegistry();
  newHandlers.addQueue(
    taken.handle(async (job) => {
      newStarted.resolve();
      await newFinishes.promise;
      await job.complete((tx) => tx.query("INSERT INTO effects VALUES ($1, 'new')", [job.id]));
    }),
  );
  const oldWorker = kit.runner({ registry: oldHandlers, workerId: 'old' });
  const newWorker = kit.runner({ registry: newHandlers, workerId: 'new' });
  const { id } = await kit.jobs.enqueue(taken, {});
  await oldWorker.pollOnce();
  await oldStarted.promise;
  clock.advance(300_000);
  await newWorker.pollOnce();
  await newStarted.promise;
  const newLeaseToken = (await jobState(db, id)).lease_token;

  oldWakes.resolve();
  await oldWorker.settled();
  const whileNewRuns = await jobState(db, id);
  newFinishes.resolve();
  await newWorker.settled();
  const { rows } = await db.query<{ worker: string }>('SELECT worker FROM effects');
  return { lateError, newLeaseToken, whileNewRuns, effects: rows.map((r) => r.worker), final: await jobState(db, id) };
}

for (const backend of databaseBackends()) {
  t.test(backend.name, async (t) => {
    const open = await sharedDatabase(backend, t);
    t.test('a job enqueued in a transaction that rolls back does not exist', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      kit.registry.addQueue(work.handle(async () => undefined));
      await t.rejects(
        db.transaction(async (tx) => {
          await kit.jobs.enqueue(work, { n: 1 }, { tx });
          throw new Error('the change failed');
        }),
        /the change failed/,
      );
      const { rows } = await db.query('SELECT id FROM jobs');
      t.same(rows, [], 'no job');
    });

    t.test('a job enqueued in a transaction that commits runs, after the commit', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      const ran: number[] = [];
      kit.registry.addQueue(work.handle(async (job) => void ran.push(job.payload.n)));
      const runner = kit.runner();
      const job = await db.transaction((tx) => kit.jobs.enqueue(work, { n: 7 }, { tx }));
      await runner.runUntilIdle();
      t.same(ran, [7]);
      t.equal((await jobState(db, job.id)).state, 'succeeded');
    });

    t.test('an idempotency key dedupes: the second enqueue returns the first job', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      kit.registry.addQueue(work.handle(async () => undefined));
      const first = await kit.jobs.enqueue(work, { n: 1 }, { idempotencyKey: 'order-42' });
      const again = await db.transaction((tx) => kit.jobs.enqueue(work, { n: 2 }, { tx, idempotencyKey: 'order-42' }));
      const other = await kit.jobs.enqueue(work, { n: 3 }, { idempotencyKey: 'order-43' });
      t.equal(first.created, true);
      t.same({ id: again.id, created: again.created }, { id: first.id, created: false });
      t.not(other.id, first.id);
      t.equal((await db.query('SELECT count(*)::int AS n FROM jobs')).rows[0]?.['n'], 2);
      t.same((await kit.jobs.get(first.id))?.payload, { n: 1 }, 'the first payload is kept');
    });

    t.test('a job keeps what it was enqueued with: payload, runAt, priority, attempts, creation time', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      kit.registry.addQueue(work.handle(async () => undefined));
      const runAt = new Date(clock().getTime() + 5_000);
      const given = await kit.jobs.enqueue(work, { n: 3 }, { runAt, priority: 7, maxAttempts: 2, idempotencyKey: 'kept' });
      const plain = await kit.jobs.enqueue(work, { n: 4 });
      t.equal(given.state, 'queued');
      t.match(await kit.jobs.get(given.id), {
        id: given.id,
        queue: 'test.work',
        payload: { n: 3 },
        state: 'queued',
        attempts: 0,
        maxAttempts: 2,
        priority: 7,
        runAt,
        idempotencyKey: 'kept',
        lastError: null,
        cancelRequested: false,
        createdAt: clock(),
        finishedAt: null,
      });
      t.match(await kit.jobs.get(plain.id), { maxAttempts: 5, priority: 0, runAt: clock(), idempotencyKey: null }, "the queue's defaults");
    });

    t.test('maxAttempts given when enqueueing must be a positive integer', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      kit.registry.addQueue(work.handle(async () => undefined));
      for (const maxAttempts of [0, -1, 1.5]) {
        await t.rejects(kit.jobs.enqueue(work, { n: 1 }, { maxAttempts }), { message: `maxAttempts must be a positive integer, got ${maxAttempts}` });
      }
      t.equal((await kit.jobs.get((await kit.jobs.enqueue(work, { n: 1 }, { maxAttempts: 1 })).id))?.maxAttempts, 1);
      t.equal((await db.query('SELECT count(*)::int AS n FROM jobs')).rows[0]?.['n'], 1, 'only the valid job was stored');
    });

    t.test('workers here are woken by a new job (at once, or after the commit; not by a duplicate) and interrupted for a running job cancelled', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      kit.registry.addQueue(work.handle(async () => undefined));
      const heard: string[] = [];
      const jobs = new JobQueue({
        store: kit.store,
        database: db,
        registry: kit.registry,
        clock: testClock(),
        workers: { wake: (queue) => void heard.push(`wake ${queue}`), interrupt: (id) => void heard.push(`interrupt ${id}`) },
      });
      await jobs.enqueue(work, { n: 1 }, { idempotencyKey: 'once' });
      t.same(heard.splice(0), ['wake test.work'], 'without a transaction: at once');
      await jobs.enqueue(work, { n: 1 }, { idempotencyKey: 'once' });
      t.same(heard.splice(0), [], 'a duplicate wakes nobody');
      await db.transaction(async (tx) => {
        await jobs.enqueue(work, { n: 2 }, { tx });
        t.same(heard, [], 'not before the commit');
      });
      t.same(heard.splice(0), ['wake test.work'], 'after the commit');
      await db.transaction(async (tx) => jobs.enqueue(work, { n: 2 }, { tx, idempotencyKey: 'once' }));
      t.same(heard.splice(0), [], 'a duplicate in a transaction wakes nobody');
      const queued = await jobs.enqueue(work, { n: 3 });
      heard.splice(0);
      t.equal(await jobs.cancel(queued.id), 'cancelled');
      t.same(heard, [], 'cancelling a queued job interrupts nobody');
      const running = await jobs.enqueue(work, { n: 4 });
      await kit.store.claim([{ queue: 'test.work', slots: 10, leaseMs: 60_000 }], new Date('2026-03-02T10:00:00.000Z'), 'w');
      heard.splice(0);
      t.equal(await jobs.cancel(running.id), 'cancel_requested');
      t.same(heard, [`interrupt ${running.id}`], 'cancelling a running job interrupts its worker here at once');
    });

    t.test('enqueueMany creates every job in item order, each with its runAt, priority and key', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      kit.registry.addQueue(work.handle(async () => undefined));
      const later = new Date(clock().getTime() + 60_000);
      const answers = await kit.jobs.enqueueMany(work, [{ payload: { n: 1 } }, { payload: { n: 2 }, runAt: later, priority: 3, idempotencyKey: 'two' }, { payload: { n: 3 } }], {
        maxAttempts: 2,
      });
      t.same(
        answers.map((a) => [a.state, a.created]),
        [
          ['queued', true],
          ['queued', true],
          ['queued', true],
        ],
      );
      const stored = await Promise.all(answers.map((a) => kit.jobs.get(a.id)));
      t.same(
        stored.map((job) => [job?.payload, job?.runAt.getTime(), job?.priority, job?.idempotencyKey, job?.maxAttempts, job?.createdAt.getTime()]),
        [
          [{ n: 1 }, clock().getTime(), 0, null, 2, clock().getTime()],
          [{ n: 2 }, later.getTime(), 3, 'two', 2, clock().getTime()],
          [{ n: 3 }, clock().getTime(), 0, null, 2, clock().getTime()],
        ],
        'each answer is its item',
      );
      const ids = answers.map((a) => BigInt(a.id));
      t.ok(ids[0]! < ids[1]! && ids[1]! < ids[2]!, 'ids ascend in item order, so equal jobs run in item order');
    });

    t.test('enqueueMany in a transaction that rolls back creates none', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      kit.registry.addQueue(work.handle(async () => undefined));
      await t.rejects(
        db.transaction(async (tx) => {
          const answers = await kit.jobs.enqueueMany(work, [{ payload: { n: 1 } }, { payload: { n: 2 }, idempotencyKey: 'k' }], { tx });
          t.equal(answers.length, 2, 'created inside the transaction');
          throw new Error('the change failed');
        }),
        /the change failed/,
      );
      t.same((await db.query('SELECT id FROM jobs')).rows, [], 'no job');
    });

    t.test('enqueueMany without a transaction is all or none: a failure in a later chunk leaves no job', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      kit.registry.addQueue(work.handle(async () => undefined));
      // The last item's priority does not fit the column: the database refuses the second chunk.
      const items = Array.from({ length: ENQUEUE_CHUNK + 1 }, (_, n) => ({ payload: { n }, ...(n === ENQUEUE_CHUNK ? { priority: 2 ** 31 } : {}) }));
      await t.rejects(kit.jobs.enqueueMany(work, items));
      t.equal((await db.query('SELECT count(*)::int AS n FROM jobs')).rows[0]?.['n'], 0, 'the first chunk was rolled back too');
    });

    t.test("enqueueMany honours each item's idempotency key: a taken key, or one repeated in the list, answers the first job", async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      kit.registry.addQueue(work.handle(async () => undefined));
      const existing = await kit.jobs.enqueue(work, { n: 0 }, { idempotencyKey: 'taken' });
      const answers = await kit.jobs.enqueueMany(work, [
        { payload: { n: 1 }, idempotencyKey: 'taken' },
        { payload: { n: 2 }, idempotencyKey: 'twice' },
        { payload: { n: 3 } },
        { payload: { n: 4 }, idempotencyKey: 'twice' },
      ]);
      t.same(answers[0], { id: existing.id, state: 'queued', created: false }, 'the existing job');
      t.equal(answers[1]?.created, true);
      t.same(answers[3], { id: answers[1]?.id, state: 'queued', created: false }, "the list's first item with the key");
      t.equal(answers[2]?.created, true);
      const { rows } = await db.query<{ n: string }>("SELECT payload->>'n' AS n FROM jobs ORDER BY id");
      t.same(
        rows.map((row) => row.n),
        ['0', '2', '3'],
        'the first payload of each key is kept',
      );
    });

    t.test('enqueueMany checks every payload before writing anything, naming the item', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      kit.registry.addQueue(work.handle(async () => undefined));
      // @ts-expect-error the payload type is the schema's
      await t.rejects(kit.jobs.enqueueMany(work, [{ payload: { n: 1 } }, { payload: { n: 2 } }, { payload: { n: 'three' } }]), {
        message: "item 2: payload for queue test.work is invalid at 'n': Invalid input: expected number, received string",
      });
      t.equal((await db.query('SELECT count(*)::int AS n FROM jobs')).rows[0]?.['n'], 0, 'no job, not even the valid ones');
    });

    t.test('enqueueMany wakes workers once, after the commit, and not when no job is new', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      kit.registry.addQueue(work.handle(async () => undefined));
      const heard: string[] = [];
      const jobs = new JobQueue({
        store: kit.store,
        database: db,
        registry: kit.registry,
        clock: testClock(),
        workers: { wake: (queue) => void heard.push(queue), interrupt: () => undefined },
      });
      await jobs.enqueueMany(work, [{ payload: { n: 1 }, idempotencyKey: 'a' }, { payload: { n: 2 } }]);
      t.same(heard.splice(0), ['test.work'], 'without a transaction: once, at once');
      await db.transaction(async (tx) => {
        await jobs.enqueueMany(work, [{ payload: { n: 3 } }, { payload: { n: 4 } }], { tx });
        t.same(heard, [], 'not before the commit');
      });
      t.same(heard.splice(0), ['test.work'], 'once after the commit');
      await jobs.enqueueMany(work, [{ payload: { n: 1 }, idempotencyKey: 'a' }]);
      t.same(await jobs.enqueueMany(work, []), [], 'an empty list answers an empty list');
      t.same(heard, [], 'duplicates only, or nothing: nobody is woken');
    });

    t.test('enqueueMany of 5,000 jobs creates them all in one call, answered in item order', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      kit.registry.addQueue(work.handle(async () => undefined));
      // Every tenth item keyed; items 999 and 1,000 share a key across the first chunk boundary.
      const key = (n: number) => (n === 1_000 ? 'key-999' : n % 10 === 9 ? `key-${n}` : undefined);
      const items = Array.from({ length: 5_000 }, (_, n) => ({ payload: { n }, ...(key(n) ? { idempotencyKey: key(n)! } : {}) }));
      const answers = await kit.jobs.enqueueMany(work, items);
      t.equal(answers.length, 5_000);
      t.same(answers[1_000], { id: answers[999]?.id, state: 'queued', created: false }, 'a key repeated in a later chunk answers the first job');
      const { rows } = await db.query<{ id: string; n: number }>("SELECT id::text AS id, (payload->>'n')::int AS n FROM jobs ORDER BY id");
      t.equal(rows.length, 4_999, 'one job per distinct item');
      const nOf = new Map(rows.map((row) => [row.id, row.n]));
      t.same(
        answers.map((answer) => nOf.get(answer.id)),
        items.map((_, n) => (n === 1_000 ? 999 : n)),
        "each answer is its item's job",
      );
    });

    t.test('get and cancel answer null for an id that is not a job number', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      for (const id of ['', 'abc', '12a', 'a12', '1 2', '-1', '1'.repeat(19)]) {
        t.equal(await kit.jobs.get(id), null, `get ${JSON.stringify(id)}`);
        t.equal(await kit.jobs.cancel(id), null, `cancel ${JSON.stringify(id)}`);
      }
      t.equal(await kit.jobs.get('9'.repeat(18)), null, 'a number no job has');
    });

    t.test('pruneFinished deletes the jobs that finished before the given time, and nothing else', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      kit.registry.addQueue(work.handle(async () => undefined));
      const old = await kit.jobs.enqueue(work, { n: 1 });
      await kit.jobs.cancel(old.id);
      clock.advance(1_000);
      const recent = await kit.jobs.enqueue(work, { n: 2 });
      await kit.jobs.cancel(recent.id);
      const waiting = await kit.jobs.enqueue(work, { n: 3 });
      t.equal(await kit.store.pruneFinished(clock()), 1);
      t.same([await kit.jobs.get(old.id), (await kit.jobs.get(recent.id))?.state, (await kit.jobs.get(waiting.id))?.state], [null, 'cancelled', 'queued']);
    });

    t.test('a claim asking for no slots takes nothing', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      kit.registry.addQueue(work.handle(async () => undefined));
      await kit.jobs.enqueue(work, { n: 1 });
      t.same(await kit.store.claim([], new Date(), 'w'), []);
      t.same(
        await kit.store.claim(
          [
            { queue: 'test.work', slots: 0, leaseMs: 1_000 },
            { queue: 'test.work', slots: -1, leaseMs: 1_000 },
          ],
          new Date(),
          'w',
        ),
        [],
      );
      t.equal((await kit.jobs.get((await db.query<{ id: string }>('SELECT id::text AS id FROM jobs')).rows[0]!.id))?.state, 'queued');
    });

    t.test('payloads are checked against the queue schema when enqueued and when run', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      let ran = 0;
      kit.registry.addQueue(work.handle(async () => void (ran += 1)));
      // @ts-expect-error the payload type is the schema's
      await t.rejects(kit.jobs.enqueue(work, { n: 'one' }), { message: "payload for queue test.work is invalid at 'n': Invalid input: expected number, received string" });
      const nested = defineQueue({ name: 'test.nested', payload: z.object({ order: z.object({ id: z.number() }) }) });
      kit.registry.addQueue(nested.handle(async () => undefined));
      // @ts-expect-error the payload type is the schema's
      await t.rejects(kit.jobs.enqueue(nested, { order: {} }), { message: "payload for queue test.nested is invalid at 'order.id': Invalid input: expected number, received undefined" });
      const unknown = defineQueue({ name: 'test.nobody', payload: z.object({}) });
      await t.rejects(kit.jobs.enqueue(unknown, {}), /no enabled plugin handles queue test.nobody/);
      // A row written by an older version of the producer no longer fits: failed at once, not retried.
      const { rows } = await db.query<{ id: string }>(
        `INSERT INTO jobs (queue, payload, run_at, max_attempts, created_at) VALUES ('test.work', '{"n": "x"}', $1, 5, $1) RETURNING id::text AS id`,
        [clock()],
      );
      await kit.runner().runUntilIdle();
      const state = await jobState(db, rows[0]!.id);
      t.equal(ran, 0);
      t.equal(state.state, 'failed');
      t.equal(state.last_error, "the payload no longer matches queue test.work's schema at 'n': Invalid input: expected number, received string");
    });

    t.test('two workers on one database never run a job twice', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      await db.query('CREATE TABLE runs (job_id text NOT NULL, worker text NOT NULL)');
      kit.registry.addQueue(work.handle(async () => undefined));
      const worker = (name: string) => {
        const registry = new JobRegistry();
        registry.addQueue(work.handle(async (job) => void (await db.query('INSERT INTO runs VALUES ($1, $2)', [job.id, name]))));
        return kit.runner({ registry, workerId: name });
      };
      const a = worker('a');
      const b = worker('b');
      await db.transaction(async (tx) => {
        for (let n = 0; n < 200; n += 1) await kit.jobs.enqueue(work, { n }, { tx });
      });
      // Both claim concurrently until nothing is left.
      await Promise.all([a.runUntilIdle(), b.runUntilIdle()]);
      const { rows } = await db.query<{ runs: number; distinct_jobs: number; a: number; b: number }>(
        `SELECT count(*)::int AS runs, count(DISTINCT job_id)::int AS distinct_jobs,
                count(*) FILTER (WHERE worker = 'a')::int AS a, count(*) FILTER (WHERE worker = 'b')::int AS b FROM runs`,
      );
      t.equal(rows[0]?.runs, 200, 'every job ran');
      t.equal(rows[0]?.distinct_jobs, 200, 'no job ran twice');
      t.ok(rows[0]!.a > 0 && rows[0]!.b > 0, `both workers took part (a ${rows[0]?.a}, b ${rows[0]?.b})`);
      t.equal((await db.query("SELECT count(*)::int AS n FROM jobs WHERE state = 'succeeded'")).rows[0]?.['n'], 200);
    });

    t.test('a failing job backs off exponentially up to the maximum, then fails with its error', async (t) => {
      const db = await open();
      const clock = testClock();
      // random() = 1 puts each delay at its ceiling: 1 s, 2 s, 4 s, then capped at 5 s.
      const kit = await jobKit(db, { clock, random: () => 1 });
      const flaky = defineQueue({ name: 'test.flaky', payload: z.object({}), maxAttempts: 5, backoff: { baseMs: 1_000, maxMs: 5_000 } });
      const attempts: number[] = [];
      kit.registry.addQueue(
        flaky.handle(async (job) => {
          attempts.push(job.attempt);
          throw new Error(`upstream said no (attempt ${job.attempt}), key svc_live_abcdefghijklmnop`);
        }),
      );
      const runner = kit.runner();
      const { id } = await kit.jobs.enqueue(flaky, {});
      const delays: number[] = [];
      for (let attempt = 1; attempt <= 4; attempt += 1) {
        const before = clock().getTime();
        await runner.runUntilIdle();
        const state = await jobState(db, id);
        t.equal(state.state, 'queued', `queued again after attempt ${attempt}`);
        const delay = state.run_at.getTime() - before;
        delays.push(delay);
        clock.advance(delay - 1);
        t.equal(await runner.pollOnce(), 0, `not run before its delay (attempt ${attempt})`);
        clock.advance(1);
      }
      t.same(delays, [1_000, 2_000, 4_000, 5_000]);
      await runner.runUntilIdle();
      const last = await jobState(db, id);
      t.same(attempts, [1, 2, 3, 4, 5]);
      t.equal(last.state, 'failed');
      t.equal(last.last_error, 'upstream said no (attempt 5), key svc_live_[redacted]', 'the last message is kept, tokens masked');
      clock.advance(60_000);
      t.equal(await runner.pollOnce(), 0, 'a failed job is not run again');
    });

    t.test('a handler that throws RetryJobAt runs again at the time it chose, not the backoff, and the run counts as an attempt', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock, random: () => 1 });
      const chosen = defineQueue({ name: 'test.chosen', payload: z.object({}), maxAttempts: 3, backoff: { baseMs: 1_000, maxMs: 1_000 } });
      const attempts: number[] = [];
      kit.registry.addQueue(
        chosen.handle(async (job) => {
          attempts.push(job.attempt);
          if (job.attempt === 1) throw new RetryJobAt(new Date(clock().getTime() + 3_600_000), 'the receiver asked for an hour');
        }),
      );
      const runner = kit.runner();
      const { id } = await kit.jobs.enqueue(chosen, {});
      await runner.runUntilIdle();
      const state = await jobState(db, id);
      t.same([state.state, state.attempts, state.last_error], ['queued', 1, 'RetryJobAt: the receiver asked for an hour']);
      t.equal(state.run_at.getTime(), clock().getTime() + 3_600_000, 'at the chosen time');
      clock.advance(3_600_000 - 1);
      t.equal(await runner.pollOnce(), 0, 'not before it');
      clock.advance(1);
      await runner.runUntilIdle();
      t.same(attempts, [1, 2]);
      t.equal((await jobState(db, id)).state, 'succeeded');
    });

    t.test('RetryJobAt with a time already past runs again at once; out of attempts it fails the job with its reason', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      const chosen = defineQueue({ name: 'test.chosen', payload: z.object({}), maxAttempts: 2 });
      kit.registry.addQueue(
        chosen.handle(async () => {
          throw new RetryJobAt(new Date(clock().getTime() - 60_000), 'try again');
        }),
      );
      const { id } = await kit.jobs.enqueue(chosen, {});
      const runner = kit.runner();
      await runner.runUntilIdle();
      const state = await jobState(db, id);
      t.same([state.state, state.attempts, state.last_error], ['failed', 2, 'RetryJobAt: try again'], 'both attempts ran without the clock moving');
    });

    t.test('a job that throws SnoozeJob runs again at the time it chose, the attempt not counted', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      const limited = defineQueue({ name: 'test.limited', payload: z.object({}), maxAttempts: 1 });
      const attempts: number[] = [];
      kit.registry.addQueue(
        limited.handle(async (job) => {
          attempts.push(job.attempt);
          if (attempts.length === 1) throw new SnoozeJob(new Date(clock().getTime() + 60_000), 'the organisation runs all it may');
        }),
      );
      const runner = kit.runner();
      const { id } = await kit.jobs.enqueue(limited, {});
      await runner.runUntilIdle();
      const snoozed = await jobState(db, id);
      t.same([snoozed.state, snoozed.attempts, snoozed.last_error, snoozed.lease_token], ['queued', 0, null, null], 'queued again, attempts back to what they were');
      t.equal(snoozed.run_at.getTime(), clock().getTime() + 60_000, 'at the chosen time');
      clock.advance(59_999);
      t.equal(await runner.pollOnce(), 0, 'not before it');
      clock.advance(1);
      await runner.runUntilIdle();
      t.same(attempts, [1, 1], 'the run after the snooze is the same attempt');
      t.same([(await jobState(db, id)).state, (await jobState(db, id)).attempts], ['succeeded', 1]);
    });

    t.test('a job may snooze any number of times without failing; a time already past is due at once', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      const limited = defineQueue({ name: 'test.limited', payload: z.object({}), maxAttempts: 1 });
      let runs = 0;
      kit.registry.addQueue(
        limited.handle(async () => {
          runs += 1;
          if (runs <= 20) throw new SnoozeJob(new Date(clock().getTime() - 1_000), 'not yet');
        }),
      );
      const { id } = await kit.jobs.enqueue(limited, {});
      await kit.runner().runUntilIdle();
      const state = await jobState(db, id);
      t.equal(runs, 21, 'snoozed 20 times without the clock moving, then ran');
      t.same([state.state, state.attempts], ['succeeded', 1]);
    });

    t.test('a snooze is written only under the lease, and a job asked to cancel meanwhile ends cancelled', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      kit.registry.addQueue(work.handle(async () => undefined));
      const { id } = await kit.jobs.enqueue(work, { n: 1 });
      const [lease] = await kit.store.claim([{ queue: 'test.work', slots: 1, leaseMs: 60_000 }], clock(), 'w');
      const snooze = { state: 'snoozed', runAt: new Date(clock().getTime() + 1_000), reason: 'not now' } as const;
      t.equal(await kit.store.finish({ id, token: '00000000-0000-4000-8000-000000000000' }, snooze, clock()), false, 'another token writes nothing');
      t.equal((await jobState(db, id)).state, 'running');
      await kit.store.cancel(id, clock());
      t.equal(await kit.store.finish(lease!, snooze, clock()), true);
      t.match(await kit.jobs.get(id), { state: 'cancelled', attempts: 0, finishedAt: clock() });
    });

    t.test("a run longer than its queue's timeoutMs is aborted with JobInterrupted('timeout'), and the log names job and queue", async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      // A long lease: no heartbeat (a third of it, in real time) comes during the test.
      const timed = defineQueue({ name: 'test.timed', payload: z.object({}), timeoutMs: 5_000, leaseMs: 300_000 });
      let reason: unknown;
      kit.registry.addQueue(
        timed.handle(
          (job) =>
            new Promise((_, reject) =>
              job.signal.addEventListener('abort', () => {
                reason = job.signal.reason;
                reject(reason);
              }),
            ),
        ),
      );
      const logger = recordingLogger();
      const runner = kit.runner({ logger });
      const { id } = await kit.jobs.enqueue(timed, {});
      await runner.pollOnce();
      clock.advance(4_999);
      t.equal(reason, undefined, 'not before its time');
      clock.advance(1);
      await runner.settled();
      t.ok(reason instanceof JobInterrupted && reason.reason === 'timeout', 'the signal says it timed out');
      t.same(logger.lines, ["warn a job ran longer than its queue's timeout: its slot goes to the next job, and nothing the run does from now on is recorded"]);
      t.match(logger.objects[0], { job: id, queue: 'test.timed', timeoutMs: 5_000 });
    });

    t.test('a timed-out run frees its slot at the timeout: another job runs while its handler still hangs', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      const single = defineQueue({ name: 'test.single', payload: z.object({ n: z.number() }), concurrency: 1, timeoutMs: 5_000, leaseMs: 300_000 });
      const hang = deferred();
      t.teardown(() => hang.resolve());
      const ran: number[] = [];
      kit.registry.addQueue(
        single.handle(async (job) => {
          ran.push(job.payload.n);
          // The first job ignores its signal.
          if (job.payload.n === 1) await hang.promise;
        }),
      );
      const runner = kit.runner();
      const hung = await kit.jobs.enqueue(single, { n: 1 }, { priority: 1 });
      const next = await kit.jobs.enqueue(single, { n: 2 });
      t.equal(await runner.pollOnce(), 1);
      t.equal(await runner.pollOnce(), 0, 'the one slot is taken');
      clock.advance(5_000);
      await runner.settled();
      t.equal(runner.running, 0, 'the slot is free');
      t.equal(await runner.pollOnce(), 1, 'the freed slot takes the next job');
      await runner.settled();
      t.same(ran, [1, 2]);
      t.equal((await jobState(db, next.id)).state, 'succeeded');
      t.equal((await jobState(db, hung.id)).state, 'queued', 'the hung job waits for its retry');
    });

    t.test('a timed-out run whose handler completes late writes nothing', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      await db.query('CREATE TABLE effects (job_id text NOT NULL, worker text NOT NULL)');
      const timed = defineQueue({ name: 'test.timed', payload: z.object({}), timeoutMs: 5_000, leaseMs: 300_000, backoff: { baseMs: 60_000, maxMs: 60_000 } });
      const wakes = deferred();
      const refused = deferred<unknown>();
      kit.registry.addQueue(
        timed.handle(async (job) => {
          await wakes.promise;
          try {
            await job.complete((tx) => tx.query("INSERT INTO effects VALUES ($1, 'late')", [job.id]));
          } catch (error) {
            refused.resolve(error);
            throw error;
          }
        }),
      );
      const runner = kit.runner();
      const { id } = await kit.jobs.enqueue(timed, {});
      await runner.pollOnce();
      clock.advance(5_000);
      await runner.settled();
      const timedOut = await jobState(db, id);
      wakes.resolve();
      const lateError = await refused.promise;
      t.ok(lateError instanceof JobInterrupted && lateError.reason === 'timeout', 'refused before it began: the run timed out');
      t.same((await db.query('SELECT worker FROM effects')).rows, [], 'no effect');
      t.same(await jobState(db, id), timedOut, 'the job is as the timeout left it');
    });

    t.test('a timed-out run whose handler returns late does not succeed the job', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      const timed = defineQueue({ name: 'test.timed', payload: z.object({}), timeoutMs: 5_000, leaseMs: 300_000, backoff: { baseMs: 60_000, maxMs: 60_000 } });
      const wakes = deferred();
      const returned = deferred();
      kit.registry.addQueue(
        timed.handle(async () => {
          await wakes.promise;
          returned.resolve();
        }),
      );
      const written: string[] = [];
      const finish = kit.store.finish.bind(kit.store);
      kit.store.finish = (lease, outcome, now, tx) => {
        written.push(outcome.state);
        return finish(lease, outcome, now, tx);
      };
      const runner = kit.runner();
      const { id } = await kit.jobs.enqueue(timed, {});
      await runner.pollOnce();
      clock.advance(5_000);
      await runner.settled();
      wakes.resolve();
      await returned.promise;
      // What the runner does once the handler returns takes no I/O before it would write: by the
      // next turn of the event loop a write would have begun.
      await new Promise<void>((resolve) => setImmediate(resolve));
      t.same(written, ['retry'], "only the timeout's outcome was written");
      t.equal((await jobState(db, id)).state, 'queued', 'still queued for its retry');
    });

    t.test('a timed-out run is retried after the backoff, then fails when out of attempts, saying it timed out', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock, random: () => 1 });
      const timed = defineQueue({ name: 'test.timed', payload: z.object({}), maxAttempts: 2, timeoutMs: 1_000, leaseMs: 300_000, backoff: { baseMs: 2_000, maxMs: 2_000 } });
      const attempts: number[] = [];
      kit.registry.addQueue(
        timed.handle(async (job) => {
          attempts.push(job.attempt);
          await new Promise((_, reject) => job.signal.addEventListener('abort', () => reject(job.signal.reason)));
        }),
      );
      const runner = kit.runner();
      const { id } = await kit.jobs.enqueue(timed, {});
      await runner.pollOnce();
      clock.advance(1_000);
      await runner.settled();
      const retried = await jobState(db, id);
      t.same([retried.state, retried.attempts], ['queued', 1], 'a failed attempt, retried');
      t.equal(retried.run_at.getTime(), clock().getTime() + 2_000, "after the queue's backoff");
      clock.advance(2_000);
      t.equal(await runner.pollOnce(), 1);
      clock.advance(1_000);
      await runner.settled();
      const failed = await jobState(db, id);
      t.same(attempts, [1, 2]);
      t.same([failed.state, failed.attempts], ['failed', 2]);
      t.equal(failed.last_error, "timed out: the run took longer than queue test.timed's timeoutMs (1000 ms)");
    });

    t.test('a run that ends before its timeout is not timed out later', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      const timed = defineQueue({ name: 'test.timed', payload: z.object({}), timeoutMs: 5_000 });
      kit.registry.addQueue(timed.handle(async () => undefined));
      const logger = recordingLogger();
      const runner = kit.runner({ logger });
      const { id } = await kit.jobs.enqueue(timed, {});
      await runner.runUntilIdle();
      clock.advance(5_000);
      await runner.settled();
      t.equal((await jobState(db, id)).state, 'succeeded');
      t.same(logger.lines, [], 'no timeout was logged');
    });

    t.test('a queue without timeoutMs lets a run take as long as it takes', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      const untimed = defineQueue({ name: 'test.untimed', payload: z.object({}), leaseMs: 300_000 });
      const finish = deferred();
      let aborted = false;
      kit.registry.addQueue(
        untimed.handle(async (job) => {
          job.signal.addEventListener('abort', () => void (aborted = true));
          await finish.promise;
        }),
      );
      const runner = kit.runner();
      const { id } = await kit.jobs.enqueue(untimed, {});
      await runner.pollOnce();
      clock.advance(24 * 3_600_000);
      t.equal(runner.running, 1, 'still running a day later');
      t.equal(aborted, false);
      finish.resolve();
      await runner.settled();
      t.equal((await jobState(db, id)).state, 'succeeded');
    });

    t.test("runUntilIdle returns only once what the worker's own loop claimed, and what that enqueued, has run", async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      const chain = defineQueue({ name: 'test.chain', payload: z.object({ n: z.number().int() }), concurrency: 2 });
      kit.registry.addQueue(
        chain.handle(async (job) => {
          if (job.payload.n < 3) await kit.jobs.enqueue(chain, { n: job.payload.n + 1 });
        }),
      );
      const runner = kit.runner({ settings: { pollIntervalMs: 60_000 } });
      runner.start();
      t.teardown(() => runner.close());
      // The enqueue wakes the running loop, which claims the job while runUntilIdle polls too.
      await kit.jobs.enqueue(chain, { n: 1 });
      await runner.runUntilIdle();
      const { rows } = await db.query<{ n: string; state: string }>("SELECT payload->>'n' AS n, state FROM jobs WHERE queue = 'test.chain' ORDER BY id");
      t.same(
        rows.map((row) => [row.n, row.state]),
        [
          ['1', 'succeeded'],
          ['2', 'succeeded'],
          ['3', 'succeeded'],
        ],
      );
    });

    t.test('a PermanentJobError fails the job at once', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      kit.registry.addQueue(
        work.handle(async () => {
          throw new PermanentJobError('the input can never work');
        }),
      );
      const { id } = await kit.jobs.enqueue(work, { n: 1 });
      await kit.runner().runUntilIdle();
      const state = await jobState(db, id);
      t.same([state.state, state.attempts, state.last_error], ['failed', 1, 'PermanentJobError: the input can never work']);
    });

    t.test('a job whose worker died runs again after its lease, and the late worker cannot complete it', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      await db.query('CREATE TABLE effects (job_id text NOT NULL, worker text NOT NULL)');
      // A long lease: the stuck worker's first heartbeat (a third of it, in real time) never comes during the test.
      const slow = defineQueue({ name: 'test.slow', payload: z.object({}), leaseMs: 300_000 });
      kit.registry.addQueue(slow.handle(async () => undefined));
      const started = deferred();
      const release = deferred();
      const stuck = new JobRegistry();
      let lateError: unknown;
      stuck.addQueue(
        slow.handle(async (job) => {
          started.resolve();
          await release.promise;
          try {
            await job.complete((tx) => tx.query("INSERT INTO effects VALUES ($1, 'stuck')", [job.id]));
          } catch (error) {
            lateError = error;
            throw error;
          }
        }),
      );
      const healthy = new JobRegistry();
      healthy.addQueue(slow.handle(async (job) => void (await job.complete((tx) => tx.query("INSERT INTO effects VALUES ($1, 'healthy')", [job.id])))));
      // The stuck worker never renews, as if its process froze.
      const dead = kit.runner({ registry: stuck, workerId: 'dead' });
      const alive = kit.runner({ registry: healthy, workerId: 'alive' });
      const { id } = await kit.jobs.enqueue(slow, {});
      t.equal(await dead.pollOnce(), 1);
      await started.promise;

      clock.advance(299_999);
      t.equal(await alive.pollOnce(), 0, 'not taken over while the lease holds');
      clock.advance(1);
      t.equal(await alive.pollOnce(), 1, 'taken over once the lease expired');
      await alive.settled();
      t.equal((await jobState(db, id)).state, 'succeeded');

      release.resolve();
      await dead.settled();
      t.ok(lateError instanceof JobInterrupted && lateError.reason === 'lease_lost', 'the late completion is refused');
      const { rows } = await db.query<{ worker: string }>('SELECT worker FROM effects');
      t.same(rows, [{ worker: 'healthy' }], 'the effect happened once');
      const state = await jobState(db, id);
      t.same([state.state, state.attempts], ['succeeded', 2]);
    });

    t.test('a worker whose lease was taken over cannot complete the job while the new worker runs it', async (t) => {
      const db = await open();
      const outcome = await overtakenWorker(db, (job) => job.complete((tx) => tx.query("INSERT INTO effects VALUES ($1, 'old')", [job.id])));
      t.ok(outcome.lateError instanceof JobInterrupted && outcome.lateError.reason === 'lease_lost', 'the late completion is refused');
      t.same([outcome.whileNewRuns.state, outcome.whileNewRuns.lease_token], ['running', outcome.newLeaseToken], 'still running under the new lease');
      t.same(outcome.effects, ['new'], "the old worker's effect was rolled back; the new one's happened once");
      t.same([outcome.final.state, outcome.final.attempts], ['succeeded', 2]);
    });

    t.test('a worker whose lease was taken over cannot fail the job while the new worker runs it', async (t) => {
      const db = await open();
      const outcome = await overtakenWorker(db, async () => {
        throw new PermanentJobError('the old worker gives up');
      });
      t.same([outcome.whileNewRuns.state, outcome.whileNewRuns.lease_token], ['running', outcome.newLeaseToken], 'still running under the new lease');
      t.notMatch(outcome.whileNewRuns.last_error ?? '', /the old worker gives up/, "the old worker's error is not recorded");
      t.same([outcome.final.state, outcome.final.attempts], ['succeeded', 2], 'the new worker completes it');
    });

    t.test('a job out of attempts whose lease expired is failed, not run again', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      const once = defineQueue({ name: 'test.once', payload: z.object({}), maxAttempts: 1, leaseMs: 300_000 });
      const hang = deferred();
      kit.registry.addQueue(once.handle(() => hang.promise));
      const { id } = await kit.jobs.enqueue(once, {});
      const dead = kit.runner();
      await dead.pollOnce();
      clock.advance(300_000);
      await kit.runner().pollOnce();
      const state = await jobState(db, id);
      t.equal(state.state, 'failed');
      t.match(state.last_error, /stopped renewing its lease/);
      hang.resolve();
      await dead.settled();
      t.equal((await jobState(db, id)).state, 'failed', 'the late worker changes nothing');
    });

    t.test('a running job renews its lease while it works', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      const long = defineQueue({ name: 'test.long', payload: z.object({}), leaseMs: 60 });
      const renewed = deferred();
      kit.registry.addQueue(
        long.handle(async () => {
          clock.advance(1_000);
          await renewed.promise;
        }),
      );
      const { id } = await kit.jobs.enqueue(long, {});
      const runner = kit.runner();
      await runner.pollOnce();
      const first = await db.query<{ locked_until: Date }>('SELECT locked_until FROM jobs WHERE id = $1', [id]);
      // Heartbeats come every leaseMs / 3 (20 ms here, a real timer); wait for one to move locked_until.
      const lockedUntil = async () => (await db.query<{ locked_until: Date }>('SELECT locked_until FROM jobs WHERE id = $1', [id])).rows[0]!.locked_until.getTime();
      await eventually(async () => (await lockedUntil()) > first.rows[0]!.locked_until.getTime(), 'a heartbeat to renew the lease');
      t.equal(await lockedUntil(), clock().getTime() + 60, 'the lease now runs from the renewal');
      renewed.resolve();
      await runner.settled();
    });

    t.test("a heartbeat answers whether the lease is still the caller's, and whether cancellation was asked", async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      kit.registry.addQueue(work.handle(async () => undefined));
      const { id } = await kit.jobs.enqueue(work, { n: 1 });
      const [lease] = await kit.store.claim([{ queue: 'test.work', slots: 1, leaseMs: 60_000 }], new Date('2026-03-02T10:00:00.000Z'), 'w');
      const until = new Date('2026-03-02T10:05:00.000Z');
      t.equal(await kit.store.heartbeat(lease!, until), 'held');
      t.equal(await kit.store.heartbeat({ id, token: '00000000-0000-4000-8000-000000000000' }, until), 'lost', 'another token');
      t.equal(await kit.store.cancel(id, until), 'cancel_requested');
      t.equal(await kit.store.heartbeat(lease!, until), 'cancel_requested');
      t.equal(await kit.store.finish(lease!, { state: 'cancelled', error: null }, until), true);
      t.equal(await kit.store.heartbeat(lease!, until), 'lost', 'the job ended');
    });

    t.test('cancel: a queued job never runs', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      let ran = 0;
      kit.registry.addQueue(work.handle(async () => void (ran += 1)));
      const { id } = await kit.jobs.enqueue(work, { n: 1 });
      clock.advance(1_000);
      t.equal(await kit.jobs.cancel(id), 'cancelled');
      await kit.runner().runUntilIdle();
      t.equal(ran, 0);
      t.match(await kit.jobs.get(id), { state: 'cancelled', finishedAt: clock() }, 'finished when cancelled');
      t.equal(await kit.jobs.cancel(id), null, 'nothing left to cancel');
    });

    t.test('cancel: a running job gets an aborted signal and ends cancelled', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      const started = deferred();
      let reason: unknown;
      kit.registry.addQueue(
        work.handle(async (job: Job<{ n: number }>) => {
          started.resolve();
          await new Promise((_, reject) => job.signal.addEventListener('abort', () => reject((reason = job.signal.reason))));
        }),
      );
      const runner = kit.runner();
      const { id } = await kit.jobs.enqueue(work, { n: 1 });
      await runner.pollOnce();
      await started.promise;
      t.equal(await kit.jobs.cancel(id), 'cancel_requested');
      await runner.settled();
      t.ok(reason instanceof JobInterrupted && reason.reason === 'cancelled');
      const job = await kit.jobs.get(id);
      t.equal(job?.state, 'cancelled');
      t.match(job?.lastError, /cancelled/);
    });

    t.test('cancel: a job running on another replica stops at its next lease renewal', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      const remote = defineQueue({ name: 'test.remote', payload: z.object({}), leaseMs: 60 });
      kit.registry.addQueue(remote.handle(async () => undefined));
      const started = deferred();
      const other = new JobRegistry();
      other.addQueue(
        remote.handle(async (job) => {
          started.resolve();
          await new Promise((_, reject) => job.signal.addEventListener('abort', () => reject(job.signal.reason)));
        }),
      );
      const elsewhere = kit.runner({ registry: other });
      const { id } = await kit.jobs.enqueue(remote, {});
      await elsewhere.pollOnce();
      await started.promise;
      // Cancelled through the database only, as a producer on another replica would.
      t.equal(await kit.store.cancel(id, new Date()), 'cancel_requested');
      await elsewhere.settled();
      t.equal((await kit.jobs.get(id))?.state, 'cancelled');
    });

    t.test('close stops claiming, lets the running job finish, and claims nothing new', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      const started = deferred();
      const finish = deferred();
      const ran: number[] = [];
      kit.registry.addQueue(
        work.handle(async (job) => {
          if (job.payload.n === 1) {
            started.resolve();
            await finish.promise;
          }
          ran.push(job.payload.n);
        }),
      );
      const logger = recordingLogger();
      const runner = kit.runner({ logger });
      runner.start();
      const first = await kit.jobs.enqueue(work, { n: 1 });
      await started.promise;
      const closed = runner.close();
      const second = await kit.jobs.enqueue(work, { n: 2 });
      finish.resolve();
      await closed;
      t.same(ran, [1], 'the running job finished; the new one was not claimed');
      t.same(logger.lines, [], 'nothing was given back');
      t.equal((await kit.jobs.get(first.id))?.state, 'succeeded');
      t.equal((await kit.jobs.get(second.id))?.state, 'queued');
    });

    t.test('close gives back the lease of a job that does not finish within the drain', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      const started = deferred();
      let reason: unknown;
      kit.registry.addQueue(
        work.handle(async (job) => {
          started.resolve();
          await new Promise((resolve) => job.signal.addEventListener('abort', () => resolve((reason = job.signal.reason))));
        }),
      );
      const logger = recordingLogger();
      const runner = kit.runner({ settings: { drainMs: 0 }, logger });
      const { id } = await kit.jobs.enqueue(work, { n: 1 });
      await runner.pollOnce();
      await started.promise;
      await runner.close();
      t.same(logger.lines, ['warn jobs still running at shutdown were given back to the queue']);
      t.ok(reason instanceof JobInterrupted && reason.reason === 'shutdown', 'the job was told to stop');
      const state = await jobState(db, id);
      t.same([state.state, state.attempts, state.lease_token], ['queued', 0, null], 'queued again, the attempt not counted');
      await runner.settled();
      t.equal((await jobState(db, id)).state, 'queued', 'the job ending afterwards changes nothing');
    });

    t.test("a process runs at most its queue's concurrency of jobs at once, and says how many run", async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      const pair = defineQueue({ name: 'test.pair', payload: z.object({ n: z.number() }), concurrency: 2 });
      const gates = Array.from({ length: 3 }, () => deferred());
      const started: number[] = [];
      kit.registry.addQueue(
        pair.handle(async (job) => {
          started.push(job.payload.n);
          await gates[job.payload.n]!.promise;
        }),
      );
      for (const n of [0, 1, 2]) await kit.jobs.enqueue(pair, { n });
      const runner = kit.runner();
      t.equal(await runner.pollOnce(), 2, 'two claimed');
      t.equal(runner.running, 2);
      t.equal(await runner.pollOnce(), 0, 'no slot left for the third');
      gates[0]!.resolve();
      await eventually(async () => runner.running === 1, 'the first job to end');
      t.equal(await runner.pollOnce(), 1, 'the freed slot takes the third');
      for (const gate of gates) gate.resolve();
      await runner.settled();
      t.equal(runner.running, 0);
      t.same(started, [0, 1, 2]);
    });

    t.test('complete twice in one run is refused; the first completion stands', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      let second: unknown;
      kit.registry.addQueue(
        work.handle(async (job) => {
          await job.complete(async () => undefined);
          second = await job.complete(async () => 'again').catch((error: unknown) => error);
        }),
      );
      const { id } = await kit.jobs.enqueue(work, { n: 1 });
      await kit.runner().runUntilIdle();
      t.match(second, { message: `job ${id} is already complete` });
      t.equal((await kit.jobs.get(id))?.state, 'succeeded');
    });

    t.test('a handler that throws after completing leaves the job succeeded, and the log says so', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      kit.registry.addQueue(
        work.handle(async (job) => {
          await job.complete(async () => undefined);
          throw new Error('after the fact');
        }),
      );
      const logger = recordingLogger();
      const { id } = await kit.jobs.enqueue(work, { n: 1 });
      await kit.runner({ logger }).runUntilIdle();
      t.match(await kit.jobs.get(id), { state: 'succeeded', lastError: null });
      t.same(logger.lines, ['warn job handler threw after completing; the job stays succeeded']);
    });

    t.test('a worker whose run ended after its lease was taken over logs that another worker owns the job', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      const slow = defineQueue({ name: 'test.late', payload: z.object({}), leaseMs: 300_000 });
      kit.registry.addQueue(slow.handle(async () => undefined));
      const started = deferred();
      const release = deferred();
      const stuck = new JobRegistry();
      stuck.addQueue(
        slow.handle(async () => {
          started.resolve();
          await release.promise;
        }),
      );
      const logger = recordingLogger();
      const late = kit.runner({ registry: stuck, logger });
      await kit.jobs.enqueue(slow, {});
      await late.pollOnce();
      await started.promise;
      clock.advance(300_000);
      await kit.runner().runUntilIdle();
      release.resolve();
      await late.settled();
      t.same(logger.lines, ['warn a job finished after its lease was lost; another worker owns it']);
    });

    t.test('stopClaiming: the worker says it no longer claims, and claims nothing', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      kit.registry.addQueue(work.handle(async () => undefined));
      const runner = kit.runner();
      t.equal(runner.claiming, false, 'not before start');
      runner.start();
      t.equal(runner.claiming, true);
      runner.stopClaiming();
      t.equal(runner.claiming, false);
      const { id } = await kit.jobs.enqueue(work, { n: 1 });
      t.equal(await runner.pollOnce(), 0);
      await runner.close();
      t.equal((await kit.jobs.get(id))?.state, 'queued');
    });

    t.test('higher priority runs first among due jobs', async (t) => {
      const db = await open();
      const kit = await jobKit(db, { clock: testClock() });
      const serial = defineQueue({ name: 'test.serial', payload: z.object({ n: z.number() }) });
      const order: number[] = [];
      kit.registry.addQueue(serial.handle(async (job) => void order.push(job.payload.n)));
      await kit.jobs.enqueue(serial, { n: 1 });
      await kit.jobs.enqueue(serial, { n: 2 }, { priority: 5 });
      await kit.jobs.enqueue(serial, { n: 3 });
      await kit.runner().runUntilIdle();
      t.same(order, [2, 1, 3]);
    });

    t.test('a job is not run before its runAt', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      let ran = 0;
      kit.registry.addQueue(work.handle(async () => void (ran += 1)));
      await kit.jobs.enqueue(work, { n: 1 }, { runAt: new Date(clock().getTime() + 60_000) });
      const runner = kit.runner();
      await runner.runUntilIdle();
      t.equal(ran, 0);
      clock.advance(60_000);
      await runner.runUntilIdle();
      t.equal(ran, 1);
    });

    t.test('a periodic job runs on exactly one of two replicas per tick', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      const runs: string[] = [];
      const replica = (name: string) => {
        const registry = new JobRegistry();
        registry.addPeriodic(definePeriodic({ name: 'test.tick', everyMs: 60_000, run: async () => void runs.push(name) }));
        return kit.runner({ registry, workerId: name });
      };
      const a = replica('a');
      const b = replica('b');
      await Promise.all([a.runUntilIdle(), b.runUntilIdle()]);
      t.equal(runs.length, 1, 'the first tick is due at once and runs once');
      clock.advance(59_999);
      await Promise.all([a.runUntilIdle(), b.runUntilIdle()]);
      t.equal(runs.length, 1, 'nothing before the interval');
      for (let tick = 2; tick <= 5; tick += 1) {
        clock.advance(tick === 2 ? 1 : 60_000);
        await Promise.all([b.runUntilIdle(), a.runUntilIdle()]);
        t.equal(runs.length, tick, `tick ${tick} ran once`);
      }
      clock.advance(10 * 60_000);
      await Promise.all([a.runUntilIdle(), b.runUntilIdle()]);
      t.equal(runs.length, 6, 'missed ticks are skipped, not replayed');
      const { rows } = await db.query<{ next_run_at: Date }>("SELECT next_run_at FROM periodic_jobs WHERE name = 'test.tick'");
      t.equal((rows[0]!.next_run_at.getTime() - Date.parse('2026-03-02T10:00:00.000Z')) % 60_000, 0, 'the cadence is kept');
    });

    t.test('claimDue answers which periodic jobs it enqueued a run for', async (t) => {
      const db = await open();
      const clock = testClock();
      await jobKit(db, { clock });
      const periodic = new SqlPeriodicStore(db);
      const jobs = [{ name: 'test.due', queue: 'periodic.test.due', maxAttempts: 2 }];
      await periodic.register([{ name: 'test.due', intervalMs: 1_000 }], clock());
      t.same(await periodic.claimDue(jobs, clock(), 'w'), ['test.due'], 'the first tick is due at once');
      t.same(await periodic.claimDue(jobs, clock(), 'w'), [], 'not twice in one tick');
      clock.advance(1_000);
      t.same(await periodic.claimDue(jobs, clock(), 'w'), [], 'the next tick is skipped while the first run is queued');
      t.same(await periodic.claimDue([], clock(), 'w'), [], 'no jobs asked for, none claimed');
      const { rows } = await db.query<{ queue: string; max_attempts: number }>('SELECT queue, max_attempts FROM jobs');
      t.same(rows, [{ queue: 'periodic.test.due', max_attempts: 2 }]);
    });

    t.test('a periodic tick is skipped while the previous run is still going', async (t) => {
      const db = await open();
      const clock = testClock();
      const kit = await jobKit(db, { clock });
      const hold = deferred();
      let runs = 0;
      kit.registry.addPeriodic(
        definePeriodic({
          name: 'test.slow-tick',
          everyMs: 1_000,
          leaseMs: 600_000,
          run: async () => {
            runs += 1;
            await hold.promise;
          },
        }),
      );
      const runner = kit.runner();
      await runner.pollOnce();
      clock.advance(5_000);
      await runner.pollOnce();
      t.equal((await db.query("SELECT count(*)::int AS n FROM jobs WHERE queue = 'periodic.test.slow-tick'")).rows[0]?.['n'], 1);
      hold.resolve();
      await runner.settled();
      t.equal(runs, 1);
    });
  });
}

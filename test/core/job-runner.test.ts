import t, { type Test } from 'tap';
import { hostname } from 'node:os';
import { mock } from 'node:test';
import { z } from 'zod';
import { JobRegistry } from '../../core/jobs/job-registry.ts';
import { JobRunner, type JobRunnerSettings } from '../../core/jobs/job-runner.ts';
import { defineQueue, definePeriodic, JobInterrupted, type Job, type PeriodicDefinition, type QueueDefinition } from '../../core/jobs/queue-definitions.ts';
import type { Database, Queryable, Transaction } from '../../core/ports/database.ts';
import type { ClaimedJob, ClaimRequest, HeartbeatAnswer, JobLease, JobLeaseStore, JobOutcome, PeriodicStore } from '../../core/ports/queue.ts';
import { deferred, recordingLogger, testClock } from '../helpers/jobs.ts';

/*
 * JobRunner's own rules, over a scripted lease store instead of a database: what it asks the store,
 * what it writes and when, what it logs, its timers. test/contracts/job-queue.test.ts checks the runner
 * and the SQL store together; this file runs in about a second, so it judges the runner's mutants first
 * (mutation/MUTATION.md), and it reaches what a database cannot be made to do on cue (a claim in flight,
 * a renewal that fails, a write that never returns).
 *
 * Time: run timeouts use the test clock's `schedule`; lease renewals, the idle wait and the drain are
 * real timers, mocked here (with performance.now) where a test decides by them.
 */

// Kept before any test mocks the timers: bounds waits for events that a broken runner never sends.
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;
const realSetImmediate = globalThis.setImmediate;

/** Lets every promise the fakes answered settle (they do no I/O). */
const flush = () => new Promise<void>((resolve) => realSetImmediate(resolve));

/** Waits for something the runner does on its own; fails naming it rather than hanging the file. */
async function within<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => (timer = realSetTimeout(() => reject(new Error(`waited 5 s for ${what}`)), 5_000)));
  try {
    return await Promise.race([promise, limit]);
  } finally {
    realClearTimeout(timer);
  }
}

/** A list of calls whose growth can be awaited. */
class Calls<T> {
  readonly list: T[] = [];
  private readonly waiting: Array<{ count: number; resolve: () => void }> = [];

  add(entry: T): void {
    this.list.push(entry);
    for (const waiter of this.waiting.filter((w) => this.list.length >= w.count)) waiter.resolve();
  }

  reached(count: number, what: string): Promise<void> {
    if (this.list.length >= count) return Promise.resolve();
    return within(new Promise<void>((resolve) => this.waiting.push({ count, resolve })), what);
  }
}

/** The lease store as a script: jobs waiting per queue, every call recorded, the answers the test sets. */
class ScriptedLeases implements JobLeaseStore {
  private nextId = 1;
  readonly waiting: ClaimedJob[] = [];
  readonly claims = new Calls<{ requests: ClaimRequest[]; now: number; workerId: string }>();
  readonly heartbeats = new Calls<{ id: string; token: string; lockedUntil: number }>();
  readonly finished = new Calls<{ id: string; token: string; outcome: JobOutcome; now: number; tx: Queryable | undefined }>();
  readonly recovered: number[] = [];
  /** While set, a claim waits for it (after being recorded). */
  claimGate: Promise<void> | null = null;
  /** Claims that fail before any succeeds. */
  claimFailures = 0;
  heartbeatAnswer: (lease: JobLease) => Promise<HeartbeatAnswer> = async () => 'held';
  finishAnswer: (lease: JobLease, outcome: JobOutcome) => Promise<boolean> = async () => true;

  /** A job waiting on `queue`, handed out by the next claim with a slot for it. */
  add(queue: string, payload: unknown = {}, fields: Partial<Pick<ClaimedJob, 'attempt' | 'maxAttempts'>> = {}): ClaimedJob {
    const id = String(this.nextId++);
    const job = { id, token: `token-${id}`, queue, payload, attempt: 1, maxAttempts: 5, ...fields };
    this.waiting.push(job);
    return job;
  }

  async claim(requests: readonly ClaimRequest[], now: Date, workerId: string): Promise<ClaimedJob[]> {
    this.claims.add({ requests: requests.map((r) => ({ ...r })), now: now.getTime(), workerId });
    if (this.claimFailures > 0) {
      this.claimFailures -= 1;
      throw new Error('the database is unreachable');
    }
    if (this.claimGate) await this.claimGate;
    const taken: ClaimedJob[] = [];
    for (const request of requests) {
      const jobs = this.waiting.filter((job) => job.queue === request.queue).slice(0, request.slots);
      for (const job of jobs) this.waiting.splice(this.waiting.indexOf(job), 1);
      taken.push(...jobs);
    }
    return taken;
  }

  heartbeat(lease: JobLease, lockedUntil: Date): Promise<HeartbeatAnswer> {
    this.heartbeats.add({ id: lease.id, token: lease.token, lockedUntil: lockedUntil.getTime() });
    return this.heartbeatAnswer(lease);
  }

  finish(lease: JobLease, outcome: JobOutcome, now: Date, db?: Queryable): Promise<boolean> {
    this.finished.add({ id: lease.id, token: lease.token, outcome, now: now.getTime(), tx: db });
    return this.finishAnswer(lease, outcome);
  }

  async recoverExpired(now: Date): Promise<number> {
    this.recovered.push(now.getTime());
    return 0;
  }

  async pruneFinished(): Promise<number> {
    return 0;
  }
}

class RecordedPeriodic implements PeriodicStore {
  readonly registered: Array<{ jobs: unknown; now: number }> = [];
  readonly claimedDue: Array<{ jobs: unknown; now: number; workerId: string }> = [];

  async register(jobs: ReadonlyArray<{ name: string; intervalMs: number }>, now: Date): Promise<void> {
    this.registered.push({ jobs, now: now.getTime() });
  }

  async claimDue(jobs: ReadonlyArray<{ name: string; queue: string; maxAttempts: number }>, now: Date, workerId: string): Promise<string[]> {
    this.claimedDue.push({ jobs, now: now.getTime(), workerId });
    return [];
  }
}

interface HarnessOptions {
  queues?: QueueDefinition[];
  periodic?: PeriodicDefinition[];
  settings?: Partial<JobRunnerSettings>;
  /** Null: let the runner name itself. */
  workerId?: string | null;
  /** Run timeouts on real (possibly mocked) timers instead of the test clock's. */
  realTimeouts?: boolean;
}

function harness(t: Test, options: HarnessOptions = {}) {
  const clock = testClock();
  const leases = new ScriptedLeases();
  const periodic = new RecordedPeriodic();
  const registry = new JobRegistry();
  for (const queue of options.queues ?? []) registry.addQueue(queue);
  for (const job of options.periodic ?? []) registry.addPeriodic(job);
  const logger = recordingLogger();
  const tx = { query: async () => ({ rows: [], rowCount: 0 }) } as unknown as Transaction;
  const transactions: Transaction[] = [];
  const database = {
    transaction: async <T>(fn: (tx: Transaction) => Promise<T>) => {
      transactions.push(tx);
      return fn(tx);
    },
  } as unknown as Database;
  const scheduled: number[] = [];
  const runner = new JobRunner({
    leases,
    periodic,
    database,
    registry,
    clock,
    random: () => 1,
    logger,
    // drainMs 0: a test's teardown never waits for a handler it left hanging.
    settings: { pollIntervalMs: 60_000, drainMs: 0, ...options.settings },
    ...(options.workerId === null ? {} : { workerId: options.workerId ?? 'w1' }),
    ...(options.realTimeouts
      ? {}
      : {
          schedule: (ms: number, fire: () => void) => {
            scheduled.push(ms);
            return clock.schedule(ms, fire);
          },
        }),
  });
  t.teardown(() => runner.close());
  return { runner, leases, periodic, registry, clock, logger, tx, transactions, scheduled };
}

/**
 * setTimeout, setInterval and performance.now moved by the test: lease renewals, the idle wait
 * between polls and the drain at close.
 */
function mockedTimers(t: Test): { advance(ms: number): void } {
  let now = 0;
  mock.timers.enable({ apis: ['setTimeout', 'setInterval'] });
  const perf = mock.method(performance, 'now', () => now);
  t.teardown(() => {
    perf.mock.restore();
    mock.timers.reset();
  });
  return {
    advance(ms) {
      now += ms;
      mock.timers.tick(ms);
    },
  };
}

/** A handler that runs until its signal aborts, then throws the reason. */
const untilAborted = (job: Job<unknown>) => new Promise<void>((_, reject) => job.signal.addEventListener('abort', () => reject(job.signal.reason)));

const empty = z.object({});
const timeoutLine = "warn a job ran longer than its queue's timeout: its slot goes to the next job, and nothing the run does from now on is recorded";

t.test('a worker without a given id is named after its host and process, with a random suffix', async (t) => {
  const a = harness(t, { workerId: null }).runner;
  const b = harness(t, { workerId: null }).runner;
  const host = hostname().replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  t.match(a.workerId, new RegExp(`^${host}:${process.pid}:[0-9a-f]{6}$`));
  t.not(a.workerId, b.workerId);
});

t.test('a closed worker cannot be started again', async (t) => {
  const { runner } = harness(t);
  runner.start();
  await runner.close();
  runner.start();
  t.equal(runner.claiming, false);
});

t.test('maintenance gives back expired leases at the clock time', async (t) => {
  const { runner, leases, clock } = harness(t);
  clock.advance(7_000);
  await runner.pollOnce();
  t.same(leases.recovered, [clock().getTime()]);
});

t.test('periodic jobs are registered once, then their due ticks are claimed at every poll, as this worker', async (t) => {
  const { runner, periodic, registry, clock } = harness(t, {
    periodic: [definePeriodic({ name: 'test.hourly', everyMs: 3_600_000, run: async () => undefined }), definePeriodic({ name: 'test.often', everyMs: 1_000, run: async () => undefined })],
  });
  const start = clock().getTime();
  await runner.pollOnce();
  clock.advance(1_000);
  await runner.pollOnce();
  t.same(periodic.registered, [
    {
      jobs: [
        { name: 'test.hourly', intervalMs: 3_600_000 },
        { name: 'test.often', intervalMs: 1_000 },
      ],
      now: start,
    },
  ]);
  t.same(periodic.claimedDue, [
    { jobs: registry.periodic(), now: start, workerId: 'w1' },
    { jobs: registry.periodic(), now: start + 1_000, workerId: 'w1' },
  ]);
});

t.test('a worker without periodic jobs never calls the periodic store', async (t) => {
  const { runner, periodic } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty }).handle(async () => undefined)] });
  await runner.pollOnce();
  t.same([periodic.registered, periodic.claimedDue], [[], []]);
});

t.test('a worker that stopped claiming, or closed, claims no periodic ticks but still gives back expired leases', async (t) => {
  const { runner, periodic, leases } = harness(t, { periodic: [definePeriodic({ name: 'test.tick', everyMs: 1_000, run: async () => undefined })] });
  runner.stopClaiming();
  await runner.pollOnce();
  t.same([periodic.registered, periodic.claimedDue, leases.recovered.length], [[], [], 1], 'draining');
  await runner.close();
  await runner.pollOnce();
  t.same([periodic.registered, periodic.claimedDue, leases.recovered.length], [[], [], 2], 'closed');
});

t.test('a claim asks every queue for its free slots, with its lease, at the clock time, as this worker', async (t) => {
  const { runner, leases, clock } = harness(t, {
    queues: [
      defineQueue({ name: 'test.a', payload: empty, concurrency: 3, leaseMs: 1_234 }).handle(async () => undefined),
      defineQueue({ name: 'test.b', payload: empty }).handle(async () => undefined),
    ],
  });
  clock.advance(5_000);
  t.equal(await runner.pollOnce(), 0);
  t.same(leases.claims.list, [
    {
      requests: [
        { queue: 'test.a', slots: 3, leaseMs: 1_234 },
        { queue: 'test.b', slots: 1, leaseMs: 30_000 },
      ],
      now: clock().getTime(),
      workerId: 'w1',
    },
  ]);
});

t.test("a queue's free slots are its concurrency less its runs going: taken by a claim, given back one by one as runs end", async (t) => {
  const gates = [deferred(), deferred()];
  const { runner, leases } = harness(t, {
    queues: [defineQueue({ name: 'test.a', payload: z.object({ n: z.number() }), concurrency: 3 }).handle(async (job) => gates[job.payload.n]!.promise)],
  });
  leases.add('test.a', { n: 0 });
  leases.add('test.a', { n: 1 });
  t.equal(await runner.pollOnce(), 2);
  await runner.pollOnce();
  gates[0]!.resolve();
  await leases.finished.reached(1, 'the first run to end');
  await flush();
  await runner.pollOnce();
  t.same(
    leases.claims.list.map((claim) => claim.requests[0]?.slots),
    [3, 1, 2],
  );
  gates[1]!.resolve();
  await runner.settled();
});

t.test('a queue with no free slot is left out of the claim, and with none free anywhere the store is not asked', async (t) => {
  const { runner, leases } = harness(t, {
    queues: [defineQueue({ name: 'test.a', payload: empty }).handle(untilAborted), defineQueue({ name: 'test.b', payload: empty }).handle(untilAborted)],
  });
  leases.add('test.a');
  t.equal(await runner.pollOnce(), 1);
  leases.add('test.b');
  t.equal(await runner.pollOnce(), 1);
  t.equal(await runner.pollOnce(), 0);
  t.same(
    leases.claims.list.map((claim) => claim.requests.map((r) => r.queue)),
    [['test.a', 'test.b'], ['test.b']],
  );
});

t.test('a worker that stopped claiming, or closed, asks the store for no jobs', async (t) => {
  const { runner, leases } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty }).handle(async () => undefined)] });
  leases.add('test.a');
  runner.stopClaiming();
  t.equal(await runner.pollOnce(), 0);
  await runner.close();
  t.equal(await runner.pollOnce(), 0);
  t.same(leases.claims.list, []);
});

t.test('claims are made one at a time: the next waits until the one in flight is answered', async (t) => {
  const { runner, leases } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty }).handle(async () => undefined)] });
  const gate = deferred();
  leases.claimGate = gate.promise;
  const first = runner.pollOnce();
  const second = runner.pollOnce();
  await leases.claims.reached(1, 'the first claim');
  await flush();
  t.equal(leases.claims.list.length, 1, 'the second waits');
  gate.resolve();
  await Promise.all([first, second]);
  t.equal(leases.claims.list.length, 2);
});

t.test('a claim answered after shutdown began hands its jobs straight back, unrun', async (t) => {
  const ran: string[] = [];
  const { runner, leases } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty, concurrency: 2 }).handle(async (job) => void ran.push(job.id))] });
  const a = leases.add('test.a');
  const b = leases.add('test.a');
  const gate = deferred();
  leases.claimGate = gate.promise;
  const polled = runner.pollOnce();
  await leases.claims.reached(1, 'the claim');
  runner.stopClaiming();
  gate.resolve();
  t.equal(await polled, 0, 'none started');
  t.same(ran, []);
  t.same(
    leases.finished.list.map((f) => [f.id, f.token, f.outcome]),
    [
      [a.id, a.token, { state: 'released' }],
      [b.id, b.token, { state: 'released' }],
    ],
  );
  t.equal(runner.running, 0);
});

t.test('a job that cannot be handed back at shutdown does not keep the others from being handed back', async (t) => {
  const { runner, leases } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty, concurrency: 2 }).handle(async () => undefined)] });
  leases.add('test.a');
  leases.add('test.a');
  leases.finishAnswer = async (lease) => {
    if (lease.id === '1') throw new Error('the database is unreachable');
    return true;
  };
  const gate = deferred();
  leases.claimGate = gate.promise;
  const polled = runner.pollOnce();
  await leases.claims.reached(1, 'the claim');
  runner.stopClaiming();
  gate.resolve();
  t.equal(await polled, 0);
  t.same(
    leases.finished.list.map((f) => f.id),
    ['1', '2'],
  );
});

t.test("a handler sees the job's id, queue, attempt, maxAttempts and payload as the schema parsed it", async (t) => {
  let seen: Job<unknown> | undefined;
  const { runner, leases } = harness(t, {
    queues: [defineQueue({ name: 'test.a', payload: z.object({ n: z.number(), tag: z.string().default('none') }) }).handle(async (job) => void (seen = job))],
  });
  const job = leases.add('test.a', { n: 1 }, { attempt: 2, maxAttempts: 3 });
  await runner.runUntilIdle();
  t.match(seen, { id: job.id, queue: 'test.a', payload: { n: 1, tag: 'none' }, attempt: 2, maxAttempts: 3 });
  t.equal(seen?.signal.aborted, false);
});

t.test('a run that returns is written succeeded, under its lease, at the clock time', async (t) => {
  const { runner, leases, clock } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty }).handle(async () => clock.advance(250))] });
  const job = leases.add('test.a');
  await runner.runUntilIdle();
  t.same(leases.finished.list, [{ id: job.id, token: job.token, outcome: { state: 'succeeded' }, now: clock().getTime(), tx: undefined }]);
});

t.test('complete writes the success in its own transaction, and nothing more is written when the handler returns', async (t) => {
  let given: Transaction | undefined;
  const { runner, leases, clock, tx, transactions, logger } = harness(t, {
    queues: [
      defineQueue({ name: 'test.a', payload: empty }).handle(async (job) => {
        const answer = await job.complete(async (inside) => {
          given = inside;
          return 'done';
        });
        t.equal(answer, 'done', 'complete answers what fn returned');
      }),
    ],
  });
  const job = leases.add('test.a');
  await runner.runUntilIdle();
  t.equal(given, tx, 'fn runs in the transaction');
  t.same(transactions.length, 1);
  t.same(leases.finished.list, [{ id: job.id, token: job.token, outcome: { state: 'succeeded' }, now: clock().getTime(), tx }]);
  t.same(logger.lines, []);
});

t.test('a run the worker itself fails on is logged, and its slot freed', async (t) => {
  const throwing = z.object({}).superRefine(() => {
    throw new Error('a schema with a bug');
  });
  const { runner, leases, logger } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: throwing }).handle(async () => undefined)] });
  const job = leases.add('test.a');
  await runner.runUntilIdle();
  t.same(logger.lines, ['error a job run ended unexpectedly; it runs again when its lease expires']);
  t.match(logger.objects[0], { job: job.id, err: { message: 'a schema with a bug' } });
  t.equal(runner.running, 0);
});

t.test('an outcome the store cannot record is logged, and the slot freed', async (t) => {
  const { runner, leases, logger } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty }).handle(async () => undefined)] });
  const job = leases.add('test.a');
  leases.finishAnswer = async () => {
    throw new Error('the database is unreachable');
  };
  await runner.runUntilIdle();
  t.same(logger.lines, ['error could not record how a job ended; it runs again when its lease expires']);
  t.match(logger.objects[0], { job: job.id });
  t.equal(runner.running, 0);
});

t.test("interrupt aborts this worker's run with 'cancelled', and does nothing for a job it does not run", async (t) => {
  const { runner, leases } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty }).handle(untilAborted)] });
  const job = leases.add('test.a');
  await runner.pollOnce();
  runner.interrupt('elsewhere');
  t.equal(runner.running, 1, 'a job of another worker: nothing happens');
  runner.interrupt(job.id);
  await runner.settled();
  t.same(
    leases.finished.list.map((f) => f.outcome),
    [{ state: 'cancelled', error: 'JobInterrupted: the job was cancelled' }],
  );
});

t.test('a payload that no longer fits its schema fails the job, naming the nested field', async (t) => {
  let ran = false;
  const { runner, leases } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: z.object({ order: z.object({ id: z.number() }) }) }).handle(async () => void (ran = true))] });
  leases.add('test.a', { order: { id: 'x' } });
  await runner.runUntilIdle();
  t.equal(ran, false);
  t.same(
    leases.finished.list.map((f) => f.outcome),
    [{ state: 'failed', error: "the payload no longer matches queue test.a's schema at 'order.id': Invalid input: expected number, received string" }],
  );
});

t.test('a handler that throws after completing: the warning names the job, its queue and the error', async (t) => {
  const { runner, leases, logger } = harness(t, {
    queues: [
      defineQueue({ name: 'test.a', payload: empty }).handle(async (job) => {
        await job.complete(async () => undefined);
        throw new Error('after the fact');
      }),
    ],
  });
  const job = leases.add('test.a');
  await runner.runUntilIdle();
  t.same(logger.lines, ['warn job handler threw after completing; the job stays succeeded']);
  t.match(logger.objects[0], { job: job.id, queue: 'test.a', err: { message: 'after the fact' } });
});

t.test('an outcome refused because the lease is gone is logged naming the job and its queue', async (t) => {
  const { runner, leases, logger } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty }).handle(async () => undefined)] });
  const job = leases.add('test.a');
  leases.finishAnswer = async () => false;
  await runner.runUntilIdle();
  t.same(logger.lines, ['warn a job finished after its lease was lost; another worker owns it']);
  t.same(logger.objects[0], { job: job.id, queue: 'test.a' });
});

t.test("runUntilIdle polls again after waiting for runs the worker's loop started: they may have enqueued more", async (t) => {
  mockedTimers(t);
  const first = deferred();
  const ran: number[] = [];
  const { runner, leases } = harness(t, {
    queues: [
      defineQueue({ name: 'test.a', payload: z.object({ n: z.number() }), concurrency: 2 }).handle(async (job) => {
        if (job.payload.n === 1) {
          await first.promise;
          leases.add('test.a', { n: 2 });
        }
        ran.push(job.payload.n);
      }),
    ],
  });
  leases.add('test.a', { n: 1 });
  runner.start();
  await leases.claims.reached(1, "the loop's claim");
  const idle = runner.runUntilIdle();
  await flush();
  first.resolve();
  await idle;
  t.same(ran, [1, 2]);
});

t.test('lease renewals', async (t) => {
  t.test("a running job's lease is renewed every third of its length, until the clock time plus the lease", async (t) => {
    const timers = mockedTimers(t);
    const { runner, leases, clock } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty, leaseMs: 301 }).handle(untilAborted)] });
    const job = leases.add('test.a');
    await runner.pollOnce();
    clock.advance(7_000);
    timers.advance(99);
    t.equal(leases.heartbeats.list.length, 0, 'not before a third');
    timers.advance(1);
    t.same(leases.heartbeats.list, [{ id: job.id, token: job.token, lockedUntil: clock().getTime() + 301 }]);
    await flush();
    timers.advance(100);
    t.equal(leases.heartbeats.list.length, 2);
  });

  t.test('renewals come no more often than every 10 ms', async (t) => {
    const timers = mockedTimers(t);
    const { runner, leases } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty, leaseMs: 15 }).handle(untilAborted)] });
    leases.add('test.a');
    await runner.pollOnce();
    timers.advance(9);
    t.equal(leases.heartbeats.list.length, 0);
    timers.advance(1);
    t.equal(leases.heartbeats.list.length, 1);
  });

  t.test('a renewal still waiting for the store is not started again', async (t) => {
    const timers = mockedTimers(t);
    const { runner, leases } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty, leaseMs: 300 }).handle(untilAborted)] });
    leases.add('test.a');
    const answer = deferred<HeartbeatAnswer>();
    leases.heartbeatAnswer = () => answer.promise;
    await runner.pollOnce();
    timers.advance(100);
    timers.advance(100);
    t.equal(leases.heartbeats.list.length, 1);
    answer.resolve('held');
    await flush();
    timers.advance(100);
    t.equal(leases.heartbeats.list.length, 2, 'the next period renews again');
  });

  t.test('a renewal that fails is logged and tried again at the next period', async (t) => {
    const timers = mockedTimers(t);
    const { runner, leases, logger } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty, leaseMs: 300 }).handle(untilAborted)] });
    const job = leases.add('test.a');
    leases.heartbeatAnswer = async () => {
      throw new Error('the database is unreachable');
    };
    await runner.pollOnce();
    timers.advance(100);
    await flush();
    t.same(logger.lines, ['warn could not renew a job lease; will try again']);
    t.match(logger.objects[0], { job: job.id, err: { message: 'the database is unreachable' } });
    timers.advance(100);
    t.equal(leases.heartbeats.list.length, 2);
  });

  t.test("a renewal that finds the lease lost aborts the run with 'lease_lost'; the run writes nothing and renews no more", async (t) => {
    const timers = mockedTimers(t);
    let reason: unknown;
    const { runner, leases } = harness(t, {
      queues: [
        defineQueue({ name: 'test.a', payload: empty, leaseMs: 300 }).handle(async (job) => {
          await untilAborted(job).catch((error: unknown) => {
            reason = error;
            throw error;
          });
        }),
      ],
    });
    leases.add('test.a');
    leases.heartbeatAnswer = async () => 'lost';
    await runner.pollOnce();
    timers.advance(100);
    await runner.settled();
    t.ok(reason instanceof JobInterrupted && reason.reason === 'lease_lost');
    t.same(leases.finished.list, []);
    t.equal(leases.heartbeats.list.length, 1);
  });

  t.test('after a renewal found the lease lost, complete refuses without opening a transaction', async (t) => {
    const timers = mockedTimers(t);
    const late = deferred();
    let refused: unknown;
    const { runner, leases, transactions } = harness(t, {
      queues: [
        defineQueue({ name: 'test.a', payload: empty, leaseMs: 300 }).handle(async (job) => {
          await late.promise;
          refused = await job.complete(async () => undefined).catch((error: unknown) => error);
        }),
      ],
    });
    leases.add('test.a');
    leases.heartbeatAnswer = async () => 'lost';
    await runner.pollOnce();
    timers.advance(100);
    await flush();
    late.resolve();
    await runner.settled();
    t.ok(refused instanceof JobInterrupted && refused.reason === 'lease_lost');
    t.same([transactions.length, leases.finished.list], [0, []]);
  });

  t.test("a renewal that finds the job cancelled aborts the run with 'cancelled', and the job ends cancelled", async (t) => {
    const timers = mockedTimers(t);
    const { runner, leases } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty, leaseMs: 300 }).handle(untilAborted)] });
    leases.add('test.a');
    leases.heartbeatAnswer = async () => 'cancel_requested';
    await runner.pollOnce();
    timers.advance(100);
    await runner.settled();
    t.same(
      leases.finished.list.map((f) => f.outcome),
      [{ state: 'cancelled', error: 'JobInterrupted: the job was cancelled' }],
    );
  });

  t.test('a run that completed renews its lease no more', async (t) => {
    const timers = mockedTimers(t);
    const cleanup = deferred();
    let aborted = false;
    const { runner, leases } = harness(t, {
      queues: [
        defineQueue({ name: 'test.a', payload: empty, leaseMs: 300 }).handle(async (job) => {
          await job.complete(async () => undefined);
          job.signal.addEventListener('abort', () => void (aborted = true));
          await cleanup.promise;
        }),
      ],
    });
    leases.add('test.a');
    leases.heartbeatAnswer = async () => 'lost';
    await runner.pollOnce();
    await leases.finished.reached(1, 'the completion');
    await flush();
    timers.advance(100);
    await flush();
    t.same([leases.heartbeats.list.length, aborted], [0, false]);
    cleanup.resolve();
    await runner.settled();
  });

  t.test('a run that ended renews its lease no more', async (t) => {
    const timers = mockedTimers(t);
    const { runner, leases } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty, leaseMs: 300 }).handle(async () => undefined)] });
    leases.add('test.a');
    await runner.runUntilIdle();
    timers.advance(100);
    t.equal(leases.heartbeats.list.length, 0);
  });
});

t.test('run timeouts', async (t) => {
  t.test("a run is timed on its queue's timeoutMs, and only when the queue has one", async (t) => {
    const { runner, leases, scheduled } = harness(t, {
      queues: [
        defineQueue({ name: 'test.timed', payload: empty, timeoutMs: 5_000 }).handle(async () => undefined),
        defineQueue({ name: 'test.untimed', payload: empty }).handle(async () => undefined),
      ],
    });
    leases.add('test.untimed');
    await runner.runUntilIdle();
    t.same(scheduled, [], 'none for a queue without timeoutMs');
    leases.add('test.timed');
    await runner.runUntilIdle();
    t.same(scheduled, [5_000]);
  });

  t.test("the timeout's log line names the job, its queue, its attempt and the timeout", async (t) => {
    const { runner, leases, clock, logger } = harness(t, { queues: [defineQueue({ name: 'test.timed', payload: empty, timeoutMs: 5_000 }).handle(untilAborted)] });
    const job = leases.add('test.timed', {}, { attempt: 3 });
    await runner.pollOnce();
    clock.advance(5_000);
    await runner.settled();
    t.same(logger.lines, [timeoutLine]);
    t.same(logger.objects[0], { job: job.id, queue: 'test.timed', attempt: 3, timeoutMs: 5_000 });
  });

  t.test('a run that completed and then overstays its timeout writes nothing more, and frees its slot', async (t) => {
    const { runner, leases, clock } = harness(t, {
      queues: [
        defineQueue({ name: 'test.timed', payload: empty, timeoutMs: 5_000 }).handle(async (job) => {
          await job.complete(async () => undefined);
          await untilAborted(job);
        }),
      ],
    });
    leases.add('test.timed');
    await runner.pollOnce();
    await leases.finished.reached(1, 'the completion');
    await flush();
    clock.advance(5_000);
    await runner.settled();
    t.same(
      leases.finished.list.map((f) => f.outcome),
      [{ state: 'succeeded' }],
    );
    t.equal(runner.running, 0);
  });

  t.test('a run asked to cancel that then overstays its timeout ends cancelled, saying it timed out', async (t) => {
    const timers = mockedTimers(t);
    const { runner, leases, clock } = harness(t, {
      queues: [defineQueue({ name: 'test.timed', payload: empty, timeoutMs: 5_000, leaseMs: 300 }).handle(async () => new Promise(() => undefined))],
    });
    leases.add('test.timed');
    leases.heartbeatAnswer = async () => 'cancel_requested';
    await runner.pollOnce();
    timers.advance(100);
    await flush();
    clock.advance(5_000);
    await runner.settled();
    t.same(
      leases.finished.list.map((f) => f.outcome),
      [{ state: 'cancelled', error: "timed out: the run took longer than queue test.timed's timeoutMs (5000 ms)" }],
    );
  });

  for (const ending of ['returns', 'throws'] as const) {
    t.test(`the time an outcome takes to write is not the run's: a run that ${ending} is not timed out while it is written`, async (t) => {
      const { runner, leases, clock, logger } = harness(t, {
        queues: [
          defineQueue({ name: 'test.timed', payload: empty, timeoutMs: 5_000 }).handle(async () => {
            if (ending === 'throws') throw new Error('upstream said no');
          }),
        ],
      });
      leases.add('test.timed');
      const written = deferred<boolean>();
      leases.finishAnswer = () => written.promise;
      await runner.pollOnce();
      await leases.finished.reached(1, 'the outcome being written');
      clock.advance(5_000);
      written.resolve(true);
      await runner.settled();
      t.same(logger.lines, []);
      t.same(
        leases.finished.list.map((f) => f.outcome.state),
        [ending === 'returns' ? 'succeeded' : 'retry'],
      );
    });
  }

  t.test("a timed-out run's slot is freed once: its handler ending later frees no second one", async (t) => {
    const hung = deferred();
    const { runner, leases, clock } = harness(t, {
      queues: [defineQueue({ name: 'test.timed', payload: z.object({ n: z.number() }), timeoutMs: 5_000 }).handle(async (job) => (job.payload.n === 1 ? hung.promise : untilAborted(job)))],
    });
    leases.add('test.timed', { n: 1 });
    leases.add('test.timed', { n: 2 });
    leases.add('test.timed', { n: 3 });
    t.equal(await runner.pollOnce(), 1);
    clock.advance(5_000);
    t.equal(await runner.pollOnce(), 1, 'the freed slot takes the second job');
    hung.resolve();
    await flush();
    t.equal(await runner.pollOnce(), 0, 'the first handler ending frees nothing more');
    t.equal(runner.running, 1);
  });

  /** A run past its 5 s timeout whose hung handler freed the slot, its outcome not yet written. */
  async function timedOutRunBeingWritten(t: Parameters<typeof harness>[0]) {
    const { runner, leases, clock } = harness(t, { queues: [defineQueue({ name: 'test.timed', payload: empty, timeoutMs: 5_000 }).handle(async () => new Promise(() => undefined))] });
    leases.add('test.timed');
    const written = deferred<boolean>();
    leases.finishAnswer = () => written.promise;
    await runner.pollOnce();
    clock.advance(5_000);
    return { runner, leases, written };
  }

  t.test("settled waits for a timed-out run's outcome still being written", async (t) => {
    const { runner, written } = await timedOutRunBeingWritten(t);
    let settled = false;
    const done = runner.settled().then(() => void (settled = true));
    await flush();
    t.same([runner.running, settled], [0, false], 'the slot is free, the outcome not yet written');
    written.resolve(true);
    await done;
    t.equal(settled, true);
  });

  t.test("close waits for a timed-out run's outcome still being written", async (t) => {
    const { runner, leases, written } = await timedOutRunBeingWritten(t);
    let closed = false;
    const done = runner.close().then(() => void (closed = true));
    await flush();
    t.equal(closed, false);
    written.resolve(true);
    await done;
    t.same(
      leases.finished.list.map((f) => f.outcome.state),
      ['retry'],
    );
  });

  t.test('a timed-out run whose outcome finds the lease gone logs only the timeout', async (t) => {
    const { runner, leases, clock, logger } = harness(t, { queues: [defineQueue({ name: 'test.timed', payload: empty, timeoutMs: 5_000 }).handle(untilAborted)] });
    leases.add('test.timed');
    leases.finishAnswer = async () => false;
    await runner.pollOnce();
    clock.advance(5_000);
    await runner.settled();
    t.same(logger.lines, [timeoutLine]);
  });

  t.test('without a schedule of its own, a run times out on a real timer', async (t) => {
    const timers = mockedTimers(t);
    const { runner, leases, logger } = harness(t, {
      realTimeouts: true,
      queues: [defineQueue({ name: 'test.timed', payload: empty, timeoutMs: 5_000, leaseMs: 300_000 }).handle(untilAborted)],
    });
    leases.add('test.timed');
    await runner.pollOnce();
    timers.advance(4_999);
    t.same(logger.lines, []);
    timers.advance(1);
    await runner.settled();
    t.same(logger.lines, [timeoutLine]);
  });

  t.test("without a schedule of its own, a run's real timer is cancelled when the run ends", async (t) => {
    const timers = mockedTimers(t);
    const { runner, leases, logger } = harness(t, {
      realTimeouts: true,
      queues: [defineQueue({ name: 'test.timed', payload: empty, timeoutMs: 5_000, leaseMs: 300_000 }).handle(async () => undefined)],
    });
    leases.add('test.timed');
    await runner.runUntilIdle();
    timers.advance(5_000);
    await runner.settled();
    t.same(logger.lines, []);
    t.same(
      leases.finished.list.map((f) => f.outcome.state),
      ['succeeded'],
    );
  });
});

t.test('the loop', async (t) => {
  t.test('an idle worker polls again after pollIntervalMs, not before, with maintenance, and logs nothing', async (t) => {
    const timers = mockedTimers(t);
    const { runner, leases, logger } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty }).handle(async () => undefined)] });
    runner.start();
    await leases.claims.reached(1, 'the first poll');
    await flush();
    timers.advance(59_999);
    await flush();
    t.equal(leases.claims.list.length, 1, 'not before the interval');
    timers.advance(1);
    await leases.claims.reached(2, 'the second poll');
    t.equal(leases.recovered.length, 2, 'maintenance with each poll');
    t.same(logger.lines, [], 'polls that succeed from the start say nothing');
  });

  t.test('a wake makes an idle worker claim at once, without maintenance before its interval', async (t) => {
    mockedTimers(t);
    const { runner, leases } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty }).handle(async () => undefined)] });
    runner.start();
    await leases.claims.reached(1, 'the first poll');
    await flush();
    runner.wake('test.a');
    await leases.claims.reached(2, 'the claim after the wake');
    t.equal(leases.recovered.length, 1);
  });

  t.test('a wake that comes while a claim is in flight makes the worker claim again right after it', async (t) => {
    mockedTimers(t);
    const { runner, leases } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty }).handle(async () => undefined)] });
    const gate = deferred();
    leases.claimGate = gate.promise;
    runner.start();
    await leases.claims.reached(1, 'the first claim');
    leases.claimGate = null;
    runner.wake('test.a');
    gate.resolve();
    await leases.claims.reached(2, 'the claim after the wake');
  });

  t.test('a slot freed while the loop idles makes the worker claim at once', async (t) => {
    mockedTimers(t);
    const first = deferred();
    const { runner, leases } = harness(t, {
      queues: [defineQueue({ name: 'test.a', payload: z.object({ n: z.number() }) }).handle(async (job) => (job.payload.n === 1 ? first.promise : undefined))],
    });
    leases.add('test.a', { n: 1 });
    leases.add('test.a', { n: 2 });
    runner.start();
    await leases.claims.reached(1, 'the first claim');
    await flush();
    t.equal(leases.claims.list.length, 1, 'no slot left, so no claim');
    first.resolve();
    await leases.claims.reached(2, 'the claim for the freed slot');
  });

  t.test('a slot freed on a queue that had room asks for no claim: its last one took every due job', async (t) => {
    mockedTimers(t);
    const { runner, leases } = harness(t, {
      queues: [defineQueue({ name: 'test.a', payload: empty, concurrency: 2 }).handle(async () => undefined)],
    });
    leases.add('test.a');
    runner.start();
    await leases.claims.reached(1, 'the first claim');
    await runner.settled();
    await flush();
    t.equal(leases.finished.list.length, 1, 'the job ran');
    t.equal(leases.claims.list.length, 1, 'no claim for the freed slot');
    runner.wake('test.a');
    await leases.claims.reached(2, 'a wake (an enqueue) still claims at once');
  });

  t.test('a claim that filled every slot a queue asked for is followed at once by another', async (t) => {
    mockedTimers(t);
    const { runner, leases } = harness(t, {
      queues: [defineQueue({ name: 'test.a', payload: empty }).handle(untilAborted), defineQueue({ name: 'test.b', payload: empty }).handle(untilAborted)],
    });
    leases.add('test.a');
    runner.start();
    await leases.claims.reached(2, 'a second claim');
    t.same(leases.claims.list[1]?.requests, [{ queue: 'test.b', slots: 1, leaseMs: 30_000 }]);
  });

  t.test('a failing poll is retried every poll interval, logged once, and so is the recovery', async (t) => {
    const timers = mockedTimers(t);
    const { runner, leases, logger } = harness(t, { settings: { pollIntervalMs: 1_000 }, queues: [defineQueue({ name: 'test.a', payload: empty }).handle(async () => undefined)] });
    leases.claimFailures = 3;
    runner.start();
    for (let poll = 1; poll <= 5; poll += 1) {
      await leases.claims.reached(poll, `poll ${poll}`);
      await flush();
      t.equal(leases.claims.list.length, poll, 'a failed poll is retried after the poll interval, not at once');
      timers.advance(1_000);
    }
    t.same(logger.lines, ['error job worker could not poll the queue; retrying every poll interval', 'warn job worker reaches the queue again']);
    t.match(logger.objects[0], { err: { message: 'the database is unreachable' } });
  });

  t.test('close wakes an idle loop at once', async (t) => {
    mockedTimers(t);
    const { runner, leases } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty }).handle(async () => undefined)] });
    runner.start();
    await leases.claims.reached(1, 'the first poll');
    await flush();
    await within(runner.close(), 'close');
    t.equal(runner.claiming, false);
  });

  t.test('close during a claim in flight ends the loop without waiting for the poll interval', async (t) => {
    mockedTimers(t);
    const { runner, leases } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty }).handle(async () => undefined)] });
    const gate = deferred();
    leases.claimGate = gate.promise;
    runner.start();
    await leases.claims.reached(1, 'the claim');
    const closed = runner.close();
    gate.resolve();
    await within(closed, 'close');
    t.equal(leases.claims.list.length, 1);
  });
});

t.test('shutdown', async (t) => {
  t.test('close lets a running job finish for drainMs, then aborts it and gives it back, naming it in the log', async (t) => {
    const timers = mockedTimers(t);
    let reason: unknown;
    const { runner, leases, logger } = harness(t, {
      settings: { drainMs: 60_000 },
      queues: [defineQueue({ name: 'test.a', payload: empty }).handle(async (job) => untilAborted(job).catch((error: unknown) => void (reason = error)))],
    });
    const job = leases.add('test.a');
    await runner.pollOnce();
    const closed = runner.close();
    await flush();
    timers.advance(59_999);
    await flush();
    t.same([leases.finished.list, reason], [[], undefined], 'still draining');
    timers.advance(1);
    await within(closed, 'close');
    t.ok(reason instanceof JobInterrupted && reason.reason === 'shutdown');
    t.same(
      leases.finished.list.map((f) => [f.id, f.outcome]),
      [[job.id, { state: 'released' }]],
    );
    t.same(logger.lines, ['warn jobs still running at shutdown were given back to the queue']);
    t.same(logger.objects[0], { jobs: [job.id] });
  });

  t.test('the drain is counted from when claiming stopped, not from close', async (t) => {
    const timers = mockedTimers(t);
    const { runner, leases } = harness(t, { settings: { drainMs: 60_000 }, queues: [defineQueue({ name: 'test.a', payload: empty }).handle(untilAborted)] });
    leases.add('test.a');
    await runner.pollOnce();
    runner.stopClaiming();
    timers.advance(30_000);
    const closed = runner.close();
    await flush();
    timers.advance(30_000);
    await within(closed, 'close');
    t.same(
      leases.finished.list.map((f) => f.outcome.state),
      ['released'],
    );
  });

  t.test('giving back a job whose lease was already lost logs no lost-lease warning', async (t) => {
    const { runner, leases, logger } = harness(t, { queues: [defineQueue({ name: 'test.a', payload: empty }).handle(untilAborted)] });
    leases.add('test.a');
    leases.finishAnswer = async () => false;
    await runner.pollOnce();
    await runner.close();
    t.same(logger.lines, ['warn jobs still running at shutdown were given back to the queue']);
  });
});

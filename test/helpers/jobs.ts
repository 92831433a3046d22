import { SqlEventStore } from '../../adapters/sql/event-store.ts';
import { SqlJobStore, SqlPeriodicStore } from '../../adapters/sql/job-store.ts';
import { coreMigrations } from '../../adapters/sql/core-migrations.ts';
import { runMigrations } from '../../adapters/sql/migrator.ts';
import { DomainEvents } from '../../core/events/domain-events.ts';
import { JobQueue } from '../../core/jobs/job-queue.ts';
import { JobRegistry } from '../../core/jobs/job-registry.ts';
import { type JobRunnerDeps, JobRunner, type JobRunnerSettings, type ScheduleTimer } from '../../core/jobs/job-runner.ts';
import type { Database } from '../../core/ports/database.ts';

/** A clock tests move by hand: time decides leases, retries, periodic ticks and run timeouts. */
export interface TestClock {
  (): Date;
  /** Moves time forward, firing (at once, in due order) what was scheduled up to the new time. */
  advance(ms: number): void;
  /** A timer on this clock, for JobRunner's `schedule`: fires when advance() passes its time. */
  schedule: ScheduleTimer;
}

export function testClock(start = '2026-03-02T10:00:00.000Z'): TestClock {
  let now = Date.parse(start);
  let timers: Array<{ at: number; fire: () => void }> = [];
  const clock = (() => new Date(now)) as TestClock;
  clock.advance = (ms) => {
    now += ms;
    const due = timers.filter((timer) => timer.at <= now).sort((a, b) => a.at - b.at);
    timers = timers.filter((timer) => timer.at > now);
    for (const timer of due) timer.fire();
  };
  clock.schedule = (ms, fire) => {
    const timer = { at: now + ms, fire };
    timers.push(timer);
    return () => {
      timers = timers.filter((t) => t !== timer);
    };
  };
  return clock;
}

export const quietLogger = { warn: () => undefined, error: () => undefined };

/**
 * A worker's log, kept: each line as its level and message (objects first, as pino takes them),
 * and beside it, at the same index, the line's object (undefined for none).
 */
export function recordingLogger(): { lines: string[]; objects: unknown[]; warn(...args: unknown[]): void; error(...args: unknown[]): void } {
  const lines: string[] = [];
  const objects: unknown[] = [];
  const record = (level: string, args: unknown[]) => {
    lines.push(`${level} ${String(args.find((arg) => typeof arg === 'string'))}`);
    objects.push(args.find((arg) => typeof arg === 'object' && arg !== null));
  };
  return {
    lines,
    objects,
    warn: (...args) => record('warn', args),
    error: (...args) => record('error', args),
  };
}

export interface JobKit {
  store: SqlJobStore;
  /** What producers see (enqueue checks a handler exists); runners get this one unless given their own. */
  registry: JobRegistry;
  jobs: JobQueue;
  events: DomainEvents;
  /** A worker on the same database, as another replica would be. */
  runner(options?: { registry?: JobRegistry; workerId?: string; settings?: Partial<JobRunnerSettings>; database?: Database; logger?: JobRunnerDeps['logger'] }): JobRunner;
}

/** The queue and the event outbox over a migrated database, with workers made on demand. */
/** A testClock, or a clock of the test's own (runs then time out on real timers). */
type KitClock = (() => Date) & { schedule?: ScheduleTimer };

export async function jobKit(db: Database, options: { clock: KitClock; random?: () => number }): Promise<JobKit> {
  await runMigrations(db, coreMigrations);
  const store = new SqlJobStore(db);
  const registry = new JobRegistry();
  const runners: JobRunner[] = [];
  const jobs = new JobQueue({
    store,
    database: db,
    registry,
    clock: options.clock,
    workers: {
      wake: (queue) => {
        for (const r of runners) r.wake(queue);
      },
      interrupt: (id) => {
        for (const r of runners) r.interrupt(id);
      },
    },
  });
  const events = new DomainEvents({ store: new SqlEventStore(db), jobs, registry, clock: options.clock });
  return {
    store,
    registry,
    jobs,
    events,
    runner(runnerOptions = {}) {
      const database = runnerOptions.database ?? db;
      const runner = new JobRunner({
        leases: database === db ? store : new SqlJobStore(database),
        periodic: new SqlPeriodicStore(database),
        database,
        registry: runnerOptions.registry ?? registry,
        clock: options.clock,
        ...(options.clock.schedule ? { schedule: options.clock.schedule } : {}),
        random: options.random ?? (() => 1),
        logger: runnerOptions.logger ?? quietLogger,
        settings: { pollIntervalMs: 20, drainMs: 10_000, ...runnerOptions.settings },
        ...(runnerOptions.workerId ? { workerId: runnerOptions.workerId } : {}),
      });
      runners.push(runner);
      return runner;
    },
  };
}

export function deferred<T = void>(): { promise: Promise<T>; resolve(value: T): void; reject(error: unknown): void } {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

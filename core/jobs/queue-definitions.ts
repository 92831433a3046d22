import type { z } from 'zod';
import type { Transaction } from '../ports/database.ts';

/**
 * What plugins declare to use the durable job queue. A queue is a name and a zod schema for its
 * payload (checked when a job is enqueued and again when it runs), plus how its jobs are run:
 *
 *   export const deliveries = defineQueue({ name: 'webhooks.deliver', payload: z.object({ id: z.uuid() }), maxAttempts: 10 });
 *   queues: (ctx) => [deliveries.handle(async (job) => { … })],
 *   await ctx.container.resolve(Tokens.Jobs).enqueue(deliveries, { id }, { tx });
 *
 * Delivery is at least once: a job runs again when its worker died or lost its lease. A handler
 * that writes to the database gets exactly-once effects by writing through `job.complete(fn)`.
 */
export interface QueueSettings {
  /** Jobs of this queue one process runs at the same time. */
  readonly concurrency: number;
  /** Runs before the job is failed for good; a job may override it when enqueued. */
  readonly maxAttempts: number;
  /** How long a claim lasts without renewal; the worker renews it every third of that. */
  readonly leaseMs: number;
  /** Retry delays: full jitter under baseMs * 2^(attempt-1), at most maxMs (see retryDelayMs). */
  readonly backoff: { readonly baseMs: number; readonly maxMs: number };
  /**
   * The longest one run may take (absent: no limit). At it the run's signal aborts with
   * JobInterrupted('timeout'), the run counts as a failed attempt, and the worker's slot is freed
   * even if the handler ignores the signal: whatever the handler does afterwards writes nothing.
   */
  readonly timeoutMs?: number;
}

export const DEFAULT_QUEUE_SETTINGS: QueueSettings = {
  concurrency: 1,
  maxAttempts: 5,
  leaseMs: 30_000,
  backoff: { baseMs: 1_000, maxMs: 300_000 },
};

export interface QueueSpec<S extends z.ZodType = z.ZodType> extends QueueSettings {
  readonly name: string;
  readonly payload: S;
  /** The queue with its handler, for a plugin's `queues()`. */
  handle(run: (job: Job<z.output<S>>) => Promise<void>): QueueDefinition;
}

export interface QueueDefinition {
  readonly spec: QueueSpec;
  run(job: Job<unknown>): Promise<void>;
}

/** One run of one job, as its handler sees it. */
export interface Job<P> {
  readonly id: string;
  readonly queue: string;
  readonly payload: P;
  /** 1 on the first run. */
  readonly attempt: number;
  readonly maxAttempts: number;
  /** Aborted with a JobInterrupted when the job is cancelled, times out, its lease is lost, or the worker stops: stop soon. */
  readonly signal: AbortSignal;
  /**
   * Runs fn in a transaction that also marks this job succeeded, fenced by this run's lease: if
   * another worker took the job over (this one was presumed dead), nothing commits and this
   * throws JobInterrupted('lease_lost'). Writes made here therefore happen once per job.
   */
  complete<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>;
}

/** A job that runs every `everyMs` on exactly one replica (kernel-made queue `periodic.<name>`). */
export interface PeriodicDefinition {
  readonly name: string;
  readonly everyMs: number;
  /** Default 1: a failed run waits for the next tick instead of being retried. */
  readonly maxAttempts?: number;
  readonly leaseMs?: number;
  run(job: Job<Record<string, never>>): Promise<void>;
}

/** Throw it from a handler to fail the job at once, without the retries left. */
export class PermanentJobError extends Error {
  override readonly name = 'PermanentJobError';
}

/**
 * Throw it from a handler to run the job again at a time the handler chose (a receiver's
 * retry-after, a schedule of its own) instead of the queue's backoff. The run counts as an attempt
 * like any failed run: a job out of attempts is failed with the reason. A time already past means
 * as soon as a worker is free.
 */
export class RetryJobAt extends Error {
  override readonly name = 'RetryJobAt';
  constructor(
    readonly runAt: Date,
    reason: string,
  ) {
    super(reason);
  }
}

/**
 * Throw it from a handler when the job cannot run *now* for a reason that is not a failure (a
 * per-organisation concurrency limit is full): the job is queued again for `runAt` and the run
 * does not count as an attempt, so a job may snooze any number of times without failing. A time
 * already past means as soon as a worker is free. Not for failures: those are RetryJobAt's.
 */
export class SnoozeJob extends Error {
  override readonly name = 'SnoozeJob';
  constructor(
    readonly runAt: Date,
    reason: string,
  ) {
    super(reason);
  }
}

export type JobInterruptReason = 'cancelled' | 'lease_lost' | 'shutdown' | 'timeout';

const INTERRUPT_MESSAGES: Record<JobInterruptReason, string> = {
  cancelled: 'the job was cancelled',
  lease_lost: "the job's lease was lost: another worker owns it now",
  shutdown: 'the worker is shutting down',
  timeout: "the job timed out: it ran longer than its queue's timeoutMs",
};

/** The reason a running job's signal was aborted (also thrown by `complete` once the run is no longer this worker's). */
export class JobInterrupted extends Error {
  override readonly name = 'JobInterrupted';
  constructor(readonly reason: JobInterruptReason) {
    super(INTERRUPT_MESSAGES[reason]);
  }
}

const QUEUE_NAME = /^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)*$/;

export function defineQueue<S extends z.ZodType>(
  definition: { name: string; payload: S } & Partial<Omit<QueueSettings, 'backoff'>> & { backoff?: Partial<QueueSettings['backoff']> },
): QueueSpec<S> {
  if (!QUEUE_NAME.test(definition.name) || definition.name.length > 100) {
    throw new Error(`queue name ${JSON.stringify(definition.name)}: lowercase words separated by dots, e.g. webhooks.deliver`);
  }
  const spec: QueueSpec<S> = {
    name: definition.name,
    payload: definition.payload,
    concurrency: positiveInteger(definition.name, 'concurrency', definition.concurrency ?? DEFAULT_QUEUE_SETTINGS.concurrency),
    maxAttempts: positiveInteger(definition.name, 'maxAttempts', definition.maxAttempts ?? DEFAULT_QUEUE_SETTINGS.maxAttempts),
    leaseMs: positiveInteger(definition.name, 'leaseMs', definition.leaseMs ?? DEFAULT_QUEUE_SETTINGS.leaseMs),
    backoff: { ...DEFAULT_QUEUE_SETTINGS.backoff, ...definition.backoff },
    ...(definition.timeoutMs === undefined ? {} : { timeoutMs: timeoutOf(definition.name, definition.timeoutMs) }),
    handle: (run) => ({ spec, run: run as (job: Job<unknown>) => Promise<void> }),
  };
  return spec;
}

export function definePeriodic(definition: PeriodicDefinition): PeriodicDefinition {
  positiveInteger(definition.name, 'everyMs', definition.everyMs);
  return definition;
}

/** A timer cannot wait longer than 2^31 - 1 ms (about 24.8 days): Node would fire it at once. */
const MAX_TIMEOUT_MS = 2_147_483_647;

function timeoutOf(queue: string, value: number): number {
  positiveInteger(queue, 'timeoutMs', value);
  if (value > MAX_TIMEOUT_MS) throw new Error(`queue ${queue}: timeoutMs must be at most ${MAX_TIMEOUT_MS} (about 24 days), got ${value}`);
  return value;
}

function positiveInteger(queue: string, field: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) throw new Error(`queue ${queue}: ${field} must be a positive integer, got ${value}`);
  return value;
}

/**
 * The delay before the next run after run number `attempt` failed: full jitter (anywhere from 0
 * to the ceiling, so jobs that failed together do not retry together) under an exponential
 * ceiling, baseMs * 2^(attempt-1), capped at maxMs.
 */
export function retryDelayMs(attempt: number, backoff: QueueSettings['backoff'], random: () => number): number {
  const ceiling = Math.min(backoff.maxMs, backoff.baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(random() * ceiling);
}

const TOKEN_LIKE = /\b(svc_(?:live|sess)_|whsec_|sk-|Bearer\s+)[A-Za-z0-9._~+/=-]{6,}/g;

/**
 * What is kept of a failure: its message only (no stack, no cause, no properties), one line,
 * at most 500 characters, with anything shaped like one of our tokens or a bearer secret masked.
 * Handlers should still never put a secret in an error message.
 */
export function jobErrorMessage(error: unknown): string {
  const raw = error instanceof Error ? (error.name && error.name !== 'Error' ? `${error.name}: ${error.message}` : error.message) : String(error);
  const line = raw.replace(/\s+/g, ' ').trim().replace(TOKEN_LIKE, '$1[redacted]');
  return line.length > 500 ? `${line.slice(0, 499)}…` : line || 'failed without a message';
}

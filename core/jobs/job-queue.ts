import type { z } from 'zod';
import type { Database, Transaction } from '../ports/database.ts';
import type { JobQueueStore, JobRecord, JobState, NewJob } from '../ports/queue.ts';
import type { JobRegistry } from './job-registry.ts';
import type { QueueSpec } from './queue-definitions.ts';

export interface EnqueueOptions {
  /** The caller's transaction: the job exists only if it commits (and workers hear of it after the commit). */
  tx?: Transaction;
  /** Not before this time (default: now). */
  runAt?: Date;
  /** Unique per queue: enqueueing the same key again returns the first job instead of a new one. */
  idempotencyKey?: string;
  maxAttempts?: number;
  /** Higher runs first among due jobs (default 0). */
  priority?: number;
}

/** One job of enqueueMany: its payload and what enqueue's options would say of it alone. */
export interface EnqueueItem<P> {
  payload: P;
  idempotencyKey?: string;
  runAt?: Date;
  priority?: number;
}

export interface EnqueueManyOptions {
  /** The caller's transaction: the jobs exist only if it commits. Without one, they are written in one of their own. */
  tx?: Transaction;
  maxAttempts?: number;
}

export interface EnqueuedJob {
  id: string;
  state: JobState;
  /** False when the idempotency key named an existing job. */
  created: boolean;
}

/** The worker side, told about new and cancelled jobs in this process (no-ops when workers are off). */
export interface WorkerNudges {
  wake(queue: string): void;
  interrupt(jobId: string): void;
}

/**
 * The row a job is enqueued as, its payload checked against the queue's schema. Shared by JobQueue
 * and by the operator CLI, which enqueues work for the service's workers without running any itself.
 */
export function newJobOf<S extends z.ZodType>(queue: QueueSpec<S>, payload: z.input<S>, options: Omit<EnqueueOptions, 'tx'>, now: Date): NewJob {
  const checked = queue.payload.safeParse(payload);
  if (!checked.success) {
    const issue = checked.error.issues[0];
    throw new Error(`payload for queue ${queue.name} is invalid at '${issue?.path.join('.') ?? ''}': ${issue?.message ?? 'invalid'}`);
  }
  const maxAttempts = options.maxAttempts ?? queue.maxAttempts;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) throw new Error(`maxAttempts must be a positive integer, got ${maxAttempts}`);
  // The payload is stored as given, so the handler's parse applies defaults and transforms once.
  return {
    queue: queue.name,
    payload,
    runAt: options.runAt ?? now,
    maxAttempts,
    priority: options.priority ?? 0,
    idempotencyKey: options.idempotencyKey ?? null,
    createdAt: now,
  };
}

/** How plugins put work on the durable queue: typed by each queue's payload schema. */
export class JobQueue {
  constructor(
    private readonly deps: {
      store: JobQueueStore;
      /** Its own transaction makes enqueueMany all or none when the caller gives none. */
      database: Database;
      registry: JobRegistry;
      clock: () => Date;
      workers: WorkerNudges;
    },
  ) {}

  async enqueue<S extends z.ZodType>(queue: QueueSpec<S>, payload: z.input<S>, options: EnqueueOptions = {}): Promise<EnqueuedJob> {
    if (!this.deps.registry.queue(queue.name)) {
      throw new Error(`no enabled plugin handles queue ${queue.name}: its jobs would never run`);
    }
    const { job, created } = await this.deps.store.enqueue(options.tx ?? this.deps.database, newJobOf(queue, payload, options, this.deps.clock()));
    if (created) {
      const wake = () => this.deps.workers.wake(queue.name);
      if (options.tx) options.tx.afterCommit(wake);
      else wake();
    }
    return { id: job.id, state: job.state, created };
  }

  /**
   * Many jobs of one queue at once: every payload is checked before anything is written, then one
   * multi-row insert per chunk, all in one transaction (the caller's `tx`, or one of its own), so
   * all the jobs exist or none. Each item's idempotency key works as in enqueue. The answers come
   * in item order; workers are woken once (after the commit with `tx`), if any job is new.
   */
  async enqueueMany<S extends z.ZodType>(queue: QueueSpec<S>, items: ReadonlyArray<EnqueueItem<z.input<S>>>, options: EnqueueManyOptions = {}): Promise<EnqueuedJob[]> {
    if (!this.deps.registry.queue(queue.name)) {
      throw new Error(`no enabled plugin handles queue ${queue.name}: its jobs would never run`);
    }
    const now = this.deps.clock();
    const jobs = items.map(({ payload, ...item }, index) => {
      try {
        return newJobOf(queue, payload, { ...item, ...(options.maxAttempts === undefined ? {} : { maxAttempts: options.maxAttempts }) }, now);
      } catch (error) {
        throw new Error(`item ${index}: ${(error as Error).message}`);
      }
    });
    if (jobs.length === 0) return [];
    const stored = options.tx ? await this.deps.store.enqueueMany(options.tx, jobs) : await this.deps.database.transaction((tx) => this.deps.store.enqueueMany(tx, jobs));
    if (stored.some((s) => s.created)) {
      const wake = () => this.deps.workers.wake(queue.name);
      if (options.tx) options.tx.afterCommit(wake);
      else wake();
    }
    return stored.map(({ job, created }) => ({ id: job.id, state: job.state, created }));
  }

  get(id: string): Promise<JobRecord | null> {
    return this.deps.store.get(id);
  }

  /**
   * A queued job is cancelled at once. A running one is marked: its signal aborts right away in
   * this process, and at its next lease renewal on another replica (a third of its lease at most).
   */
  async cancel(id: string): Promise<'cancelled' | 'cancel_requested' | null> {
    const outcome = await this.deps.store.cancel(id, this.deps.clock());
    if (outcome === 'cancel_requested') this.deps.workers.interrupt(id);
    return outcome;
  }
}

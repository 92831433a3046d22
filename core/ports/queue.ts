import type { Queryable } from './database.ts';

/**
 * Storage of the durable job queue (implemented once in adapters/sql/job-store.ts). Every time
 * given here comes from the caller's clock: the store compares against it, never against the
 * database's own now() (README "Kernel seams" explains the choice).
 */
export type JobState = 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled';

export interface NewJob {
  queue: string;
  /** JSON-serialisable; validated by the queue's schema before it gets here. */
  payload: unknown;
  runAt: Date;
  maxAttempts: number;
  /** Higher runs first among jobs that are due. */
  priority: number;
  /** Unique per queue: a second job with the same key is not created, the first is returned. */
  idempotencyKey: string | null;
  createdAt: Date;
}

export interface JobRecord {
  id: string;
  queue: string;
  payload: unknown;
  state: JobState;
  /** Claims so far, the one running included. */
  attempts: number;
  maxAttempts: number;
  priority: number;
  runAt: Date;
  idempotencyKey: string | null;
  /** The last failure's message (never a stack or a cause). */
  lastError: string | null;
  cancelRequested: boolean;
  createdAt: Date;
  finishedAt: Date | null;
}

/** A job this worker holds: the token fences every later write against a lost lease. */
export interface JobLease {
  id: string;
  token: string;
}

export interface ClaimedJob extends JobLease {
  queue: string;
  payload: unknown;
  attempt: number;
  maxAttempts: number;
}

export interface ClaimRequest {
  queue: string;
  /** How many jobs of this queue the worker can start now. */
  slots: number;
  leaseMs: number;
}

/** How a held job ends: each is written only while the lease is still held. */
export type JobOutcome =
  | { state: 'succeeded' }
  | { state: 'retry'; runAt: Date; error: string }
  | { state: 'failed'; error: string }
  | { state: 'cancelled'; error: string | null }
  /** Given back unfinished (shutdown): queued again, and the attempt does not count. */
  | { state: 'released' }
  /**
   * Not now (SnoozeJob): queued again for runAt, and the attempt does not count. The reason is not
   * a failure, so lastError keeps the last failure's message.
   */
  | { state: 'snoozed'; runAt: Date; reason: string };

export type HeartbeatAnswer = 'held' | 'cancel_requested' | 'lost';

/** What producers use: enqueue (optionally inside their own transaction), look up, cancel. */
export interface JobQueueStore {
  enqueue(db: Queryable, job: NewJob): Promise<{ job: JobRecord; created: boolean }>;
  /**
   * Many jobs, each as enqueue would (an idempotency key already taken returns its job, created:
   * false; a key repeated in the list gets the first item's job), answered in the list's order and
   * with ids ascending in it. One multi-row insert per chunk of the list: give a transaction for
   * all or none.
   */
  enqueueMany(db: Queryable, jobs: readonly NewJob[]): Promise<Array<{ job: JobRecord; created: boolean }>>;
  get(id: string): Promise<JobRecord | null>;
  /** A queued job becomes cancelled; a running one is marked for its worker to stop. Null: nothing to cancel. */
  cancel(id: string, now: Date): Promise<'cancelled' | 'cancel_requested' | null>;
}

/** What workers use: claim with SKIP LOCKED, renew, finish (fenced), recover expired leases. */
export interface JobLeaseStore {
  claim(requests: readonly ClaimRequest[], now: Date, workerId: string): Promise<ClaimedJob[]>;
  heartbeat(lease: JobLease, lockedUntil: Date): Promise<HeartbeatAnswer>;
  /** False when the lease was lost (expired and reclaimed, or released): nothing was written. */
  finish(lease: JobLease, outcome: JobOutcome, now: Date, db?: Queryable): Promise<boolean>;
  /** Jobs whose worker stopped renewing: queued again, or failed when out of attempts. */
  recoverExpired(now: Date): Promise<number>;
  /** Forgets jobs that finished before the given time (their idempotency keys become free again). */
  pruneFinished(before: Date): Promise<number>;
}

/** Jobs run every interval by exactly one replica: a row per job whose next run is claimed atomically. */
export interface PeriodicStore {
  /** Declares (or re-declares with a new interval) each job; a new one is due at once. */
  register(jobs: ReadonlyArray<{ name: string; intervalMs: number }>, now: Date): Promise<void>;
  /**
   * Moves every due job's next run forward and, in the same transaction, enqueues one run of it
   * on its queue unless the previous run is still queued or running. Returns the names claimed.
   */
  claimDue(jobs: ReadonlyArray<{ name: string; queue: string; maxAttempts: number }>, now: Date, workerId: string): Promise<string[]>;
}

import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { Database, Queryable, Transaction } from '../ports/database.ts';
import type { LongRunningOperation, LongRunningStore, OperationStarter, ProgressFilter } from '../ports/long-running.ts';
import type { Page, PageRequest } from '../vocabulary/pagination.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import { defineQueue, JobInterrupted, jobErrorMessage, PermanentJobError, SnoozeJob, type Job, type QueueDefinition, type QueueSettings, type QueueSpec } from '../jobs/queue-definitions.ts';
import type { Credential } from '../identity/credential.ts';

/**
 * Long-running operations: work that outlives a request (an account deletion after its grace
 * period; later batches and deploys), started with a durable job in the caller's transaction and
 * polled as a record of its own (`GET /client/operations/{id}`) with a status the job moves:
 *
 *   queued → running → succeeded | failed          (cancelled: from queued, by the owner of the kind)
 *
 * A kind is declared once, with the schema of its input, and handled by the plugin that owns it:
 *
 *   export const deploys = defineLongRunning({ kind: 'apps.deploy', input: z.object({ appId: z.uuid() }), maxAttempts: 3 });
 *   queues: ({ container }) => [container.resolve(Tokens.LongRunning).handle(deploys, async ({ operation, input, complete }) => {
 *     …work, honouring the job's signal…
 *     return complete(async (tx) => { …final writes…; return { deploymentId } });   // becomes `result`
 *   })],
 *   const op = await container.resolve(Tokens.LongRunning).start(tx, deploys, { appId }, { organizationId, projectId, credential });
 *
 * The job runs at least once (core/jobs); what `complete(tx => …)` writes, the operation's success
 * included, commits exactly once, fenced by the job's lease. A failure on the job's last attempt
 * (or a PermanentJobError) marks the operation failed with the error's message (one line, no stack:
 * jobErrorMessage); a job cancelled while running marks it cancelled.
 */
export interface LongRunningKind<S extends z.ZodType = z.ZodType> {
  readonly kind: string;
  readonly input: S;
  readonly queue: QueueSpec<z.ZodObject<{ operationId: z.ZodUUID; input: S }>>;
}

const QUEUE_PREFIX = 'operations.';

export function defineLongRunning<S extends z.ZodType>(
  definition: { kind: string; input: S } & Partial<Omit<QueueSettings, 'backoff'>> & { backoff?: Partial<QueueSettings['backoff']> },
): LongRunningKind<S> {
  const { kind, input, ...settings } = definition;
  const queue = defineQueue({ ...settings, name: QUEUE_PREFIX + kind, payload: z.object({ operationId: z.uuid(), input }) });
  return { kind, input, queue };
}

/** What a kind's handler is given for one run of its job. */
export interface LongRunningRun<I> {
  readonly operation: LongRunningOperation;
  readonly input: I;
  /** The job's run: its signal aborts on cancel, a lost lease or shutdown; `attempt` counts from 1. */
  readonly job: Job<unknown>;
  /**
   * Writes the work's last effects and the operation's success (with what fn returns as its
   * `result`) in one transaction, exactly once. Call it at most once; without it, the handler's
   * return value is recorded the same way when it returns.
   */
  complete<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>;
}

export interface StartOptions {
  organizationId: string;
  projectId?: string | null;
  /** Who asked for it (a person or a key); absent: the service itself. */
  credential?: Credential;
  /** Not before this time (default now): a scheduled operation. */
  runAt?: Date;
}

/** How a cancel went: done, too late (the work began), or nothing to cancel (finished). */
export type CancelOutcome = { cancelled: true; operation: LongRunningOperation } | { cancelled: false; reason: 'running' | 'finished' };

export class LongRunningOperations {
  constructor(
    private readonly deps: {
      store: LongRunningStore;
      jobs: JobQueue;
      database: Database;
      clock: () => Date;
    },
  ) {}

  /**
   * Creates the operation and its job in `tx`, the caller's transaction: both exist exactly when
   * the change that asked for them commits.
   */
  async start<S extends z.ZodType>(tx: Transaction, kind: LongRunningKind<S>, input: z.input<S>, options: StartOptions): Promise<LongRunningOperation> {
    const now = this.deps.clock();
    const id = randomUUID();
    const runAt = options.runAt ?? now;
    // zod cannot infer the input of an object over a generic schema; the queue checks the payload at enqueue.
    const payload = { operationId: id, input } as unknown as z.input<typeof kind.queue.payload>;
    const job = await this.deps.jobs.enqueue(kind.queue, payload, { tx, runAt, idempotencyKey: id });
    const operation: LongRunningOperation = {
      id,
      organizationId: options.organizationId,
      projectId: options.projectId ?? null,
      kind: kind.kind,
      status: 'queued',
      jobId: job.id,
      runAt,
      startedBy: starterOf(options.credential),
      result: null,
      error: null,
      createdAt: now,
      updatedAt: now,
      finishedAt: null,
    };
    await this.deps.store.insert(tx, operation);
    return operation;
  }

  /**
   * The operation as it stands; null for none in this organisation. An operation whose job ended
   * without saying (a worker that died on its last attempt, whose lease a replica recovered as
   * failed) is brought in line with its job here, so no poller waits on it forever.
   */
  async get(organizationId: string, id: string): Promise<LongRunningOperation | null> {
    const operation = await this.deps.store.get(organizationId, id);
    if (!operation || operation.finishedAt !== null) return operation;
    const job = await this.deps.jobs.get(operation.jobId);
    if (job === null || (job.state !== 'failed' && job.state !== 'cancelled')) return operation;
    const error = job.lastError ?? (job.state === 'failed' ? 'the work failed' : 'cancelled');
    await this.deps.store.finish(this.deps.database, operation.id, { status: job.state, error }, this.deps.clock());
    return this.deps.store.get(organizationId, id);
  }

  /**
   * Cancels an operation that has not begun, in `tx` (the caller's change, e.g. the owner cancelling
   * an account deletion); its job is cancelled once that commits. One that is running is not
   * stopped: cancelling work half done is a kind's own decision.
   */
  async cancel(tx: Transaction, organizationId: string, id: string, reason: string): Promise<CancelOutcome> {
    const operation = await this.deps.store.get(organizationId, id, tx);
    if (!operation || operation.finishedAt !== null) return { cancelled: false, reason: 'finished' };
    if (!(await this.deps.store.cancelQueued(tx, id, reason, this.deps.clock()))) return { cancelled: false, reason: 'running' };
    // Had the job started meanwhile, it finds the operation finished and does nothing.
    tx.afterCommit(() => void this.deps.jobs.cancel(operation.jobId).catch(() => undefined));
    const cancelled = await this.deps.store.get(organizationId, id, tx);
    return { cancelled: true, operation: cancelled ?? operation };
  }

  /** A viewer's list of work in progress and recently finished, newest first (GET /client/progress). */
  list(organizationId: string, filter: ProgressFilter, page: PageRequest): Promise<Page<LongRunningOperation>> {
    return this.deps.store.page(organizationId, filter, page);
  }

  /** Hides operations from one viewer's list (the operations themselves are unchanged); how many. */
  hide(organizationId: string, filter: ProgressFilter, which: readonly string[] | 'all'): Promise<number> {
    return this.deps.store.hide(organizationId, filter, which, this.deps.clock());
  }

  /** Removes an organisation's operations (its data is being erased), keeping those named. */
  eraseForOrganization(db: Queryable, organizationId: string, keep: readonly string[]): Promise<number> {
    return this.deps.store.eraseForOrganization(db, organizationId, keep);
  }

  /** The job handler of a kind, for its plugin's `queues()`. */
  handle<S extends z.ZodType>(kind: LongRunningKind<S>, run: (ctx: LongRunningRun<z.output<S>>) => Promise<unknown>): QueueDefinition {
    const { store, clock, database } = this.deps;
    return kind.queue.handle(async (job) => {
      const { operationId, input } = job.payload as { operationId: string; input: z.output<S> };
      // Cancelled before it ran (or finished by an earlier run): nothing left to do.
      const operation = await store.markRunning(operationId, clock());
      if (!operation) return;
      let completed = false;
      const complete = async <T>(fn: (tx: Transaction) => Promise<T>): Promise<T> => {
        const result = await job.complete(async (tx) => {
          const value = await fn(tx);
          await store.finish(tx, operationId, { status: 'succeeded', result: value ?? null }, clock());
          return value;
        });
        completed = true;
        return result;
      };
      try {
        const value = await run({ operation, input, job: job as Job<unknown>, complete });
        if (!completed) await complete(async () => value);
      } catch (error) {
        const reason = job.signal.reason;
        const interrupted = job.signal.aborted && reason instanceof JobInterrupted;
        // A snooze is not a failure: the job runs again, the attempt not counted. A timeout is an
        // interruption: the runner fails the job when it was the last attempt, and get() follows.
        if (!completed && interrupted && reason.reason === 'cancelled') {
          await store.finish(database, operationId, { status: 'cancelled', error: jobErrorMessage(error) }, clock());
        } else if (!completed && !interrupted && !(error instanceof SnoozeJob) && (error instanceof PermanentJobError || job.attempt >= job.maxAttempts)) {
          await store.finish(database, operationId, { status: 'failed', error: jobErrorMessage(error) }, clock());
        }
        throw error;
      }
    });
  }
}

function starterOf(credential: Credential | undefined): OperationStarter | null {
  if (!credential) return { kind: 'system', id: 'service' };
  return credential.kind === 'key' ? { kind: 'key', id: credential.keyId } : { kind: 'person', id: credential.personId };
}

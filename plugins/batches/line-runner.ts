import type { DomainEvents } from '../../core/events/domain-events.ts';
import type { GatewayCalls } from '../../core/gateway/gateway-calls.ts';
import type { KeyCredential } from '../../core/identity/credential.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { Database } from '../../core/ports/database.ts';
import type { JobQueue } from '../../core/jobs/job-queue.ts';
import { type Job, RetryJobAt, SnoozeJob } from '../../core/jobs/queue-definitions.ts';
import type { BatchesConfig } from './batch-config.ts';
import type { BatchStore } from './batch-store.ts';
import { lineRequestId } from './batch-view.ts';
import type { BatchQueues } from './batch-queues.ts';
import { stopBatch, stopInTransaction } from './batch-stops.ts';
import type { OrganizationTurns } from './organization-turns.ts';

export interface LineRunnerDeps {
  database: Database;
  store: BatchStore;
  gateway: GatewayCalls;
  /** Rebuilds the batch key's credential, refused as its token would be now (core/identity/authenticator.ts). */
  keyCredential(keyId: string): Promise<KeyCredential>;
  turns: OrganizationTurns;
  jobs: JobQueue;
  queues: BatchQueues;
  events: DomainEvents;
  clock: () => Date;
  config: BatchesConfig;
}

/** Upstream answers worth another run: overloaded, rate limited, or failed on every route. */
const RETRYABLE = new Set([408, 409, 429, 500, 502, 503, 504]);
/** A line that found no turn is claimed again after about this long (jittered): its slot goes to other organisations meanwhile. */
const TURN_WAIT_MS = 1_000;

/**
 * One line of a batch: runs it through the gateway call path as the batch's key, against the batch's
 * spend hold, and records its answer once. The order of checks is what keeps a cancel, an expiry or
 * a revoked key from starting work: the batch must still be running, the key valid, and the
 * organisation under its concurrency, before the line is marked running and sent.
 */
export async function runLine(deps: LineRunnerDeps, job: Job<{ batchId: string; line: number }>): Promise<void> {
  const { store, clock } = deps;
  const { batchId, line: number } = job.payload;
  const batch = await store.get(batchId);
  if (!batch) return; // erased with its account
  if (batch.status !== 'in_progress') {
    // It stopped starting lines: a run of this line cut off earlier is not resumed (the error file says it never ran).
    await store.unstart(batchId, number);
    return;
  }
  const line = await store.line(batchId, number);
  if (!line || line.state === 'succeeded' || line.state === 'failed') return;
  if (clock() >= batch.expiresAt) {
    await stopBatch(deps, batch, 'expired');
    return;
  }
  let credential: KeyCredential;
  try {
    credential = await deps.keyCredential(batch.keyId);
  } catch (error) {
    if (!(error instanceof ApiError) || error.status >= 500) throw error;
    // The key was revoked, disabled or expired (or its account suspended): the batch stops here.
    const errors = [{ code: error.code, message: `The batch's key can no longer be used: ${error.message}`, param: null, line: number }];
    await stopBatch(deps, batch, 'failed', { errors });
    return;
  }
  if (!(await deps.turns.take(batch.organizationId, job.id, job.signal))) {
    if (job.signal.aborted) throw job.signal.reason;
    throw new SnoozeJob(new Date(clock().getTime() + TURN_WAIT_MS + Math.floor(Math.random() * TURN_WAIT_MS)), 'the organisation runs as many batch lines as it may');
  }
  try {
    if (!(await store.start(batchId, number, clock()))) return;
    const requestId = lineRequestId(batchId, number);
    const answer = await deps.gateway.run(credential, {
      endpoint: batch.endpoint,
      body: line.body,
      requestId,
      signal: job.signal,
      ...(batch.holdId === null ? {} : { hold: { holdId: batch.holdId, batchId } }),
    });
    if (job.signal.aborted) {
      // Timed out, cancelled or shutting down: the queue decides what comes next; the line waits as pending.
      await store.unstart(batchId, number);
      throw job.signal.reason;
    }
    if (RETRYABLE.has(answer.status) && job.attempt < job.maxAttempts) {
      await store.unstart(batchId, number);
      const retryAfter = Number(answer.headers['retry-after']);
      const runAt = Number.isFinite(retryAfter) && retryAfter > 0 ? new Date(clock().getTime() + retryAfter * 1000) : retryTime(clock(), job.attempt);
      throw new RetryJobAt(runAt, `the call answered ${answer.status}`);
    }
    const succeeded = answer.status >= 200 && answer.status < 300;
    await job.complete(async (tx) => {
      const counted = await store.record(tx, batchId, number, { succeeded, statusCode: answer.status, requestId, body: answer.body });
      // The last line: the batch heads for completed (or stays heading for cancelled, if a cancel came first).
      if (counted && counted.completed + counted.failed === counted.total) await stopInTransaction(deps, tx, batchId, 'completed');
    });
  } finally {
    await deps.turns.give(batch.organizationId, job.id);
  }
}

/** Exponential with full jitter from 2 s, at most 5 min: upstream trouble usually passes. */
function retryTime(now: Date, attempt: number): Date {
  const ceiling = Math.min(300_000, 2_000 * 2 ** (attempt - 1));
  return new Date(now.getTime() + Math.round(Math.random() * ceiling));
}

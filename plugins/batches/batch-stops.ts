import type { DomainEvents } from '../../core/events/domain-events.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { JobQueue } from '../../core/jobs/job-queue.ts';
import type { EventActor } from '../../core/ports/events.ts';
import type { Database, Transaction } from '../../core/ports/database.ts';
import type { Batch, BatchError, BatchOutcome, BatchStore } from './batch-store.ts';
import type { BatchQueues } from './batch-queues.ts';

export interface StopDeps {
  database: Database;
  store: BatchStore;
  jobs: JobQueue;
  queues: BatchQueues;
  events: DomainEvents;
  clock: () => Date;
}

/** A batch's state as its events carry it. */
export function batchEventData(batch: Batch) {
  return {
    batchId: batch.id,
    projectId: batch.projectId,
    status: batch.status,
    requestCounts: { total: batch.total, completed: batch.completed, failed: batch.failed },
    outputFileId: batch.outputFileId,
    errorFileId: batch.errorFileId,
  };
}

/**
 * Stops a running batch starting lines, heading for `outcome` (a cancel, its expiry, its key no
 * longer valid), and queues its finalization, which waits for the lines still running. Null when the
 * batch had stopped already (the first stop wins).
 */
export function stopBatch(deps: StopDeps, batch: Batch, outcome: BatchOutcome, options: StopOptions = {}): Promise<Batch | null> {
  return deps.database.transaction((tx) => stopInTransaction(deps, tx, batch.id, outcome, options));
}

export interface StopOptions {
  errors?: BatchError[];
  /** Who asked (a cancel); null for the service's own stops. */
  actor?: EventActor | null;
}

/** stopBatch in the caller's transaction (the one recording a batch's last line). */
export async function stopInTransaction(deps: StopDeps, tx: Transaction, batchId: string, outcome: BatchOutcome, options: StopOptions = {}): Promise<Batch | null> {
  const stopped = await deps.store.stop(tx, batchId, outcome, deps.clock(), options.errors ?? null);
  if (!stopped) return null;
  if (outcome === 'cancelled') {
    const data = batchEventData(stopped);
    await deps.events.emit(tx, { type: 'batch.cancelling', organizationId: stopped.organizationId, subject: stopped.id, actor: options.actor ?? null, data });
  }
  await deps.jobs.enqueue(deps.queues.finalize, { batchId: stopped.id }, { tx, idempotencyKey: `finalize:${stopped.id}` });
  return stopped;
}

/**
 * A caller's cancel (POST /v1/batches/{id}/cancel and the management API's): from in_progress only;
 * a batch already cancelling answers as it is. Lines already running finish and are billed.
 */
export async function cancelBatch(deps: StopDeps, batch: Batch, actor: EventActor): Promise<Batch> {
  if (batch.status === 'cancelling') return batch;
  if (batch.status !== 'in_progress') {
    throw new ApiError('batch_not_cancellable', `Batch ${batch.id} is ${batch.status}; only a batch in progress can be cancelled`);
  }
  const stopped = await stopBatch(deps, batch, 'cancelled', { actor });
  // Null: it stopped on its own meanwhile (its last line, its expiry); answer what it is now.
  return stopped ?? (await deps.store.get(batch.id)) ?? batch;
}

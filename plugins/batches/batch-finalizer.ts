import type { GatewayFiles, StoredFile } from '../../core/ports/files.ts';
import type { Transaction } from '../../core/ports/database.ts';
import { type Job, SnoozeJob } from '../../core/jobs/queue-definitions.ts';
import type { BatchesConfig } from './batch-config.ts';
import type { Batch, BatchLine, BatchOutcome } from './batch-store.ts';
import { batchEventData, type StopDeps } from './batch-stops.ts';
import { outputLine } from './batch-view.ts';

export interface FinalizerDeps extends StopDeps {
  files: GatewayFiles;
  config: BatchesConfig;
}

/** How long a finalizer waits before looking again at lines still running. */
const RUNNING_WAIT_MS = 1_000;

/**
 * Ends a batch that stopped starting lines: once no line runs, writes the output file (lines answered
 * 2xx) and the error file (lines answered otherwise, and lines that never ran), sets the final status,
 * deletes the lines, emits the event and queues the release of the spend hold, all in the job's fenced
 * transaction: a finalizer that dies midway leaves nothing half done, and the next run starts over.
 */
export async function finalizeBatch(deps: FinalizerDeps, job: Job<{ batchId: string }>): Promise<void> {
  const { store, clock, config } = deps;
  const batch = await store.get(job.payload.batchId);
  if (!batch || (batch.status !== 'finalizing' && batch.status !== 'cancelling')) return;
  // A run older than its timeout (and the lease margin) died or hung: it will not be recorded.
  const since = new Date(clock().getTime() - config.lineTimeoutMs - 60_000);
  if ((await store.running(batch.id, since)) > 0) {
    throw new SnoozeJob(new Date(clock().getTime() + RUNNING_WAIT_MS), 'lines of the batch are still running');
  }
  const outcome: BatchOutcome = batch.outcome ?? 'completed';
  await job.complete(async (tx) => {
    const fresh = (await store.get(batch.id, tx)) ?? batch;
    const output = fresh.completed > 0 ? await writeFile(deps, tx, fresh, outcome, 'output', (line) => line.state === 'succeeded') : null;
    const errors = fresh.completed < fresh.total ? await writeFile(deps, tx, fresh, outcome, 'error', (line) => line.state !== 'succeeded') : null;
    const ended = await store.finish(tx, fresh, outcome, { output: output?.id ?? null, error: errors?.id ?? null }, clock());
    if (!ended) return;
    await deps.events.emit(tx, { type: `batch.${outcome}`, organizationId: ended.organizationId, subject: ended.id, actor: null, data: batchEventData(ended) });
    if (ended.holdId !== null) {
      const runAt = new Date(clock().getTime() + config.holdReleaseDelayMs);
      await deps.jobs.enqueue(deps.queues.releaseHold, { holdId: ended.holdId }, { tx, runAt, idempotencyKey: `release:${ended.holdId}` });
    }
  });
}

/** One of the batch's files, in OpenAI's batch output format, line by line in input order. */
async function writeFile(deps: FinalizerDeps, tx: Transaction, batch: Batch, outcome: BatchOutcome, kind: 'output' | 'error', belongs: (line: BatchLine) => boolean): Promise<StoredFile> {
  const { store } = deps;
  async function* content(): AsyncGenerator<Uint8Array> {
    for await (const line of store.lines(batch.id, 1_000, tx)) {
      if (belongs(line)) yield Buffer.from(`${outputLine(batch.id, line, outcome)}\n`, 'utf8');
    }
  }
  const owner = { organizationId: batch.organizationId, projectId: batch.projectId, keyId: batch.keyId };
  return deps.files.create(owner, { purpose: 'batch_output', filename: `batch_${batch.id}_${kind}.jsonl`, content: content() }, tx);
}

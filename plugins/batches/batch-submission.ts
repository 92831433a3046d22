import { randomUUID } from 'node:crypto';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import type { GatewayCalls } from '../../core/gateway/gateway-calls.ts';
import type { HeldCall, SpendHold, SpendHolds } from '../../core/gateway/spend-holds.ts';
import type { KeyCredential } from '../../core/identity/credential.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { JobQueue } from '../../core/jobs/job-queue.ts';
import type { Database, Transaction } from '../../core/ports/database.ts';
import type { GatewayFiles, StoredFile } from '../../core/ports/files.ts';
import { readBatchLines } from '../files/batch-lines.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import { type BatchesConfig, COMPLETION_WINDOWS, type CompletionWindow } from './batch-config.ts';
import type { Batch, BatchStore, NewLine } from './batch-store.ts';
import type { BatchQueues } from './batch-queues.ts';
import { batchEventData } from './batch-stops.ts';

export interface SubmissionDeps {
  database: Database;
  store: BatchStore;
  files: GatewayFiles;
  gateway: GatewayCalls;
  /** Absent when no metering plugin runs: nothing is held, and nothing billed. */
  holds: SpendHolds | undefined;
  jobs: JobQueue;
  queues: BatchQueues;
  events: DomainEvents;
  clock: () => Date;
  config: BatchesConfig;
  /** The longest line of an input file: a line is a request body (`server.bodyLimitBytes`). */
  maxLineBytes: number;
}

export interface BatchRequest {
  endpoint: string;
  completionWindow: CompletionWindow;
  metadata: Record<string, string> | null;
}

const invalid = (message: string) => new ApiError('batch_input_invalid', message, { param: 'input_file_id' });

/**
 * Accepts a batch: every line of its input file is checked now as the gateway would check the call
 * (body, model, and that the model takes batches), so a bad line is a 400 naming it rather than a
 * failed line hours later; then the lines' worst-case cost is held against the credit balance and
 * every blocking cap (402 when it does not fit), in the same transaction as the batch, its lines and
 * one job per line.
 */
export async function submitBatch(deps: SubmissionDeps, credential: KeyCredential, file: StoredFile, request: BatchRequest): Promise<Batch> {
  if (file.purpose !== 'batch') throw invalid(`File ${file.id} was uploaded with purpose '${file.purpose}'; a batch's input needs purpose 'batch'`);
  const { lines, calls } = await checkLines(deps, credential, file, request.endpoint);
  const id = randomUUID();
  const now = deps.clock();
  const batch = {
    id,
    organizationId: credential.organizationId,
    projectId: credential.projectId,
    keyId: credential.keyId,
    endpoint: request.endpoint,
    inputFileId: file.id,
    completionWindow: request.completionWindow,
    metadata: request.metadata,
    total: lines.length,
    createdAt: now,
    expiresAt: new Date(now.getTime() + COMPLETION_WINDOWS[request.completionWindow]),
  };
  const models = [...new Set(calls.map((call) => call.model))];
  const store = async (tx: Transaction, hold: SpendHold | null) => {
    await deps.store.insert(tx, { ...batch, models, holdId: hold?.id ?? null, heldMicros: hold?.micros ?? null }, lines);
    const items = lines.map((line) => ({ payload: { batchId: id, line: line.line }, idempotencyKey: `${id}:${line.line}` }));
    await deps.jobs.enqueueMany(deps.queues.line, items, { tx });
    const stored = (await deps.store.get(id, tx))!;
    await deps.events.emit(tx, { type: 'batch.created', organizationId: stored.organizationId, subject: id, actor: actorOf(credential), data: batchEventData(stored) });
    return stored;
  };
  if (!deps.holds) return deps.database.transaction((tx) => store(tx, null));
  return deps.holds.place({ credential, calls, reference: `batch:${id}` }, (tx, hold) => store(tx, hold));
}

/** Reads the input file line by line: each must name the batch's endpoint and be a call the gateway accepts. */
async function checkLines(deps: SubmissionDeps, credential: KeyCredential, file: StoredFile, endpoint: string): Promise<{ lines: NewLine[]; calls: HeldCall[] }> {
  const lines: NewLine[] = [];
  const calls: HeldCall[] = [];
  const requests = readBatchLines(await deps.files.open(file), { maxLineBytes: deps.maxLineBytes, maxRequests: deps.config.maxLines });
  try {
    for await (const request of requests) {
      const { lineNumber: number, customId, url, body } = request;
      const line = `Line ${number} (custom_id '${customId}')`;
      if (url !== endpoint) throw invalid(`${line} calls ${url}; every line of this batch must call ${endpoint}`);
      let checked: Awaited<ReturnType<GatewayCalls['check']>>;
      try {
        checked = await deps.gateway.check(credential, { endpoint, body });
      } catch (error) {
        if (!(error instanceof ApiError) || error.status >= 500) throw error;
        const where = error.param ? ` at body.${error.param}` : '';
        throw invalid(`${line}${where}: ${error.message}`);
      }
      if (!checked.batch) {
        const message = `${line}: model ${checked.model} does not accept batches (svc_batch is false)`;
        throw new ApiError('model_not_batchable', message, { param: 'input_file_id' });
      }
      lines.push({ line: number, customId, body });
      calls.push({ model: checked.model, ...checked.estimate });
    }
  } catch (error) {
    // The file was checked at upload; what fails here is a limit of batches (maxLines) or a newer rule.
    if (error instanceof ApiError && error.catalogued === 'invalid_batch_file') throw invalid(error.message);
    throw error;
  }
  if (lines.length === 0) throw invalid(`File ${file.id} holds no requests`);
  return { lines, calls };
}

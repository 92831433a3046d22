import { z } from 'zod';
import { listOf } from '../../core/vocabulary/pagination.ts';
import { instantView } from '../../core/vocabulary/timestamps.ts';

export const BATCH_STATUSES = ['validating', 'in_progress', 'finalizing', 'completed', 'failed', 'cancelling', 'cancelled', 'expired'] as const;

/** A batch as the management API shows it (camelCase, ISO times); /v1 keeps OpenAI's batch object. */
export const managedBatchView = z
  .object({
    object: z.literal('batch'),
    id: z.uuid(),
    status: z.enum(BATCH_STATUSES).describe("OpenAI's statuses; validating is never shown (checking is done when the batch is created)"),
    projectId: z.uuid(),
    keyId: z.uuid().describe('The API key it was created with and runs as'),
    endpoint: z.string(),
    models: z.array(z.string()).describe('The models its lines call, in first-use order (empty for a batch made before the list was kept)'),
    requestCounts: z
      .object({
        total: z.number().int().describe('Lines of the input file'),
        completed: z.number().int().describe('Lines answered 2xx'),
        failed: z.number().int().describe('Lines answered otherwise'),
      })
      .describe('Lines still to run are total − completed − failed; lines that never ran (a cancel, the expiry) are in neither count'),
    heldUsd: z.number().nullable().describe('The worst case held against the balance and spend caps at submission (batch prices); null when nothing was held'),
    inputFileId: z.uuid(),
    outputFileId: z.uuid().nullable().describe('Once ended: the lines answered 2xx (GET /batches/{id}/output); null before, or when none was'),
    errorFileId: z.uuid().nullable().describe('Once ended: the lines answered otherwise or never run; null before, or when there were none'),
    errors: z
      .array(z.object({ code: z.string(), message: z.string(), param: z.string().nullable(), line: z.number().int().nullable() }))
      .nullable()
      .describe('Why the batch itself failed (its key revoked, …); null otherwise'),
    metadata: z.record(z.string(), z.string()).nullable(),
    createdAt: instantView,
    expiresAt: instantView.describe('End of its completion window: unfinished lines are not run after it'),
    finishedAt: instantView.nullable().describe('When it reached completed, failed, cancelled or expired; null while running'),
  })
  .meta({ id: 'ManagedBatch', description: 'A batch of /v1 calls with its progress, seen through the management API' });

export const managedBatchListView = listOf(managedBatchView);

/** The output file of an ended batch, as a record; its bytes with Accept: application/octet-stream. */
export const batchOutputView = z
  .object({
    object: z.literal('batch_output'),
    batchId: z.uuid(),
    fileId: z.uuid().nullable().describe('The output file; null when no line was answered 2xx (the download is then empty)'),
    filename: z.string(),
    bytes: z.number().int().describe('Size of the JSONL download'),
    contentType: z.literal('application/jsonl'),
  })
  .meta({ id: 'BatchOutput', description: "An ended batch's output file (OpenAI's batch output format, one JSON line per request answered 2xx)" });

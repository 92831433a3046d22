import type { Batch, BatchLine } from './batch-store.ts';

const seconds = (at: Date | null): number | null => (at === null ? null : Math.floor(at.getTime() / 1000));

/** A batch as OpenAI's batch object (times in Unix seconds). */
export function batchObject(batch: Batch) {
  return {
    id: batch.id,
    object: 'batch' as const,
    endpoint: batch.endpoint,
    errors: batch.errors === null ? null : { object: 'list' as const, data: batch.errors },
    input_file_id: batch.inputFileId,
    completion_window: batch.completionWindow,
    status: batch.status,
    output_file_id: batch.outputFileId,
    error_file_id: batch.errorFileId,
    created_at: seconds(batch.createdAt),
    in_progress_at: seconds(batch.inProgressAt),
    expires_at: seconds(batch.expiresAt),
    finalizing_at: seconds(batch.finalizingAt),
    completed_at: seconds(batch.completedAt),
    failed_at: seconds(batch.failedAt),
    expired_at: seconds(batch.expiredAt),
    cancelling_at: seconds(batch.cancellingAt),
    cancelled_at: seconds(batch.cancelledAt),
    request_counts: { total: batch.total, completed: batch.completed, failed: batch.failed },
    metadata: batch.metadata,
  };
}

/** Why a line never ran, by how its batch ended. */
const NEVER_RAN = {
  cancelled: { code: 'batch_cancelled', message: 'The batch was cancelled before this request ran' },
  expired: { code: 'batch_expired', message: 'The batch expired before this request ran' },
  failed: { code: 'batch_failed', message: 'The batch failed before this request ran' },
  completed: { code: 'batch_failed', message: 'This request did not run' },
} as const;

/**
 * A line of the output or error file, in OpenAI's batch output format: `response` carries the answer
 * (2xx in the output file, any other status in the error file); a line that never ran has `error`.
 */
export function outputLine(batchId: string, line: BatchLine, outcome: keyof typeof NEVER_RAN): string {
  const id = `batch_req_${batchId.replaceAll('-', '')}_${line.line}`;
  if (line.response === null || line.statusCode === null) {
    return JSON.stringify({ id, custom_id: line.customId, response: null, error: NEVER_RAN[outcome] });
  }
  const response = { status_code: line.statusCode, request_id: line.response.requestId, body: line.response.body };
  return JSON.stringify({ id, custom_id: line.customId, response, error: null });
}

/** The request-log id of a line's call: the same on every run, so a repeated run is billed once. */
export function lineRequestId(batchId: string, line: number): string {
  return `req_batch_${batchId.replaceAll('-', '')}_${line}`;
}

import { z } from 'zod';
import type { LongRunningOperation } from '../../core/ports/long-running.ts';
import { instantView } from '../../core/vocabulary/timestamps.ts';

/** A long-running operation on the wire (GET /client/operations/{id}, the progress list, a 202). */
export const operationView = z
  .object({
    object: z.literal('operation'),
    id: z.uuid(),
    kind: z.string().describe('What it does: `account.deletion` (later: deploys, batches)'),
    status: z.enum(['queued', 'running', 'succeeded', 'failed', 'cancelled']),
    projectId: z.uuid().nullable().describe("The project it acts in; null for the account's own"),
    runAt: instantView.describe('Not before this time: a scheduled operation (an account deletion) waits until then'),
    startedBy: z.object({ kind: z.enum(['person', 'key', 'system']), id: z.string() }).nullable(),
    result: z.record(z.string(), z.unknown()).nullable().describe('What the work produced, once it succeeded'),
    error: z.object({ message: z.string() }).nullable().describe('Why it failed or was cancelled'),
    createdAt: instantView,
    updatedAt: instantView,
    finishedAt: instantView.nullable(),
  })
  .meta({ id: 'LongRunningOperation', description: 'Work that outlives a request, done by a durable job: poll it until it has finished' });

export function toOperationView(operation: LongRunningOperation): z.input<typeof operationView> {
  const result = operation.result;
  return {
    object: 'operation',
    id: operation.id,
    kind: operation.kind,
    status: operation.status,
    projectId: operation.projectId,
    runAt: operation.runAt.toISOString(),
    startedBy: operation.startedBy,
    result: result !== null && typeof result === 'object' && !Array.isArray(result) ? (result as Record<string, unknown>) : result === null ? null : { value: result },
    error: operation.error,
    createdAt: operation.createdAt.toISOString(),
    updatedAt: operation.updatedAt.toISOString(),
    finishedAt: operation.finishedAt?.toISOString() ?? null,
  };
}

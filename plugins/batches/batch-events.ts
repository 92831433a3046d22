import { z } from 'zod';
import { defineEventTypes, type PayloadsOf } from '../../core/events/event-catalogue.ts';

const batchState = z.object({
  batchId: z.string(),
  projectId: z.string(),
  status: z.string().describe("The batch's status after the change (OpenAI's names)"),
  requestCounts: z.object({ total: z.number().int(), completed: z.number().int(), failed: z.number().int() }),
  outputFileId: z.string().nullable().describe('The output file (lines answered 2xx), once the batch has ended'),
  errorFileId: z.string().nullable().describe('The error file (lines answered otherwise, or never run), once the batch has ended'),
});

const EXAMPLE = {
  batchId: '7b0f1c9e-4d2a-4e8b-9c6d-1a2b3c4d5e6f',
  projectId: '0b5d7c7e-2f4e-4d0a-9a51-2f6f1c1f0a11',
  requestCounts: { total: 1000, completed: 998, failed: 2 },
};

/** A batch's changes of status, each in the transaction of the change (plugins/batches/README.md). */
export const BATCH_EVENTS = defineEventTypes('batches', {
  'batch.created': {
    schema: batchState,
    description: 'A batch was accepted: its input was checked and its worst-case cost is held until it ends',
    public: true,
    example: { ...EXAMPLE, status: 'in_progress', requestCounts: { total: 1000, completed: 0, failed: 0 }, outputFileId: null, errorFileId: null },
  },
  'batch.cancelling': {
    schema: batchState,
    description: 'Cancelling a batch began: no new line starts; lines already running finish and are billed',
    public: true,
    example: { ...EXAMPLE, status: 'cancelling', outputFileId: null, errorFileId: null },
  },
  'batch.completed': {
    schema: batchState,
    description: 'Every line of a batch has run; its output and error files are ready (GET /v1/batches/{id}/content)',
    public: true,
    example: { ...EXAMPLE, status: 'completed', outputFileId: '3c1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f', errorFileId: null },
  },
  'batch.failed': {
    schema: batchState,
    description: 'A batch stopped before running every line: the key that created it was revoked, disabled or expired',
    public: true,
    example: { ...EXAMPLE, status: 'failed', outputFileId: null, errorFileId: '4d2e3f5a-6b7c-4d8e-9f0a-1b2c3d4e5f6a' },
  },
  'batch.cancelled': {
    schema: batchState,
    description: 'A cancelled batch has stopped: lines that ran are in its output file and billed; the rest never ran',
    public: true,
    example: { ...EXAMPLE, status: 'cancelled', outputFileId: '3c1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f', errorFileId: null },
  },
  'batch.expired': {
    schema: batchState,
    description: 'A batch did not finish within its completion window: lines that ran are in its output file; the rest never ran',
    public: true,
    example: { ...EXAMPLE, status: 'expired', outputFileId: '3c1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f', errorFileId: null },
  },
});

declare module '../../core/events/domain-events.ts' {
  interface EventCatalogue extends PayloadsOf<typeof BATCH_EVENTS> {}
}

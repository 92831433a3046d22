import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { InferenceAdmission } from '../../core/gateway/inference-admission.ts';
import { type Access, authorizedRecord, type RecordKind, type RouteResourceDeclaration } from '../../core/identity/authorization.ts';
import type { KeyCredential } from '../../core/identity/credential.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import { parseInput } from '../../core/operations/operations.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import type { StoredFile } from '../../core/ports/files.ts';
import { COMPLETION_WINDOWS, type CompletionWindow } from './batch-config.ts';
import { type Batch, hasEnded } from './batch-store.ts';
import { cancelBatch, type StopDeps } from './batch-stops.ts';
import { type SubmissionDeps, submitBatch } from './batch-submission.ts';
import { batchObject } from './batch-view.ts';
import { BATCH_ENDPOINTS } from '../files/batch-lines.ts';

export interface BatchRouteDeps extends SubmissionDeps, StopDeps {
  batchKind: RecordKind<Batch>;
  admission: InferenceAdmission;
}

/** `POST /v1/batches`: OpenAI's fields. */
export const batchCreateRequest = z.strictObject({
  input_file_id: z.string().min(1).max(100),
  endpoint: z.enum(BATCH_ENDPOINTS),
  completion_window: z.enum(Object.keys(COMPLETION_WINDOWS) as [CompletionWindow, ...CompletionWindow[]]),
  // OpenAI's limits: at most 16 pairs, keys up to 64 characters, values up to 512.
  metadata: z
    .record(z.string().min(1).max(64), z.string().max(512))
    .refine((pairs) => Object.keys(pairs).length <= 16, 'at most 16 key-value pairs')
    .nullable()
    .optional(),
});

/** Cancel takes no body; one sent must be empty (unknown fields are named). */
const noBody = z.strictObject({});

/** `GET /v1/batches`: OpenAI's paging. */
export const batchListQuery = z.strictObject({
  after: resourceId.optional().describe('The id of the last batch of the previous page'),
  limit: z.coerce.number().int().min(1).max(100).default(20),
});

/**
 * The /v1/batches routes (OpenAI's shapes). A batch is a declared resource of the kernel's one
 * authorization function (the batch kind, resolved to its project): another project's key gets 404.
 */
export function registerBatchRoutes(app: FastifyInstance, deps: BatchRouteDeps): void {
  const { batchKind, files } = deps;
  const keyOf = (request: FastifyRequest) => request.credential as KeyCredential;
  // Keys reach only their own project's batches and files, even holding projects:write (as /v1/files).
  const record = (kind: RecordKind<unknown>, access: Access, location: 'path' | 'body', field: string): RouteResourceDeclaration =>
    location === 'path' ? { kind, access, in: 'path', field, keyOwnProjectOnly: true } : { kind, access, in: 'body', field, keyOwnProjectOnly: true };
  const route = (resource?: RouteResourceDeclaration) => ({ config: { auth: { scope: 'inference' as const, ...(resource ? { resource } : {}) }, surface: 'v1' as const } });
  const byId = (access: Access) => route(record(batchKind, access, 'path', 'id'));
  const batchOf = (request: FastifyRequest) => authorizedRecord(request.authorization!, batchKind).record;

  app.post('/v1/batches', route(record(files.kind, 'write', 'body', 'input_file_id')), async (request, reply) => {
    const body = parseInput(batchCreateRequest, request.body, 'body');
    const file = authorizedRecord(request.authorization!, files.kind).record as StoredFile;
    const batch = await submitBatch(deps, keyOf(request), file, {
      endpoint: body.endpoint,
      completionWindow: body.completion_window,
      metadata: body.metadata ?? null,
    });
    return reply.code(200).send(batchObject(batch));
  });

  app.get('/v1/batches', route(), async (request) => {
    const query = parseInput(batchListQuery, request.query, 'query');
    const { batches, hasMore } = await deps.store.list(keyOf(request).projectId, query);
    return { object: 'list', data: batches.map(batchObject), first_id: batches[0]?.id ?? null, last_id: batches.at(-1)?.id ?? null, has_more: hasMore };
  });

  app.get('/v1/batches/:id', byId('read'), async (request, reply) => {
    // The polling endpoint spends the request-rate allowance, as inference does (the spec's Limits).
    const headers = await deps.admission.chargeRequest(keyOf(request));
    return reply.headers(headers).send(batchObject(batchOf(request)));
  });

  app.post('/v1/batches/:id/cancel', byId('write'), async (request) => {
    parseInput(noBody, request.body ?? {}, 'body');
    return batchObject(await cancelBatch(deps, batchOf(request), actorOf(keyOf(request))));
  });

  app.get('/v1/batches/:id/content', byId('read'), async (request, reply) => {
    const batch = batchOf(request);
    if (!hasEnded(batch)) throw new ApiError('batch_not_finished', `Batch ${batch.id} is ${batch.status}; its output exists once it has ended`);
    const file = batch.outputFileId === null ? null : await files.get(batch.organizationId, batch.outputFileId);
    reply.header('content-type', 'application/jsonl');
    // Every line failed or none ran: an empty output file (the error file says why).
    if (!file) return reply.send('');
    return reply.header('content-length', String(file.bytes)).send(await files.open(file));
  });
}

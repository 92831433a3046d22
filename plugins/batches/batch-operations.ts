import { Readable } from 'node:stream';
import { z } from 'zod';
import { authorizedRecord, type RecordKind } from '../../core/identity/authorization.ts';
import { visibleProjectIds } from '../../core/identity/project-access.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import { type AnyOperation, defineOperation } from '../../core/operations/operations.ts';
import type { GatewayFiles, StoredFile } from '../../core/ports/files.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { microsToUsd } from '../../core/vocabulary/money.ts';
import { listResponse, pageQuery } from '../../core/vocabulary/pagination.ts';
import { BATCH_STATUSES, batchOutputView, managedBatchListView, managedBatchView } from './batch-schemas.ts';
import { cancelBatch, type StopDeps } from './batch-stops.ts';
import { type Batch, hasEnded } from './batch-store.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './batch-errors.ts';

export interface BatchOperationDeps extends StopDeps {
  identity: IdentityStores;
  files: GatewayFiles;
  batchKind: RecordKind<Batch>;
}

export const BATCHES_PAGE_DEFAULT = 50;
export const BATCHES_PAGE_MAX = 200;

const idParams = z.strictObject({ id: resourceId.describe('Batch id') });
const iso = (at: Date | null) => (at === null ? null : at.toISOString());

export function toManagedBatchView(batch: Batch): z.input<typeof managedBatchView> {
  return {
    object: 'batch',
    id: batch.id,
    status: batch.status,
    projectId: batch.projectId,
    keyId: batch.keyId,
    endpoint: batch.endpoint,
    models: batch.models,
    requestCounts: { total: batch.total, completed: batch.completed, failed: batch.failed },
    heldUsd: batch.heldMicros === null ? null : microsToUsd(batch.heldMicros),
    inputFileId: batch.inputFileId,
    outputFileId: batch.outputFileId,
    errorFileId: batch.errorFileId,
    errors: batch.errors,
    metadata: batch.metadata,
    createdAt: batch.createdAt.toISOString(),
    expiresAt: batch.expiresAt.toISOString(),
    finishedAt: iso(batch.completedAt ?? batch.failedAt ?? batch.cancelledAt ?? batch.expiredAt),
  };
}

/**
 * An ended batch's output file, or null when no line was answered 2xx (the output is then empty, as
 * GET /v1/batches/{id}/content answers it). 404 batch_not_finished while the batch runs.
 */
export async function outputFileOf(files: GatewayFiles, batch: Batch): Promise<StoredFile | null> {
  if (!hasEnded(batch)) throw new ApiError('batch_not_finished', `Batch ${batch.id} is ${batch.status}; its output exists once it has ended`, { param: 'id' });
  return batch.outputFileId === null ? null : files.get(batch.organizationId, batch.outputFileId);
}

/**
 * The batches of /v1 seen from the management API (the console's Batches section): who reaches a
 * batch is the kernel's decision on the batch record kind, as for /v1 (plugins/batches/README.md,
 * "Management operations", says which scope each takes and why).
 */
export function batchOperations(deps: BatchOperationDeps): AnyOperation[] {
  const { identity, files, batchKind } = deps;

  const list = defineOperation({
    name: 'batches.list',
    method: 'GET',
    path: '/batches',
    summary: "The organisation's batches, newest first, with their progress",
    description:
      'Every batch the caller sees: an API key its own project’s (whatever other scopes it holds, as on /v1), a connector its project’s, ' +
      'a member the projects they have a role on, owners and admins every project’s. Filters: projectId, keyId, status. Scope usage:read.',
    scope: 'usage:read',
    readOnly: true,
    query: pageQuery({ defaultLimit: BATCHES_PAGE_DEFAULT, maxLimit: BATCHES_PAGE_MAX, id: resourceId }).extend({
      projectId: resourceId.optional().describe('Only batches of this project'),
      keyId: resourceId.optional().describe('Only batches created with this API key'),
      status: z.enum(BATCH_STATUSES).optional().describe('Only batches in this status'),
    }),
    resource: { kind: 'project', access: 'read', in: 'query', field: 'projectId', keyOwnProjectOnly: true },
    output: managedBatchListView,
    async handler({ query }, { credential }) {
      // A key lists its own project's batches only, even holding projects:write (as GET /v1/batches).
      const visible = credential.kind === 'key' ? [credential.projectId] : await visibleProjectIds(identity, credential);
      const filter = { organizationId: credential.organizationId, visibleProjectIds: visible, projectId: query.projectId, keyId: query.keyId, status: query.status };
      return listResponse(await deps.store.page(filter, query), toManagedBatchView);
    },
  });

  const get = defineOperation({
    name: 'batches.get',
    method: 'GET',
    path: '/batches/:id',
    summary: 'One batch with its progress',
    description: 'A batch the caller does not reach answers 404 batch_not_found, as one that does not exist. Scope usage:read.',
    scope: 'usage:read',
    readOnly: true,
    params: idParams,
    resource: { kind: batchKind, access: 'read', in: 'path', field: 'id', keyOwnProjectOnly: true },
    output: managedBatchView,
    async handler(_input, { authorization }) {
      return toManagedBatchView(authorizedRecord(authorization, batchKind).record);
    },
  });

  const output = defineOperation({
    name: 'batches.output',
    method: 'GET',
    path: '/batches/:id/output',
    summary: "An ended batch's output file; with Accept: application/octet-stream, its JSONL",
    description: [
      'As JSON, the output file’s record. With `Accept: application/octet-stream` the file itself as a download',
      '(`application/jsonl`, the same bytes as GET /v1/batches/{id}/content; empty when no line was answered 2xx).',
      '404 batch_not_finished until the batch has ended (completed, cancelled, expired or failed).',
      'Model outputs are as sensitive as request bodies, so reading them takes what reading the request log’s bodies takes:',
      'the scope requests:read, and for a person the role that reads bodies: an owner or admin, or an admin or developer of',
      'the batch’s project (a viewer gets 403 project_role_insufficient).',
    ].join(' '),
    scope: 'requests:read',
    readOnly: true,
    params: idParams,
    // Write access on the batch's project is exactly the request log's body rule for people (plugins/usage
    // mayReadBodies: owners, admins, and the project's admins and developers, never its viewers); a key
    // holding requests:read reaches its own project's batches, as it reads its own project's bodies.
    resource: { kind: batchKind, access: 'write', in: 'path', field: 'id', keyOwnProjectOnly: true },
    errors: ['batch_not_finished', 'file_not_found'],
    output: batchOutputView,
    async handler(_input, { authorization }) {
      const batch = authorizedRecord(authorization, batchKind).record;
      const file = await outputFileOf(files, batch);
      return {
        object: 'batch_output' as const,
        batchId: batch.id,
        fileId: file?.id ?? null,
        filename: file?.filename ?? `batch_${batch.id}_output.jsonl`,
        bytes: file?.bytes ?? 0,
        contentType: 'application/jsonl' as const,
      };
    },
    async download(answer, { credential }) {
      const file = answer.fileId === null ? null : await files.get(credential.organizationId, answer.fileId);
      if (answer.fileId !== null && !file) throw new ApiError('file_not_found', `The output file of batch ${answer.batchId} is gone`, { param: 'id' });
      const stream = file ? await files.open(file) : Readable.from([]);
      return { filename: answer.filename, contentType: answer.contentType, size: answer.bytes, stream };
    },
  });

  const cancel = defineOperation({
    name: 'batches.cancel',
    method: 'POST',
    path: '/batches/:id/cancel',
    summary: 'Cancel a running batch: no new line starts; lines already running finish and are billed',
    description:
      'The same cancel as POST /v1/batches/{id}/cancel: from in_progress (409 batch_not_cancellable once it has ended; a batch already cancelling ' +
      'answers as it is). What the lines did not spend is given back when it ends. Scope inference: stopping a batch is the act that starts one.',
    scope: 'inference',
    readOnly: false,
    idempotent: true,
    params: idParams,
    resource: { kind: batchKind, access: 'write', in: 'path', field: 'id', keyOwnProjectOnly: true },
    errors: ['batch_not_cancellable'],
    output: managedBatchView,
    async handler(_input, { credential, authorization }) {
      const batch = authorizedRecord(authorization, batchKind).record;
      return toManagedBatchView(await cancelBatch(deps, batch, actorOf(credential)));
    },
  });

  return [list, get, output, cancel];
}

import { z } from 'zod';
import type { Credential } from '../../core/identity/credential.ts';
import { visibleProjectIds } from '../../core/identity/project-access.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { LongRunningOperations } from '../../core/operations/long-running.ts';
import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import type { ProgressFilter } from '../../core/ports/long-running.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { listOf, listResponse, pageQuery } from '../../core/vocabulary/pagination.ts';
import { operationView, toOperationView } from './operation-view.ts';
import { viewerOf } from './caller.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './account-errors.ts';

interface Deps {
  identity: IdentityStores;
  longRunning: LongRunningOperations;
  clock: () => Date;
}

/** How long a finished operation stays on the progress list. */
const RECENT_MS = 24 * 3_600_000;

const progressListView = listOf(operationView);

const hideRequest = z
  .strictObject({
    operationIds: z.array(resourceId).min(1).max(100).optional().describe('These operations'),
    all: z.literal(true).optional().describe('Every operation the list shows now'),
  })
  .refine((body) => (body.operationIds === undefined) !== (body.all === undefined), { message: 'send either operationIds or all: true' });

const hiddenView = z
  .object({ object: z.literal('ack'), ok: z.literal(true), hidden: z.number().int().describe('Operations hidden now (already hidden or not listed: not counted)') })
  .meta({ id: 'ProgressHidden', description: 'What a hide did' });

export function progressOperations({ identity, longRunning, clock }: Deps): AnyOperation[] {
  async function filterFor(credential: Credential): Promise<ProgressFilter> {
    return { viewer: viewerOf(credential), projectIds: await visibleProjectIds(identity, credential), finishedSince: new Date(clock().getTime() - RECENT_MS) };
  }

  const get = defineOperation({
    name: 'operations.get',
    method: 'GET',
    path: '/operations/:id',
    summary: 'A long-running operation: its status and, once finished, its result or error',
    description:
      'Poll it after an answer 202 (DELETE /client/account answers one). Status moves queued → running → succeeded or failed; a queued operation may be cancelled by the act its kind offers (POST /client/account/deletion/cancel). ' +
      "An operation of another organisation, or of a project the caller does not see, is 404 `operation_not_found`; one of no project (the account's own) is seen by every credential of the organisation.",
    scope: null,
    readOnly: true,
    wide: true,
    params: z.strictObject({ id: resourceId.describe('Operation id') }),
    errors: ['operation_not_found'],
    output: operationView,
    async handler({ params }, { credential }) {
      const operation = await longRunning.get(credential.organizationId, params.id);
      const projects = operation?.projectId ? await visibleProjectIds(identity, credential) : null;
      if (!operation || (operation.projectId !== null && projects !== null && !projects.includes(operation.projectId))) {
        throw new ApiError('operation_not_found', `No operation ${params.id}`, { param: 'id' });
      }
      return toOperationView(operation);
    },
  });

  const list = defineOperation({
    name: 'account.progress.list',
    method: 'GET',
    path: '/progress',
    summary: 'Work in progress and recently finished, newest first',
    description:
      "The organisation's long-running operations the caller sees (those of its projects and the account's own): every unfinished one, and those finished in the last 24 hours, but none the caller hid (POST /client/progress/hide). Hiding is per person (per key for a key): a teammate still sees what you hid.",
    scope: null,
    readOnly: true,
    query: pageQuery({ defaultLimit: 20, maxLimit: 100, id: resourceId }),
    output: progressListView,
    async handler({ query }, { credential }) {
      const page = await longRunning.list(credential.organizationId, await filterFor(credential), query);
      return listResponse(page, toOperationView);
    },
  });

  const hide = defineOperation({
    name: 'account.progress.hide',
    method: 'POST',
    path: '/progress/hide',
    summary: 'Hide operations from your progress list',
    description:
      'Either the operations named, or `all: true` for every one the list shows now (operations started later are listed). Hidden for the caller only (the person, or the key): teammates still see them, and the operation itself is unchanged (GET /client/operations/{id}). Ids of operations the list does not show are ignored.',
    scope: null,
    readOnly: false,
    idempotent: true,
    body: hideRequest,
    output: hiddenView,
    async handler({ body }, { credential }) {
      const hidden = await longRunning.hide(credential.organizationId, await filterFor(credential), body.all ? 'all' : (body.operationIds ?? []));
      return { object: 'ack' as const, ok: true as const, hidden };
    },
  });

  return [get, list, hide];
}

import { z } from 'zod';
import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import { sequenceId } from '../../core/vocabulary/ids.ts';
import { listOf, listResponse, pageQuery } from '../../core/vocabulary/pagination.ts';
import { instantView } from '../../core/vocabulary/timestamps.ts';
import type { AuditEntry, AuditStore } from './audit-store.ts';

export const AUDIT_PAGE_DEFAULT = 50;
export const AUDIT_PAGE_MAX = 200;

const auditEntryView = z
  .object({
    object: z.literal('audit_entry'),
    id: z.uuid().describe('The id of the management.operation event this entry records'),
    occurredAt: instantView.describe('When the operation ran'),
    operation: z.string().describe('Operation name, e.g. keys.update'),
    method: z.enum(['POST', 'PUT', 'PATCH', 'DELETE']),
    path: z.string().describe('Path template under /client, e.g. /keys/:id'),
    params: z.record(z.string(), z.string()).describe('The path parameters of the call'),
    targetId: z.string().nullable().describe('The resource acted on: the id path parameter, or the id of what a create made; null when none'),
    actor: z.object({
      kind: z.enum(['person', 'key']),
      id: z.string().describe('Person id or API key id'),
      label: z.string().describe("The person's email or the key's name at the time"),
    }),
    credential: z.object({
      kind: z.enum(['session', 'key', 'connector']),
      id: z.string().describe('The session id, the API key id, or the OAuth grant id of a connector, the call was made with'),
    }),
    outcome: z.object({
      status: z.number().int().describe('HTTP status answered'),
      succeeded: z.boolean(),
      code: z.string().nullable().describe('The error code when it failed'),
    }),
    requestId: z.string().describe('x-request-id of the call'),
  })
  .meta({ id: 'AuditEntry', description: 'One management call that writes: who, what, when, with which credential, and the outcome' });

const auditEntryListView = listOf(auditEntryView);

const auditQuery = pageQuery({ defaultLimit: AUDIT_PAGE_DEFAULT, maxLimit: AUDIT_PAGE_MAX, id: sequenceId }).extend({
  operation: z.string().min(1).max(100).optional().describe('Only this operation, e.g. keys.create'),
  actorId: z.string().min(1).max(100).optional().describe('Only calls by this person or API key (its id)'),
});

function toView(entry: AuditEntry) {
  return {
    object: 'audit_entry' as const,
    id: entry.eventId,
    occurredAt: entry.occurredAt.toISOString(),
    operation: entry.operation,
    method: entry.method as 'POST' | 'PUT' | 'PATCH' | 'DELETE',
    path: entry.path,
    params: entry.params,
    targetId: entry.targetId,
    actor: entry.actor,
    credential: entry.credential,
    outcome: { status: entry.status, succeeded: entry.status < 400, code: entry.errorCode },
    requestId: entry.requestId,
  };
}

export function auditOperations({ store }: { store: AuditStore }): AnyOperation[] {
  const list = defineOperation({
    name: 'audit.list',
    method: 'GET',
    path: '/audit-log',
    summary: 'Who changed what through the management API, newest first',
    description:
      'One entry per management call that writes (every method but GET), whatever its outcome: who (person or API key, and the credential used), ' +
      'what (operation and target), when, and the HTTP status. Calls refused before they reach the operation (no credential, missing scope) are not listed. ' +
      'Entries appear moments after the call (they are written from the management.operation event). ' +
      'Filters combine. Pass nextCursor back as cursor, with the same filters, for the next page; nextCursor is null on the last page. Owner only.',
    scope: null,
    ownerOnly: true,
    readOnly: true,
    query: auditQuery,
    output: auditEntryListView,
    async handler({ query }, { credential }) {
      const page = await store.page({ organizationId: credential.organizationId, operation: query.operation, actorId: query.actorId }, query);
      return listResponse(page, toView);
    },
  });
  return [list];
}

import { z } from 'zod';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import { authorizedRecord, type RecordKind } from '../../core/identity/authorization.ts';
import { personIdOf } from '../../core/identity/credential.ts';
import { visibleProjectIds } from '../../core/identity/project-access.ts';
import type { OrgRole } from '../../core/identity/scopes.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import { type AnyOperation, defineOperation } from '../../core/operations/operations.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { listResponse, pageQuery } from '../../core/vocabulary/pagination.ts';
import { approvalListView, approvalStatus, approvalView, decisionRequest, waitingApprovalsView } from './approval-schemas.ts';
import type { ApprovalStore, McpApproval } from './approval-store.ts';
import { type Approvals, approvalEventFields } from './approvals.ts';
import type { ToolGatewayConfig } from './tool-gateway-config.ts';
import { MCP_PAGE_DEFAULT, MCP_PAGE_MAX } from './upstream-operations.ts';
// Catalogues the codes and event types this module answers with and emits.
import './tool-gateway-errors.ts';
import './tool-gateway-events.ts';

/** Owners and admins: the people who decide which tools keys may use, and which of their calls run. */
const MANAGERS: readonly OrgRole[] = ['owner', 'admin'];

export interface ApprovalOperationDeps {
  store: ApprovalStore;
  approvals: Approvals;
  identity: IdentityStores;
  events: DomainEvents;
  clock: () => Date;
  config: Pick<ToolGatewayConfig, 'approvalTtlMs'>;
}

/** Approvals as a resource kind: reached through their project, like the tools they are for. */
export function approvalRecordKind(store: ApprovalStore): RecordKind<McpApproval> {
  return {
    name: 'mcp approval',
    notFound: 'mcp_approval_not_found',
    async find(organizationId, id) {
      const approval = await store.get(organizationId, id);
      return approval ? { record: approval, projectId: approval.projectId } : null;
    },
  };
}

export function toApprovalView(approval: McpApproval) {
  return {
    object: 'mcp_approval' as const,
    id: approval.id,
    status: approval.status,
    projectId: approval.projectId,
    keyId: approval.keyId,
    tool: { id: approval.toolId, gatewayName: approval.gatewayName },
    upstreamId: approval.upstreamId,
    argumentsHash: approval.argumentsHash,
    requestedAt: approval.requestedAt.toISOString(),
    expiresAt: approval.expiresAt.toISOString(),
    decidedAt: approval.decidedAt?.toISOString() ?? null,
    decidedBy: approval.decidedBy,
    reason: approval.reason,
    usedAt: approval.usedAt?.toISOString() ?? null,
  };
}

const idParams = z.strictObject({ id: resourceId.describe('Approval id') });
const WAITING_DEFAULT = 50;

export function approvalOperations(deps: ApprovalOperationDeps): AnyOperation[] {
  const { store, approvals, identity, events, clock, config } = deps;
  const approvalKind = approvalRecordKind(store);
  const decideApproval = { kind: approvalKind, access: 'write', in: 'path', field: 'id' } as const;

  const list = defineOperation({
    name: 'mcp.approvals.list',
    method: 'GET',
    path: '/mcp/approvals',
    summary: 'List the approvals of tool calls, newest first, whatever their status',
    scope: 'mcp:read',
    readOnly: true,
    query: pageQuery({ defaultLimit: MCP_PAGE_DEFAULT, maxLimit: MCP_PAGE_MAX, id: resourceId }).extend({
      status: approvalStatus.optional().describe('Only approvals in this status'),
      projectId: resourceId.optional().describe('Only approvals of this project'),
      keyId: resourceId.optional().describe("Only approvals of this key's calls"),
      toolId: resourceId.optional().describe('Only approvals of calls of this tool'),
    }),
    resource: { kind: 'project', access: 'read', in: 'query', field: 'projectId' },
    output: approvalListView,
    async handler({ query }, { credential }) {
      const visible = await visibleProjectIds(identity, credential);
      const page = await store.page(
        { organizationId: credential.organizationId, visibleProjectIds: visible, status: query.status, projectId: query.projectId, keyId: query.keyId, toolId: query.toolId },
        query,
      );
      return listResponse(page, toApprovalView);
    },
  });

  const waiting = defineOperation({
    name: 'mcp.approvals.waiting',
    method: 'GET',
    path: '/mcp/approvals/waiting',
    summary: 'The tool calls waiting for a decision, oldest first: the queue a person works through',
    description: 'Pending and unexpired approvals, each with its tool, upstream and key named. Not paged: hasMore says more wait than limit.',
    scope: 'mcp:read',
    readOnly: true,
    query: z.object({
      limit: z.coerce.number().int().min(1).max(MCP_PAGE_MAX).default(WAITING_DEFAULT).describe(`At most this many (default ${WAITING_DEFAULT}, max ${MCP_PAGE_MAX})`),
      projectId: resourceId.optional().describe('Only calls of this project'),
    }),
    resource: { kind: 'project', access: 'read', in: 'query', field: 'projectId' },
    output: waitingApprovalsView,
    async handler({ query }, { credential }) {
      const visible = await visibleProjectIds(identity, credential);
      const rows = await store.waiting(credential.organizationId, visible, query.projectId, clock(), query.limit);
      const shown = rows.slice(0, query.limit);
      const keyNames = new Map<string, string | null>();
      for (const keyId of new Set(shown.map((row) => row.keyId))) keyNames.set(keyId, (await identity.apiKeys.get(credential.organizationId, keyId))?.name ?? null);
      return {
        object: 'list' as const,
        data: shown.map((row) => ({
          object: 'mcp_approval_waiting' as const,
          id: row.id,
          projectId: row.projectId,
          tool: { id: row.toolId, name: row.toolName, gatewayName: row.gatewayName },
          upstream: { id: row.upstreamId, name: row.upstreamName },
          key: { id: row.keyId, name: keyNames.get(row.keyId) ?? null },
          argumentsHash: row.argumentsHash,
          requestedAt: row.requestedAt.toISOString(),
          expiresAt: row.expiresAt.toISOString(),
        })),
        hasMore: rows.length > query.limit,
      };
    },
  });

  function decision(status: 'approved' | 'denied') {
    const verb = status === 'approved' ? 'approve' : 'deny';
    return defineOperation({
      name: `mcp.approvals.${verb}`,
      method: 'POST',
      path: `/mcp/approvals/:id/${verb}`,
      summary:
        status === 'approved'
          ? 'Approve a waiting tool call: it runs once (now if it still waits, else when the agent retries it)'
          : 'Deny a waiting tool call: the agent is answered an error with the reason',
      description:
        "A person's decision: an owner's or admin's own session only (403 role_required to API keys, connectors and members), so an agent's key " +
        'can never approve its own calls. 409 approval_not_pending when it is decided or expired already. ' +
        (status === 'approved' ? `The call must run within ${config.approvalTtlMs / 1000} s of the approval (expiresAt), or the approval lapses.` : ''),
      scope: null,
      roles: MANAGERS,
      readOnly: false,
      params: idParams,
      body: decisionRequest,
      resource: decideApproval,
      errors: ['approval_not_pending'],
      output: approvalView,
      async handler({ body }, { credential, transaction, authorization }) {
        const approval = authorizedRecord(authorization, approvalKind).record;
        // Roles admit only a person's own session, so there is always a person here.
        const by = personIdOf(credential) ?? '';
        const now = clock();
        const decided = await transaction(async (tx) => {
          const row = await store.decide(tx, credential.organizationId, approval.id, {
            status,
            by,
            reason: body.reason ?? null,
            now,
            // Approved: the agent gets a whole TTL from now to retry a call that stopped waiting.
            expiresAt: status === 'approved' ? new Date(now.getTime() + config.approvalTtlMs) : approval.expiresAt,
          });
          if (!row) throw new ApiError('approval_not_pending', `Approval ${approval.id} is ${approval.status === 'pending' ? 'expired' : approval.status} already`);
          const data = { ...approvalEventFields(row), decidedBy: by, reason: row.reason };
          if (status === 'approved') {
            await events.emit(tx, {
              type: 'mcp.approval.approved',
              organizationId: credential.organizationId,
              subject: row.id,
              actor: actorOf(credential),
              data: { ...data, expiresAt: row.expiresAt.toISOString() },
            });
          } else {
            await events.emit(tx, { type: 'mcp.approval.denied', organizationId: credential.organizationId, subject: row.id, actor: actorOf(credential), data });
          }
          approvals.announceAfter(tx, [row.id]);
          return row;
        });
        return toApprovalView(decided);
      },
    });
  }

  return [list, waiting, decision('approved'), decision('denied')];
}

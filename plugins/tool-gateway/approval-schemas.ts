import { z } from 'zod';
import { listOf } from '../../core/vocabulary/pagination.ts';
import { instantView } from '../../core/vocabulary/timestamps.ts';

/** The wire views of approvals: named schemas of the OpenAPI document (`.meta({ id })`), declared once here. */

export const approvalStatus = z
  .enum(['pending', 'approved', 'denied', 'expired'])
  .describe('pending: waiting for a person; approved: the call runs once; denied; expired: nobody decided in time, or approved but never used in time');

export const approvalView = z
  .object({
    object: z.literal('mcp_approval'),
    id: z.uuid(),
    status: approvalStatus,
    projectId: z.uuid(),
    keyId: z.uuid().describe('The key whose call needs the approval'),
    tool: z.object({ id: z.uuid(), gatewayName: z.string().describe('The name the agent called it by') }),
    upstreamId: z.uuid(),
    argumentsHash: z.string().describe("SHA-256 (hex) of the arguments' canonical JSON: the arguments themselves are never stored"),
    requestedAt: instantView,
    expiresAt: instantView.describe('Pending: when it lapses undecided. Approved: by when the call must run'),
    decidedAt: instantView.nullable().describe('When a person decided, or when it lapsed'),
    decidedBy: z.uuid().nullable().describe('The person (owner or admin) who decided'),
    reason: z.string().nullable(),
    usedAt: instantView.nullable().describe('When the call it released ran'),
  })
  .meta({ id: 'McpApproval', description: "A person's decision, to come or made, on one exact tool call (key, tool, arguments, policy version)" });

export const approvalListView = listOf(approvalView);

export const waitingApprovalView = z
  .object({
    object: z.literal('mcp_approval_waiting'),
    id: z.uuid(),
    projectId: z.uuid(),
    tool: z.object({ id: z.uuid(), name: z.string().describe("The tool's name at the server"), gatewayName: z.string() }),
    upstream: z.object({ id: z.uuid(), name: z.string() }),
    key: z.object({ id: z.uuid(), name: z.string().nullable().describe('null when the key was deleted meanwhile') }),
    argumentsHash: z.string(),
    requestedAt: instantView,
    expiresAt: instantView,
  })
  .meta({ id: 'McpWaitingApproval', description: 'A tool call waiting for a decision' });

export const waitingApprovalsView = z
  .object({
    object: z.literal('list'),
    data: z.array(waitingApprovalView).describe('Oldest first: the order to decide them in'),
    hasMore: z.boolean().describe('More are waiting than limit: decide these first'),
  })
  .meta({ id: 'McpWaitingApprovalQueue', description: 'The tool calls waiting for a decision, oldest first' });

export const decisionRequest = z.strictObject({
  reason: z.string().trim().min(1).max(500).optional().describe('Told to the agent with a denial, recorded with either decision'),
});

import { z } from 'zod';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { listOf, pageQuery } from '../../core/vocabulary/pagination.ts';
import { dateOrTimestampSchema, dayView, instantView } from '../../core/vocabulary/timestamps.ts';
import { CALL_STATUSES } from './call-store.ts';

/** Query parameters and wire shapes of the tool-call usage routes and the gateway overview. */

export const CALLS_PAGE_DEFAULT = 50;
export const CALLS_PAGE_MAX = 200;

const status = z.enum(CALL_STATUSES);

export const toolUsageQuery = z.object({
  from: dateOrTimestampSchema.optional().describe('Start of the window, inclusive: YYYY-MM-DD (midnight UTC) or an ISO timestamp (default: 30 days before `to`)'),
  to: dateOrTimestampSchema.optional().describe('End of the window, exclusive: YYYY-MM-DD (midnight UTC) or an ISO timestamp (default: now)'),
  projectId: resourceId.optional().describe('Only calls of this project'),
  keyId: resourceId.optional().describe('Only calls made with this key; a key outside what the caller sees gives no rows'),
});

export const toolCallsQuery = pageQuery({ defaultLimit: CALLS_PAGE_DEFAULT, maxLimit: CALLS_PAGE_MAX, id: resourceId }).extend({
  projectId: resourceId.optional().describe('Only calls of this project'),
  keyId: resourceId.optional().describe('Only calls made with this key'),
  toolId: resourceId.optional().describe('Only calls of this tool'),
  upstreamId: resourceId.optional().describe('Only calls of tools of this upstream'),
  status: status.optional().describe('Only calls that ended so'),
});

export const overviewQuery = z.object({ projectId: resourceId.optional().describe('Only this project') });

const totals = {
  calls: z.number().int(),
  errors: z.number().int().describe('Calls that ended in anything but ok or a pending approval'),
  durationP50Ms: z.number().nullable().describe('Median duration in ms, approval wait included; null with no calls'),
  durationAvgMs: z.number().nullable(),
  requestBytes: z.number().int().describe('Bytes of the arguments as JSON'),
  responseBytes: z.number().int().describe('Bytes of the results as JSON'),
};

export const toolCallTotalsView = z.object(totals).meta({ id: 'ToolCallTotals', description: 'Calls, errors, durations and bytes of a set of tool calls' });

export const toolUsageView = z
  .object({
    object: z.literal('tool_usage'),
    from: instantView,
    to: instantView,
    totals: toolCallTotalsView,
    byTool: z.array(
      z.object({
        toolId: z.uuid().nullable().describe('Null for a tool deleted since'),
        gatewayName: z.string().describe('Its name at /mcp/gateway when last called'),
        upstreamSlug: z.string(),
        ...totals,
      }),
    ),
    byUpstream: z.array(z.object({ upstreamId: z.uuid().nullable().describe('Null for an upstream deleted since'), upstreamSlug: z.string(), ...totals })),
    byKey: z.array(z.object({ keyId: z.uuid(), ...totals })),
    byDay: z.array(z.object({ day: dayView, ...totals })).describe('UTC days with calls, oldest first'),
  })
  .meta({ id: 'ToolUsage', description: "Agents' tool calls at /mcp/gateway in a window: totals, per tool, upstream, key and day" });

export const toolCallView = z
  .object({
    object: z.literal('mcp_tool_call'),
    id: z.uuid(),
    projectId: z.uuid(),
    keyId: z.uuid(),
    groupId: z.uuid().nullable().describe('The first group granting the tool; null in a full-access project'),
    upstreamId: z.uuid().nullable(),
    upstreamSlug: z.string(),
    toolId: z.uuid().nullable().describe('Null once the tool is deleted; toolName and gatewayName stay'),
    toolName: z.string().describe('Its name at the server'),
    gatewayName: z.string(),
    status,
    errorKind: z.string().nullable().describe('For an upstream failure: refused_address, connect, timeout, too_large, protocol, http_status, mcp_error'),
    durationMs: z.number().int(),
    requestBytes: z.number().int(),
    responseBytes: z.number().int(),
    approvalId: z.uuid().nullable(),
    argumentsSha256: z.string().describe('SHA-256 (hex) of the arguments as canonical JSON; the arguments are never stored'),
    requestId: z.string(),
    createdAt: instantView,
  })
  .meta({ id: 'McpToolCall', description: 'One tool call at /mcp/gateway' });

export const toolCallListView = listOf(toolCallView);

export const overviewView = z
  .object({
    object: z.literal('list'),
    data: z.array(
      z
        .object({
          object: z.literal('mcp_overview'),
          projectId: z.uuid(),
          projectName: z.string(),
          mode: z.enum(['off', 'governed', 'full']),
          upstreams: z.object({ total: z.number().int(), ok: z.number().int(), error: z.number().int(), unknown: z.number().int() }).describe('By health status'),
          tools: z.object({ total: z.number().int(), enabled: z.number().int() }),
          groups: z.number().int(),
          grants: z.number().int().describe('Grants in force (unexpired)'),
          pendingApprovals: z.number().int(),
          calls: z.object({
            today: z.number().int().describe('Since midnight UTC'),
            todayErrors: z.number().int(),
            last24h: z.number().int(),
            last24hErrors: z.number().int(),
          }),
        })
        .meta({ id: 'McpOverview', description: "One project's tool gateway at a glance" }),
    ),
  })
  .meta({ id: 'McpOverviewList', description: 'The tool gateway of each project the caller sees' });

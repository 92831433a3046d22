import { visibleProjects } from '../../core/identity/project-access.ts';
import { type AnyOperation, defineOperation } from '../../core/operations/operations.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import { listResponse } from '../../core/vocabulary/pagination.ts';
import { usageVisibility, VISIBILITY } from '../usage/usage-access.ts';
import { resolveRange } from '../usage/usage-query.ts';
import type { ApprovalGate } from './approval-gate.ts';
import type { CallFilter, CallStore, ToolCallRow } from './call-store.ts';
import { overviewQuery, overviewView, toolCallListView, toolCallsQuery, toolUsageQuery, toolUsageView } from './call-schemas.ts';
import type { GrantStore } from './grant-store.ts';
import type { GroupStore } from './group-store.ts';
import type { SwitchStore } from './switch-store.ts';
import type { ToolStore } from './tool-store.ts';
import type { UpstreamStore } from './upstream-store.ts';

export interface CallOperationDeps {
  calls: CallStore;
  upstreams: UpstreamStore;
  tools: ToolStore;
  switches: SwitchStore;
  groups: GroupStore;
  grants: GrantStore;
  approvals: ApprovalGate;
  identity: IdentityStores;
  clock: () => Date;
}

const DAY_MS = 86_400_000;

/** The projects of the usage rule (plugins/usage: a key its own only), narrowed to `projectId` when given. */
async function callProjects(identity: IdentityStores, credential: Parameters<typeof usageVisibility>[1], projectId: string | undefined) {
  const visibility = await usageVisibility(identity, credential);
  if (projectId === undefined) return visibility.projectIds;
  return visibility.projectIds === null || visibility.projectIds.includes(projectId) ? [projectId] : [];
}

function toCallView(row: ToolCallRow) {
  return {
    object: 'mcp_tool_call' as const,
    id: row.id,
    projectId: row.projectId,
    keyId: row.keyId,
    groupId: row.groupId,
    upstreamId: row.upstreamId,
    upstreamSlug: row.upstreamSlug,
    toolId: row.toolId,
    toolName: row.toolName,
    gatewayName: row.gatewayName,
    status: row.status,
    errorKind: row.errorKind,
    durationMs: row.durationMs,
    requestBytes: row.requestBytes,
    responseBytes: row.responseBytes,
    approvalId: row.approvalId,
    argumentsSha256: row.argumentsSha256,
    requestId: row.requestId,
    createdAt: row.createdAt.toISOString(),
  };
}

/** Tool-call usage (`/usage/tools`, `/usage/tools/calls`) and the gateway overview (`/mcp/overview`). */
export function callOperations({ calls, upstreams, tools, switches, groups, grants, approvals, identity, clock }: CallOperationDeps): AnyOperation[] {
  const usage = defineOperation({
    name: 'usage.tools',
    method: 'GET',
    path: '/usage/tools',
    summary: "Agents' tool calls at /mcp/gateway: totals per tool, upstream, key and day",
    description: `The window [from, to) (default the last 30 days). Errors are calls that ended in anything but ok or a pending approval. ${VISIBILITY} Scope usage:read.`,
    scope: 'usage:read',
    readOnly: true,
    query: toolUsageQuery,
    resource: { kind: 'project', access: 'read', in: 'query', field: 'projectId' },
    output: toolUsageView,
    async handler({ query }, { credential }) {
      const range = resolveRange(query, clock());
      const filter: CallFilter = { organizationId: credential.organizationId, projectIds: await callProjects(identity, credential, query.projectId), keyId: query.keyId, ...range };
      const [all, byTool, byUpstream, byKey, byDay] = await Promise.all([
        calls.totals(filter),
        calls.totalsBy(filter, 'tool'),
        calls.totalsBy(filter, 'upstream'),
        calls.totalsBy(filter, 'key'),
        calls.totalsBy(filter, 'day'),
      ]);
      return {
        object: 'tool_usage' as const,
        from: range.from.toISOString(),
        to: range.to.toISOString(),
        totals: all,
        byTool: byTool.map((each) => ({ toolId: each.id, gatewayName: each.label ?? '', upstreamSlug: each.extra ?? '', ...each.totals })),
        byUpstream: byUpstream.map((each) => ({ upstreamId: each.id, upstreamSlug: each.label ?? '', ...each.totals })),
        byKey: byKey.map((each) => ({ keyId: each.id!, ...each.totals })),
        byDay: byDay.map((each) => ({ day: each.id!, ...each.totals })),
      };
    },
  });

  const list = defineOperation({
    name: 'usage.tools.calls',
    method: 'GET',
    path: '/usage/tools/calls',
    summary: 'Tool calls at /mcp/gateway, newest first, with keyset pagination',
    description: `Each call's key, group, upstream, tool, status, duration, bytes and approval; the arguments only as their SHA-256. Pass nextCursor back as cursor, with the same filters, for the next page; nextCursor is null on the last page. ${VISIBILITY} Scope usage:read.`,
    scope: 'usage:read',
    readOnly: true,
    query: toolCallsQuery,
    resource: { kind: 'project', access: 'read', in: 'query', field: 'projectId' },
    output: toolCallListView,
    async handler({ query }, { credential }) {
      const filter: CallFilter = {
        organizationId: credential.organizationId,
        projectIds: await callProjects(identity, credential, query.projectId),
        keyId: query.keyId,
        toolId: query.toolId,
        upstreamId: query.upstreamId,
        status: query.status,
      };
      return listResponse(await calls.page(filter, query), toCallView);
    },
  });

  const overview = defineOperation({
    name: 'mcp.overview',
    method: 'GET',
    path: '/mcp/overview',
    summary: "Each visible project's tool gateway: upstreams by health, tools, groups, grants, pending approvals and calls",
    description: 'Calls today count from midnight UTC; errors are calls that ended in anything but ok or a pending approval. Scope mcp:read.',
    scope: 'mcp:read',
    readOnly: true,
    query: overviewQuery,
    resource: { kind: 'project', access: 'read', in: 'query', field: 'projectId' },
    output: overviewView,
    async handler({ query }, { credential }) {
      const organizationId = credential.organizationId;
      const projects = (await visibleProjects(identity, credential)).filter((project) => query.projectId === undefined || project.id === query.projectId);
      const projectIds = projects.map((project) => project.id);
      const now = clock();
      const midnight = new Date(Math.floor(now.getTime() / DAY_MS) * DAY_MS);
      const [modes, toolCounts, groupCounts, grantCounts, page, today, lastDay] = await Promise.all([
        switches.modes(organizationId),
        tools.countsByProject(organizationId),
        groups.countsByProject(organizationId),
        grants.countsByProject(organizationId, now),
        upstreams.page({ organizationId, visibleProjectIds: projectIds }, { limit: 10_000 }),
        calls.countsByProject(organizationId, projectIds, midnight),
        calls.countsByProject(organizationId, projectIds, new Date(now.getTime() - DAY_MS)),
      ]);
      const health = new Map<string, { total: number; ok: number; error: number; unknown: number }>();
      for (const upstream of page.items) {
        const counts = health.get(upstream.projectId) ?? { total: 0, ok: 0, error: 0, unknown: 0 };
        counts.total += 1;
        counts[upstream.health.status] += 1;
        health.set(upstream.projectId, counts);
      }
      const data = [];
      for (const project of projects) {
        const count = toolCounts.get(project.id);
        data.push({
          object: 'mcp_overview' as const,
          projectId: project.id,
          projectName: project.name,
          mode: modes.get(project.id)?.mode ?? ('governed' as const),
          upstreams: health.get(project.id) ?? { total: 0, ok: 0, error: 0, unknown: 0 },
          tools: { total: count?.total ?? 0, enabled: count?.enabled ?? 0 },
          groups: groupCounts.get(project.id) ?? 0,
          grants: grantCounts.get(project.id) ?? 0,
          pendingApprovals: await approvals.countPending(organizationId, [project.id]),
          calls: {
            today: today.get(project.id)?.calls ?? 0,
            todayErrors: today.get(project.id)?.errors ?? 0,
            last24h: lastDay.get(project.id)?.calls ?? 0,
            last24hErrors: lastDay.get(project.id)?.errors ?? 0,
          },
        });
      }
      return { object: 'list' as const, data };
    },
  });

  return [usage, list, overview];
}

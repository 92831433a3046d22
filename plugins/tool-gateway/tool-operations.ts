import type { OrgRole } from '../../core/identity/scopes.ts';
import { z } from 'zod';
import { authorizedProject, authorizedRecord, type RecordKind } from '../../core/identity/authorization.ts';
import { visibleProjects, visibleProjectIds } from '../../core/identity/project-access.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { type AnyOperation, defineOperation } from '../../core/operations/operations.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { listResponse, pageQuery } from '../../core/vocabulary/pagination.ts';
import type { SwitchStore } from './switch-store.ts';
import { approvedToolsView, approveToolsRequest, switchListView, switchRequest, switchView, toolListView, toolView, updateToolRequest } from './tool-gateway-schemas.ts';
import type { McpTool, ToolStore } from './tool-store.ts';
import { MCP_PAGE_DEFAULT, MCP_PAGE_MAX } from './upstream-operations.ts';
import type { UpstreamStore } from './upstream-store.ts';
// Catalogues the codes this module answers with.
import './tool-gateway-errors.ts';

/** Owners and admins: the people who decide which tools keys may use. */
const MANAGERS: readonly OrgRole[] = ['owner', 'admin'];

export interface ToolOperationDeps {
  tools: ToolStore;
  upstreams: UpstreamStore;
  switches: SwitchStore;
  identity: IdentityStores;
  clock: () => Date;
}

/** Tools as a resource kind: reached through their project. */
export function toolRecordKind(tools: ToolStore): RecordKind<McpTool> {
  return {
    name: 'mcp tool',
    notFound: 'mcp_tool_not_found',
    async find(organizationId, id) {
      const tool = await tools.get(organizationId, id);
      return tool ? { record: tool, projectId: tool.projectId } : null;
    },
  };
}

/** MCP's default for a tool that says nothing: destructive unless it is read-only. */
export function isDestructive(tool: McpTool): boolean {
  const hints = tool.annotations ?? {};
  if (hints.readOnlyHint === true) return false;
  return hints.destructiveHint !== false;
}

function toToolView(tool: McpTool, slug: string) {
  return {
    object: 'mcp_tool' as const,
    id: tool.id,
    upstreamId: tool.upstreamId,
    projectId: tool.projectId,
    name: tool.name,
    gatewayName: `${slug}__${tool.alias ?? tool.name}`,
    title: tool.title,
    description: tool.descriptionOverride ?? tool.description,
    upstreamDescription: tool.description,
    descriptionOverride: tool.descriptionOverride,
    alias: tool.alias,
    enabled: tool.enabled,
    approval: tool.approval,
    destructive: isDestructive(tool),
    inputSchema: tool.inputSchema,
    outputSchema: tool.outputSchema,
    annotations: tool.annotations,
    discoveredAt: tool.discoveredAt.toISOString(),
    changedAt: tool.changedAt.toISOString(),
    createdAt: tool.createdAt.toISOString(),
    updatedAt: tool.updatedAt.toISOString(),
  };
}

const idParams = z.strictObject({ id: resourceId.describe('Tool id') });
const projectParams = z.strictObject({ id: resourceId.describe('Project id') });

export function toolOperations(deps: ToolOperationDeps): AnyOperation[] {
  const { tools, upstreams, switches, identity, clock } = deps;
  const toolKind = toolRecordKind(tools);

  /** The slug of each tool's upstream, to name it as the gateway does. */
  async function slugs(organizationId: string, items: readonly McpTool[]): Promise<Map<string, string>> {
    const bySlug = new Map<string, string>();
    for (const upstreamId of new Set(items.map((tool) => tool.upstreamId))) {
      const upstream = await upstreams.get(organizationId, upstreamId);
      if (upstream) bySlug.set(upstreamId, upstream.slug);
    }
    return bySlug;
  }

  const list = defineOperation({
    name: 'mcp.tools.list',
    method: 'GET',
    path: '/mcp/tools',
    summary: "List the tools the upstreams list, newest first, with each one's switch, alias and approval policy",
    scope: 'mcp:read',
    readOnly: true,
    query: pageQuery({ defaultLimit: MCP_PAGE_DEFAULT, maxLimit: MCP_PAGE_MAX, id: resourceId }).extend({
      upstreamId: resourceId.optional().describe('Only tools of this upstream'),
      enabled: z
        .enum(['true', 'false'])
        .transform((value) => value === 'true')
        .optional()
        .describe('Only tools switched on (true) or off (false)'),
    }),
    output: toolListView,
    async handler({ query }, { credential }) {
      const visible = await visibleProjectIds(identity, credential);
      const page = await tools.page({ organizationId: credential.organizationId, visibleProjectIds: visible, upstreamId: query.upstreamId, enabled: query.enabled }, query);
      const bySlug = await slugs(credential.organizationId, page.items);
      return listResponse(page, (tool) => toToolView(tool, bySlug.get(tool.upstreamId) ?? ''));
    },
  });

  const update = defineOperation({
    name: 'mcp.tools.update',
    method: 'PATCH',
    path: '/mcp/tools/:id',
    summary: 'Switch a tool on or off, alias it, override its description or set its approval policy',
    description:
      "The alias replaces the server's name in <slug>__<name> at /mcp/gateway; it must be unique among the upstream's tools' names and aliases. " +
      'A refresh keeps these settings, whatever the server changes in the tool.',
    scope: 'mcp:write',
    readOnly: false,
    idempotent: true,
    params: idParams,
    body: updateToolRequest,
    resource: { kind: toolKind, access: 'write', in: 'path', field: 'id' },
    errors: ['tool_alias_taken', 'mcp_tool_not_found'],
    output: toolView,
    async handler({ params, body }, { credential, transaction, authorization }) {
      const tool = authorizedRecord(authorization, toolKind).record;
      const updated = await transaction(async (tx) => {
        const alias = body.alias === undefined ? tool.alias : body.alias;
        if (alias !== null && alias !== tool.alias && (await tools.nameTaken(tx, tool.upstreamId, alias, tool.id))) {
          throw new ApiError('tool_alias_taken', `Another tool of this upstream is named or aliased ${alias}`, { param: 'alias' });
        }
        const changed = await tools.updateSettings(
          tx,
          credential.organizationId,
          tool.id,
          {
            enabled: body.enabled ?? tool.enabled,
            alias,
            descriptionOverride: body.description === undefined ? tool.descriptionOverride : body.description,
            approval: body.approval ?? tool.approval,
          },
          clock(),
        );
        if (!changed) throw new ApiError('mcp_tool_not_found', `No tool ${params.id}`, { param: 'id' });
        return changed;
      });
      const bySlug = await slugs(credential.organizationId, [updated]);
      return toToolView(updated, bySlug.get(updated.upstreamId) ?? '');
    },
  });

  const approve = defineOperation({
    name: 'mcp.tools.approve',
    method: 'POST',
    path: '/mcp/tools/approve',
    summary: 'Switch on, in one call, tools that arrived switched off: the review of new tools',
    description:
      "Every id must be a tool of the one project named (default: a key's own project, else the default project); an id that is not is 400 invalid_parameter " +
      '(param ids.<index>) and nothing is switched on. Tools already on are left as they were and listed in alreadyEnabled; both lists keep ' +
      'the order the ids were given in. Their approval policy is unchanged.',
    scope: 'mcp:write',
    readOnly: false,
    idempotent: true,
    body: approveToolsRequest,
    resource: { kind: 'project', access: 'write', in: 'body', field: 'projectId', whenAbsent: 'default-project' },
    errors: ['invalid_parameter'],
    output: approvedToolsView,
    async handler({ body }, { credential, transaction, authorization }) {
      const projectId = authorizedProject(authorization).id;
      const ids = [...new Set(body.ids)];
      return transaction(async (tx) => {
        const found = new Map((await tools.some(credential.organizationId, ids, [projectId], tx)).map((tool) => [tool.id, tool]));
        const missing = body.ids.findIndex((id) => !found.has(id));
        if (missing !== -1) throw new ApiError('invalid_parameter', `${body.ids[missing]} is not a tool of project ${projectId}`, { param: `ids.${missing}` });
        const switched = await tools.switchOn(tx, ids, clock());
        const now = new Set(switched);
        return {
          object: 'mcp_tool_approval' as const,
          projectId,
          enabled: ids.filter((id) => now.has(id)),
          alreadyEnabled: ids.filter((id) => !now.has(id)),
        };
      });
    },
  });

  const listSwitches = defineOperation({
    name: 'mcp.switches.list',
    method: 'GET',
    path: '/mcp/switches',
    summary: "Each project's tool gateway mode, with its upstreams and tools counted",
    scope: 'mcp:read',
    readOnly: true,
    output: switchListView,
    async handler(_input, { credential }) {
      const projects = await visibleProjects(identity, credential);
      const modes = await switches.modes(credential.organizationId);
      const counts = await tools.countsByProject(credential.organizationId);
      const upstreamCounts = new Map<string, number>();
      const page = await upstreams.page({ organizationId: credential.organizationId, visibleProjectIds: projects.map((p) => p.id) }, { limit: 10_000 });
      for (const upstream of page.items) upstreamCounts.set(upstream.projectId, (upstreamCounts.get(upstream.projectId) ?? 0) + 1);
      return {
        object: 'list' as const,
        data: projects.map((project) => {
          const set = modes.get(project.id);
          const count = counts.get(project.id);
          return {
            object: 'mcp_project_switch' as const,
            projectId: project.id,
            projectName: project.name,
            mode: set?.mode ?? ('governed' as const),
            upstreams: upstreamCounts.get(project.id) ?? 0,
            tools: count?.total ?? 0,
            enabledTools: count?.enabled ?? 0,
            updatedAt: set?.updatedAt.toISOString() ?? null,
          };
        }),
      };
    },
  });

  const setSwitch = defineOperation({
    name: 'mcp.switches.set',
    method: 'PUT',
    path: '/mcp/projects/:id/switch',
    summary: "Set a project's tool gateway mode: off, governed or full",
    description:
      "off: the project's keys get no tools at /mcp/gateway. governed (the default): keys get the tools their grants give, and approvals apply. " +
      'full: every key of the project gets every switched-on tool of the project, without approval; creating a key in such a project is refused ' +
      '(403 project_full_tool_access), so only keys that exist when it is switched to full have that access. ' +
      "A decision on who may use which tools: an owner's or admin's own session only (403 role_required to API keys, connectors and members).",
    // Like approvals, a person's decision: a key with mcp:write must not open every tool to every key.
    scope: null,
    roles: MANAGERS,
    readOnly: false,
    idempotent: true,
    params: projectParams,
    body: switchRequest,
    resource: { kind: 'project', access: 'write', in: 'path', field: 'id' },
    output: switchView,
    async handler({ body }, { credential, transaction, authorization }) {
      const project = authorizedProject(authorization);
      const now = clock();
      await transaction((tx) => switches.set(tx, credential.organizationId, project.id, body.mode, now));
      const count = (await tools.countsByProject(credential.organizationId)).get(project.id);
      const page = await upstreams.page({ organizationId: credential.organizationId, visibleProjectIds: [project.id] }, { limit: 10_000 });
      return {
        object: 'mcp_project_switch' as const,
        projectId: project.id,
        projectName: project.name,
        mode: body.mode,
        upstreams: page.items.length,
        tools: count?.total ?? 0,
        enabledTools: count?.enabled ?? 0,
        updatedAt: now.toISOString(),
      };
    },
  });

  return [list, update, approve, listSwitches, setSwitch];
}

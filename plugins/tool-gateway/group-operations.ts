import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import { authorizedProject, authorizedRecord, type RecordKind } from '../../core/identity/authorization.ts';
import { visibleProjectIds } from '../../core/identity/project-access.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import { type AnyOperation, defineOperation } from '../../core/operations/operations.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { listResponse, pageQuery } from '../../core/vocabulary/pagination.ts';
import type { GroupStore, McpGroup } from './group-store.ts';
import { createGroupRequest, groupListView, groupRemovalView, groupToolsRequest, groupView, groupWithToolsView, updateGroupRequest } from './tool-gateway-schemas.ts';
import type { ToolStore } from './tool-store.ts';
import { MCP_PAGE_DEFAULT, MCP_PAGE_MAX } from './upstream-operations.ts';
import type { UpstreamStore } from './upstream-store.ts';
// Catalogues the codes and event types this module answers with and emits.
import './tool-gateway-errors.ts';
import './tool-gateway-events.ts';

export interface GroupOperationDeps {
  groups: GroupStore;
  tools: ToolStore;
  upstreams: UpstreamStore;
  identity: IdentityStores;
  events: DomainEvents;
  clock: () => Date;
}

/** Tool groups as a resource kind: reached through their project. */
export function groupRecordKind(groups: GroupStore): RecordKind<McpGroup> {
  return {
    name: 'mcp group',
    notFound: 'mcp_group_not_found',
    async find(organizationId, id) {
      const group = await groups.get(organizationId, id);
      return group ? { record: group, projectId: group.projectId } : null;
    },
  };
}

function toGroupView(group: McpGroup, toolIds: readonly string[]) {
  return {
    object: 'mcp_group' as const,
    id: group.id,
    projectId: group.projectId,
    name: group.name,
    description: group.description,
    toolIds: [...toolIds],
    createdAt: group.createdAt.toISOString(),
    updatedAt: group.updatedAt.toISOString(),
  };
}

function eventData(group: McpGroup) {
  return { groupId: group.id, projectId: group.projectId, name: group.name };
}

const idParams = z.strictObject({ id: resourceId.describe('Tool group id') });

export function groupOperations(deps: GroupOperationDeps): AnyOperation[] {
  const { groups, tools, upstreams, identity, events, clock } = deps;
  const groupKind = groupRecordKind(groups);
  const writeGroup = { kind: groupKind, access: 'write', in: 'path', field: 'id' } as const;

  const list = defineOperation({
    name: 'mcp.groups.list',
    method: 'GET',
    path: '/mcp/groups',
    summary: 'List the tool groups (bundles granted to keys), newest first, with their tool ids',
    scope: 'mcp:read',
    readOnly: true,
    query: pageQuery({ defaultLimit: MCP_PAGE_DEFAULT, maxLimit: MCP_PAGE_MAX, id: resourceId }).extend({
      projectId: resourceId.optional().describe('Only groups of this project'),
    }),
    resource: { kind: 'project', access: 'read', in: 'query', field: 'projectId' },
    output: groupListView,
    async handler({ query }, { credential }) {
      const visible = await visibleProjectIds(identity, credential);
      const page = await groups.page({ organizationId: credential.organizationId, visibleProjectIds: visible, projectId: query.projectId }, query);
      const members = await groups.toolIdsOf(page.items.map((group) => group.id));
      return listResponse(page, (group) => toGroupView(group, members.get(group.id) ?? []));
    },
  });

  const create = defineOperation({
    name: 'mcp.groups.create',
    method: 'POST',
    path: '/mcp/groups',
    summary: 'Create a tool group: a bundle of tools of one project, to grant to keys of that project',
    description: 'It starts empty: PUT /mcp/groups/{id}/tools sets its tools.',
    scope: 'mcp:write',
    readOnly: false,
    body: createGroupRequest,
    resource: { kind: 'project', access: 'write', in: 'body', field: 'projectId', whenAbsent: 'default-project' },
    output: groupView,
    status: 201,
    async handler({ body }, { credential, transaction, authorization }) {
      const projectId = authorizedProject(authorization).id;
      const group = await transaction(async (tx) => {
        const created = await groups.create(tx, { id: randomUUID(), organizationId: credential.organizationId, projectId, name: body.name, description: body.description ?? null }, clock());
        await events.emit(tx, { type: 'mcp.group.created', organizationId: credential.organizationId, subject: created.id, actor: actorOf(credential), data: eventData(created) });
        return created;
      });
      return toGroupView(group, []);
    },
  });

  const update = defineOperation({
    name: 'mcp.groups.update',
    method: 'PATCH',
    path: '/mcp/groups/:id',
    summary: 'Rename a tool group or change its description (its project is fixed; PUT .../tools sets its tools)',
    scope: 'mcp:write',
    readOnly: false,
    idempotent: true,
    params: idParams,
    body: updateGroupRequest,
    resource: writeGroup,
    errors: ['mcp_group_not_found'],
    output: groupView,
    async handler({ params, body }, { credential, transaction, authorization }) {
      const current = authorizedRecord(authorization, groupKind).record;
      const updated = await transaction(async (tx) => {
        const change = { name: body.name ?? current.name, description: body.description === undefined ? current.description : body.description };
        const changed = await groups.update(tx, credential.organizationId, current.id, change, clock());
        if (!changed) throw new ApiError('mcp_group_not_found', `No tool group ${params.id}`, { param: 'id' });
        await events.emit(tx, {
          type: 'mcp.group.updated',
          organizationId: credential.organizationId,
          subject: current.id,
          actor: actorOf(credential),
          data: { ...eventData(changed), fields: Object.keys(body) },
        });
        return changed;
      });
      return toGroupView(updated, (await groups.toolIdsOf([updated.id])).get(updated.id) ?? []);
    },
  });

  const remove = defineOperation({
    name: 'mcp.groups.delete',
    method: 'DELETE',
    path: '/mcp/groups/:id',
    summary: 'Delete a tool group; every grant of it is withdrawn',
    scope: 'mcp:write',
    readOnly: false,
    destructive: true,
    idempotent: true,
    params: idParams,
    resource: writeGroup,
    output: groupRemovalView,
    async handler(_input, { credential, transaction, authorization }) {
      const group = authorizedRecord(authorization, groupKind).record;
      await transaction(async (tx) => {
        await groups.delete(tx, credential.organizationId, group.id);
        await events.emit(tx, { type: 'mcp.group.deleted', organizationId: credential.organizationId, subject: group.id, actor: actorOf(credential), data: eventData(group) });
      });
      return { object: 'ack' as const, ok: true as const, id: group.id };
    },
  });

  const setTools = defineOperation({
    name: 'mcp.groups.tools.set',
    method: 'PUT',
    path: '/mcp/groups/:id/tools',
    summary: "Replace a tool group's tools whole; answers the group with its tools",
    description:
      "Every id must be a tool of the group's project (switched on or off: a switched-off tool stays in the group and is seen by nobody until it is on); " +
      'one that is not is 400 invalid_parameter (param toolIds.<index>) and nothing changes. Duplicates count once. An empty list empties the group.',
    scope: 'mcp:write',
    readOnly: false,
    idempotent: true,
    params: idParams,
    body: groupToolsRequest,
    resource: writeGroup,
    errors: ['invalid_parameter', 'mcp_group_not_found'],
    output: groupWithToolsView,
    async handler({ body }, { credential, transaction, authorization }) {
      const group = authorizedRecord(authorization, groupKind).record;
      const ids = [...new Set(body.toolIds)];
      const { members, updated } = await transaction(async (tx) => {
        const found = await tools.some(credential.organizationId, ids, [group.projectId], tx);
        const known = new Set(found.map((tool) => tool.id));
        const missing = body.toolIds.findIndex((id) => !known.has(id));
        if (missing !== -1) {
          throw new ApiError('invalid_parameter', `${body.toolIds[missing]} is not a tool of project ${group.projectId}`, { param: `toolIds.${missing}` });
        }
        await groups.replaceTools(tx, credential.organizationId, group.id, ids, clock());
        const now = await groups.get(credential.organizationId, group.id, tx);
        if (!now) throw new ApiError('mcp_group_not_found', `No tool group ${group.id}`, { param: 'id' });
        await events.emit(tx, {
          type: 'mcp.group.updated',
          organizationId: credential.organizationId,
          subject: group.id,
          actor: actorOf(credential),
          data: { ...eventData(now), fields: ['tools'] },
        });
        return { members: found, updated: now };
      });
      const slugs = new Map<string, string>();
      for (const upstreamId of new Set(members.map((tool) => tool.upstreamId))) slugs.set(upstreamId, (await upstreams.get(credential.organizationId, upstreamId))?.slug ?? '');
      const listed = members
        .map((tool) => ({
          id: tool.id,
          upstreamId: tool.upstreamId,
          name: tool.name,
          gatewayName: `${slugs.get(tool.upstreamId)}__${tool.alias ?? tool.name}`,
          enabled: tool.enabled,
        }))
        .sort((a, b) => (a.gatewayName < b.gatewayName ? -1 : a.gatewayName > b.gatewayName ? 1 : a.id < b.id ? -1 : 1));
      return { ...toGroupView(updated, [...ids].sort()), tools: listed };
    },
  });

  return [list, create, update, remove, setTools];
}

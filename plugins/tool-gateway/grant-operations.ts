import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import { authorizedKey, authorizedRecord, authorizeResources, type RecordKind } from '../../core/identity/authorization.ts';
import { visibleProjectIds } from '../../core/identity/project-access.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import { type AnyOperation, defineOperation } from '../../core/operations/operations.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { listResponse, pageQuery } from '../../core/vocabulary/pagination.ts';
import { groupRecordKind } from './group-operations.ts';
import type { GroupStore } from './group-store.ts';
import type { GrantStore, McpGrant } from './grant-store.ts';
import { type KeyToolsDeps, toolsOfKey } from './key-tools.ts';
import { isDestructive } from './tool-operations.ts';
import { appToolsRequest, appToolsView, createGrantRequest, grantListView, grantRemovalView, grantView, keyToolsView, updateGrantRequest } from './tool-gateway-schemas.ts';
import { MCP_PAGE_DEFAULT, MCP_PAGE_MAX } from './upstream-operations.ts';
// Catalogues the codes and event types this module answers with and emits.
import './tool-gateway-errors.ts';
import './tool-gateway-events.ts';

export interface GrantOperationDeps extends KeyToolsDeps {
  groups: GroupStore;
  grants: GrantStore;
  identity: IdentityStores;
  events: DomainEvents;
  clock: () => Date;
}

/** Grants as a resource kind: reached through their group's project. */
export function grantRecordKind(grants: GrantStore): RecordKind<McpGrant> {
  return {
    name: 'mcp grant',
    notFound: 'mcp_grant_not_found',
    async find(organizationId, id) {
      const grant = await grants.get(organizationId, id);
      return grant ? { record: grant, projectId: grant.projectId } : null;
    },
  };
}

function toGrantView(grant: McpGrant, now: Date) {
  return {
    object: 'mcp_grant' as const,
    id: grant.id,
    projectId: grant.projectId,
    groupId: grant.groupId,
    keyId: grant.keyId,
    note: grant.note,
    expiresAt: grant.expiresAt?.toISOString() ?? null,
    expired: grant.expiresAt !== null && grant.expiresAt <= now,
    createdAt: grant.createdAt.toISOString(),
    updatedAt: grant.updatedAt.toISOString(),
  };
}

function eventData(grant: McpGrant) {
  return { grantId: grant.id, groupId: grant.groupId, keyId: grant.keyId, projectId: grant.projectId, expiresAt: grant.expiresAt?.toISOString() ?? null };
}

const idParams = z.strictObject({ id: resourceId.describe('Grant id') });

export function grantOperations(deps: GrantOperationDeps): AnyOperation[] {
  const { groups, grants, identity, events, clock } = deps;
  const grantKind = grantRecordKind(grants);
  const groupKind = groupRecordKind(groups);
  const writeGrant = { kind: grantKind, access: 'write', in: 'path', field: 'id' } as const;

  const list = defineOperation({
    name: 'mcp.grants.list',
    method: 'GET',
    path: '/mcp/grants',
    summary: 'List the grants of tool groups to keys, newest first; ?groupId= or ?keyId= narrows',
    scope: 'mcp:read',
    readOnly: true,
    query: pageQuery({ defaultLimit: MCP_PAGE_DEFAULT, maxLimit: MCP_PAGE_MAX, id: resourceId }).extend({
      groupId: resourceId.optional().describe('Only grants of this group'),
      keyId: resourceId.optional().describe('Only grants to this key'),
    }),
    output: grantListView,
    async handler({ query }, { credential }) {
      const visible = await visibleProjectIds(identity, credential);
      const page = await grants.page({ organizationId: credential.organizationId, visibleProjectIds: visible, groupId: query.groupId, keyId: query.keyId }, query);
      const now = clock();
      return listResponse(page, (grant) => toGrantView(grant, now));
    },
  });

  const create = defineOperation({
    name: 'mcp.grants.create',
    method: 'POST',
    path: '/mcp/grants',
    summary: 'Give a tool group to a key of the same project: the key sees its switched-on tools at /mcp/gateway',
    description:
      "The key must be one the caller may manage (as for PATCH /keys/{id}: an API key reaches only its own project's keys) and of the group's project " +
      '(400 grant_other_project); an API key cannot grant to itself (403 grant_to_itself). 409 grant_exists when the key holds the group already, ' +
      '409 key_revoked when the key is revoked (a grant would give it nothing). ' +
      'In a project whose mode is off the grant gives nothing until it is governed again; in a full one every key sees every switched-on tool anyway.',
    scope: 'mcp:write',
    readOnly: false,
    body: createGrantRequest,
    resource: [
      { kind: groupKind, access: 'write', in: 'body', field: 'groupId' },
      { kind: 'key', access: 'write', in: 'body', field: 'keyId' },
    ],
    errors: ['grant_exists', 'grant_to_itself', 'grant_other_project', 'key_revoked_conflict'],
    output: grantView,
    status: 201,
    async handler({ body }, { credential, transaction, authorization }) {
      const group = authorizedRecord(authorization, groupKind).record;
      const key = authorizedKey(authorization);
      if (credential.kind === 'key' && credential.keyId === key.id) throw new ApiError('grant_to_itself', undefined, { param: 'keyId' });
      // A revoked key never authenticates again: a grant to it would be listed yet give nothing.
      if (key.revokedAt) throw new ApiError('key_revoked_conflict', `Key ${key.id} is revoked; it cannot be given tools`, { param: 'keyId' });
      if (key.projectId !== group.projectId) {
        throw new ApiError('grant_other_project', `Key ${key.id} is of another project than group ${group.id}`, { param: 'keyId' });
      }
      const now = clock();
      const grant = await transaction(async (tx) => {
        const created = await grants.create(
          tx,
          {
            id: randomUUID(),
            organizationId: credential.organizationId,
            projectId: group.projectId,
            groupId: group.id,
            keyId: key.id,
            note: body.note ?? null,
            expiresAt: body.expiresAt ?? null,
          },
          now,
        );
        if (!created) throw new ApiError('grant_exists', `Key ${key.id} holds group ${group.id} already`, { param: 'groupId' });
        await events.emit(tx, { type: 'mcp.grant.created', organizationId: credential.organizationId, subject: created.id, actor: actorOf(credential), data: eventData(created) });
        return created;
      });
      return toGrantView(grant, now);
    },
  });

  const update = defineOperation({
    name: 'mcp.grants.update',
    method: 'PATCH',
    path: '/mcp/grants/:id',
    summary: "Change a grant's note or expiry (its group and key are fixed: withdraw it and grant again)",
    scope: 'mcp:write',
    readOnly: false,
    idempotent: true,
    params: idParams,
    body: updateGrantRequest,
    resource: writeGrant,
    errors: ['mcp_grant_not_found'],
    output: grantView,
    async handler({ params, body }, { credential, transaction, authorization }) {
      const current = authorizedRecord(authorization, grantKind).record;
      const now = clock();
      const updated = await transaction(async (tx) => {
        const change = {
          note: body.note === undefined ? current.note : body.note,
          expiresAt: body.expiresAt === undefined ? current.expiresAt : body.expiresAt,
        };
        const changed = await grants.update(tx, credential.organizationId, current.id, change, now);
        if (!changed) throw new ApiError('mcp_grant_not_found', `No grant ${params.id}`, { param: 'id' });
        return changed;
      });
      return toGrantView(updated, now);
    },
  });

  const remove = defineOperation({
    name: 'mcp.grants.delete',
    method: 'DELETE',
    path: '/mcp/grants/:id',
    summary: 'Withdraw a grant: the key no longer sees that group at /mcp/gateway',
    scope: 'mcp:write',
    readOnly: false,
    destructive: true,
    idempotent: true,
    params: idParams,
    resource: writeGrant,
    output: grantRemovalView,
    async handler(_input, { credential, transaction, authorization }) {
      const grant = authorizedRecord(authorization, grantKind).record;
      await transaction(async (tx) => {
        await grants.delete(tx, credential.organizationId, grant.id);
        await events.emit(tx, { type: 'mcp.grant.deleted', organizationId: credential.organizationId, subject: grant.id, actor: actorOf(credential), data: eventData(grant) });
      });
      return { object: 'ack' as const, ok: true as const, id: grant.id };
    },
  });

  const keyTools = defineOperation({
    name: 'mcp.keys.tools',
    method: 'GET',
    path: '/mcp/keys/:id/tools',
    summary: 'What a key sees at /mcp/gateway: its tools with their gateway names, ordered by name',
    description:
      "By its project's mode: off, none; full, every switched-on tool of the project; governed, the switched-on tools of the groups its unexpired grants give. " +
      'Names are <upstream slug>__<alias or name>; one over 64 characters, or equal to another, is settled as plugins/tool-gateway/README.md says.',
    scope: 'mcp:read',
    readOnly: true,
    params: z.strictObject({ id: resourceId.describe('API key id') }),
    resource: { kind: 'key', access: 'read', in: 'path', field: 'id' },
    output: keyToolsView,
    async handler(_input, { authorization }) {
      const key = authorizedKey(authorization);
      const { mode, tools } = await toolsOfKey(deps, key, clock());
      return {
        object: 'list' as const,
        keyId: key.id,
        projectId: key.projectId,
        mode,
        data: tools.map(({ name, tool, slug, groupIds }) => ({
          name,
          toolId: tool.id,
          upstreamId: tool.upstreamId,
          upstreamSlug: slug,
          toolName: tool.name,
          title: tool.title,
          description: tool.descriptionOverride ?? tool.description,
          inputSchema: tool.inputSchema,
          annotations: tool.annotations,
          approval: tool.approval,
          destructive: isDestructive(tool),
          groupIds,
        })),
      };
    },
  });

  const setAppTools = defineOperation({
    name: 'mcp.apps.ai-tools.set',
    method: 'PUT',
    path: '/mcp/apps/:id/ai-tools',
    summary: "Choose the tool groups of an app's gateway key (stored now; apps come later)",
    description:
      'Replaces the choice whole and answers what is stored. Every group must be of one project the caller may write; one that is not is 400 ' +
      'invalid_parameter (param groupIds.<index>). Apps do not exist yet: the id is any UUID, and nothing checks an app has it until apps land.',
    scope: 'mcp:write',
    readOnly: false,
    idempotent: true,
    params: z.strictObject({ id: z.uuid().describe('App id') }),
    body: appToolsRequest,
    errors: ['invalid_parameter'],
    output: appToolsView,
    async handler({ params, body }, { credential, transaction }) {
      const ids = [...new Set(body.groupIds)];
      const found = new Map((await groups.some(credential.organizationId, ids)).map((group) => [group.id, group]));
      const projectId = found.get(body.groupIds[0] ?? '')?.projectId;
      const wrong = body.groupIds.findIndex((id) => found.get(id)?.projectId !== projectId);
      if (wrong !== -1) throw new ApiError('invalid_parameter', `${body.groupIds[wrong]} is not a tool group of the first group's project`, { param: `groupIds.${wrong}` });
      if (projectId !== undefined) {
        // Through the one authorization rule: a group out of the caller's reach is refused as absent.
        try {
          await authorizeResources(
            credential,
            { resource: { kind: 'project', access: 'write', in: 'body', field: 'projectId' } },
            { params: {}, query: {}, body: { projectId } },
            { identity },
          );
        } catch (error) {
          if (error instanceof ApiError && error.code === 'project_not_found') throw new ApiError('invalid_parameter', `${body.groupIds[0]} is not a tool group`, { param: 'groupIds.0' });
          throw error;
        }
      }
      const now = clock();
      await transaction((tx) => grants.setAppGroups(tx, credential.organizationId, params.id, ids, now));
      const stored = await grants.appGroups(credential.organizationId, params.id);
      return { object: 'mcp_app_ai_tools' as const, appId: params.id, groupIds: stored.groupIds, updatedAt: stored.updatedAt?.toISOString() ?? null };
    },
  });

  return [list, create, update, remove, keyTools, setAppTools];
}

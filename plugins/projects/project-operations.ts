import { z } from 'zod';
import type { Authenticator } from '../../core/identity/authenticator.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import type { IdentityStores, IdentityStoresFactory, Project, ProjectMember } from '../../core/ports/identity.ts';
import { UniqueViolation } from '../../core/ports/database.ts';
import { authorizedProject } from '../../core/identity/authorization.ts';
import { visibleProjectIds } from '../../core/identity/project-access.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { listOf, listResponse, pageQuery } from '../../core/vocabulary/pagination.ts';
import { isOwner } from '../../core/identity/credential.ts';
import { instantView } from '../../core/vocabulary/timestamps.ts';
import { spendCapInput, spendCapView, toSpendCap, toSpendCapView } from '../../core/identity/spend-cap.ts';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import type { Credential } from '../../core/identity/credential.ts';
import type { Transaction } from '../../core/ports/database.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import { memberEventData } from './project-events.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './project-errors.ts';

interface Deps {
  identity: IdentityStores;
  identityFor: IdentityStoresFactory;
  authenticator: Authenticator;
  /** Emits the membership events in the transaction of the change. */
  events: DomainEvents;
}

/** The wire views: named schemas of the OpenAPI document (`.meta({ id })`), declared once. */
const projectView = z
  .object({
    object: z.literal('project'),
    id: z.uuid(),
    name: z.string(),
    isDefault: z.boolean(),
    models: z.array(z.string()).nullable().describe('Models keys of this project may use; null means every model'),
    spendCap: spendCapView.nullable(),
    createdAt: instantView,
    updatedAt: instantView,
  })
  .meta({ id: 'Project', description: 'A project: the keys, members, model list and spend cap it groups' });

const memberView = z
  .object({
    object: z.literal('project_member'),
    personId: z.uuid(),
    email: z.string(),
    name: z.string(),
    role: z.enum(['admin', 'developer', 'viewer']),
    addedAt: instantView,
  })
  .meta({ id: 'ProjectMember', description: "A person's role in a project" });

const projectListView = listOf(projectView);
const memberListView = listOf(memberView);

const projectRemovalView = z.object({ object: z.literal('ack'), ok: z.literal(true), id: z.uuid() }).meta({ id: 'ProjectRemoval', description: 'The id of the project deleted' });

const memberRemovalView = z.object({ object: z.literal('ack'), ok: z.literal(true) }).meta({ id: 'MemberRemoval', description: 'The person is no longer a member of the project' });

const toProjectView = (p: Project): z.infer<typeof projectView> => ({
  object: 'project',
  id: p.id,
  name: p.name,
  isDefault: p.isDefault,
  models: p.modelAllowList,
  spendCap: toSpendCapView(p.spendCap),
  createdAt: p.createdAt.toISOString(),
  updatedAt: p.updatedAt.toISOString(),
});

const toMemberView = (m: ProjectMember): z.infer<typeof memberView> => ({
  object: 'project_member',
  personId: m.personId,
  email: m.email,
  name: m.name,
  role: m.role,
  addedAt: m.createdAt.toISOString(),
});

const projectName = z.string().trim().min(1).max(100);
const models = z.array(z.string().min(1).max(200)).max(500).nullable();
const role = z.enum(['admin', 'developer', 'viewer']);
const projectId = resourceId.describe('Project id');
const idParams = z.strictObject({ id: projectId });
const memberParams = z.strictObject({ id: projectId, userId: resourceId.describe("The member's person id") });
/** Projects and their members are listed by uuid: a person id breaks ties among members. */
const PROJECTS_PAGE = { defaultLimit: 50, maxLimit: 200, id: resourceId };
/** The unique index on (organization, lower(name)) refused the name: another project holds it. */
const isNameTaken = (error: unknown): boolean => error instanceof UniqueViolation && error.constraint === 'projects_org_name';
const readsProject = { kind: 'project', access: 'read', in: 'path', field: 'id' } as const;
const writesProject = { kind: 'project', access: 'write', in: 'path', field: 'id' } as const;

export function projectOperations({ identity, identityFor, authenticator, events }: Deps): AnyOperation[] {
  /**
   * Gives `personId` `role` on the project in `tx` and says so: member_added for a newcomer,
   * member_role_changed for a member whose role differs, nothing for the same role again.
   */
  const setRole = async (tx: Transaction, credential: Credential, input: { projectId: string; personId: string; role: ProjectMember['role'] }) => {
    const stores = identityFor(tx);
    const before = await stores.projectMembers.get(input.projectId, input.personId);
    const member = await stores.projectMembers.upsert(input);
    const emitted = { organizationId: credential.organizationId, subject: input.projectId, actor: actorOf(credential) };
    if (!before) await events.emit(tx, { ...emitted, type: 'project.member_added', data: memberEventData(member) });
    else if (before.role !== member.role) {
      await events.emit(tx, { ...emitted, type: 'project.member_role_changed', data: { ...memberEventData(member), previousRole: before.role } });
    }
    return member;
  };

  const nameTaken = (name: string) => new ApiError('project_name_taken', `A project named ${JSON.stringify(name)} already exists`, { param: 'name' });

  const list = defineOperation({
    name: 'projects.list',
    method: 'GET',
    path: '/projects',
    summary: 'Projects the caller can see, newest first',
    scope: null,
    readOnly: true,
    query: pageQuery(PROJECTS_PAGE),
    output: projectListView,
    async handler({ query }, { credential }) {
      const page = await identity.projects.page(credential.organizationId, { projectIds: await visibleProjectIds(identity, credential) }, query);
      return listResponse(page, toProjectView);
    },
  });

  const create = defineOperation({
    name: 'projects.create',
    method: 'POST',
    path: '/projects',
    summary: 'Create a project',
    readOnly: false,
    scope: 'projects:write',
    body: z.strictObject({ name: projectName, models: models.optional() }),
    errors: ['project_name_taken'],
    output: projectView,
    status: 201,
    async handler({ body }, { credential, transaction }) {
      try {
        const project = await transaction(async (tx) => {
          const stores = identityFor(tx);
          const created = await stores.projects.create({ organizationId: credential.organizationId, name: body.name, modelAllowList: body.models ?? null });
          // The person who creates a project administers it, whatever their organisation role.
          if (credential.kind === 'session') await setRole(tx, credential, { projectId: created.id, personId: credential.personId, role: 'admin' });
          return created;
        });
        return toProjectView(project);
      } catch (error) {
        if (isNameTaken(error)) throw nameTaken(body.name);
        throw error;
      }
    },
  });

  const get = defineOperation({
    name: 'projects.get',
    method: 'GET',
    path: '/projects/:id',
    summary: 'One project',
    scope: null,
    readOnly: true,
    params: idParams,
    resource: readsProject,
    output: projectView,
    async handler(_input, { authorization }) {
      return toProjectView(authorizedProject(authorization));
    },
  });

  const update = defineOperation({
    name: 'projects.update',
    method: 'PATCH',
    path: '/projects/:id',
    summary: 'Rename a project or change its model allow-list',
    readOnly: false,
    idempotent: true,
    scope: 'projects:write',
    params: idParams,
    body: z
      .strictObject({ name: projectName.optional(), models: models.optional(), spendCap: spendCapInput.nullable().optional().describe('Owner only; null clears') })
      .refine((b) => Object.keys(b).length > 0, 'send at least one field to change'),
    resource: writesProject,
    errors: ['project_not_found', 'project_name_taken', 'owner_required'],
    output: projectView,
    async handler({ params, body }, { credential }) {
      if (body.spendCap !== undefined && !isOwner(credential)) {
        throw new ApiError('owner_required', 'Only an owner may set a spend cap on a project', { param: 'spendCap' });
      }
      try {
        const updated = await identity.projects.update(credential.organizationId, params.id, {
          name: body.name,
          modelAllowList: body.models,
          spendCap: body.spendCap === undefined ? undefined : toSpendCap(body.spendCap),
        });
        if (!updated) throw new ApiError('project_not_found', `No project ${params.id}`, { param: 'id' });
        // Cached key credentials carry the project's allow-list.
        if (body.models !== undefined) await authenticator.invalidate({ kind: 'all' });
        return toProjectView(updated);
      } catch (error) {
        if (isNameTaken(error) && body.name) throw nameTaken(body.name);
        throw error;
      }
    },
  });

  const remove = defineOperation({
    name: 'projects.delete',
    method: 'DELETE',
    path: '/projects/:id',
    summary: 'Delete an empty project',
    description: 'The default project cannot be deleted; a project that still has keys (revoked ones too) answers 409.',
    readOnly: false,
    destructive: true,
    idempotent: true,
    scope: 'projects:write',
    params: idParams,
    resource: writesProject,
    errors: ['default_project', 'project_not_empty'],
    output: projectRemovalView,
    async handler(_input, { credential, authorization }) {
      const project = authorizedProject(authorization);
      if (project.isDefault) throw new ApiError('default_project', undefined, { param: 'id' });
      const keys = await identity.apiKeys.list(credential.organizationId, { projectId: project.id });
      if (keys.length > 0) {
        throw new ApiError('project_not_empty', `Project still has ${keys.length} key(s); delete them permanently or move them first`);
      }
      await identity.projects.delete(credential.organizationId, project.id);
      return { object: 'ack' as const, ok: true as const, id: project.id };
    },
  });

  const listMembers = defineOperation({
    name: 'projects.members.list',
    method: 'GET',
    path: '/projects/:id/members',
    summary: 'People with a role on a project, most recently added first',
    scope: null,
    readOnly: true,
    params: idParams,
    query: pageQuery(PROJECTS_PAGE),
    resource: readsProject,
    output: memberListView,
    async handler({ query }, { authorization }) {
      const project = authorizedProject(authorization);
      return listResponse(await identity.projectMembers.page(project.id, query), toMemberView);
    },
  });

  const addMember = defineOperation({
    name: 'projects.members.add',
    method: 'POST',
    path: '/projects/:id/members',
    summary: 'Give a person of the organisation a role on a project',
    readOnly: false,
    scope: 'projects:write',
    params: idParams,
    body: z
      .strictObject({ personId: z.uuid().optional(), email: z.email().optional(), role })
      .refine((b) => (b.personId === undefined) !== (b.email === undefined), 'send exactly one of personId or email'),
    resource: writesProject,
    errors: ['person_not_found'],
    output: memberView,
    status: 201,
    async handler({ body }, { credential, authorization, transaction }) {
      const project = authorizedProject(authorization);
      const person = body.personId ? await identity.people.get(body.personId) : await identity.people.getByEmail(body.email!);
      const membership = person ? await identity.memberships.get(credential.organizationId, person.id) : null;
      if (!person || !membership) {
        throw new ApiError('person_not_found', undefined, { param: body.personId ? 'personId' : 'email' });
      }
      return toMemberView(await transaction((tx) => setRole(tx, credential, { projectId: project.id, personId: person.id, role: body.role })));
    },
  });

  const updateMember = defineOperation({
    name: 'projects.members.update',
    method: 'PATCH',
    path: '/projects/:id/members/:userId',
    summary: "Change a person's role on a project",
    readOnly: false,
    idempotent: true,
    scope: 'projects:write',
    params: memberParams,
    body: z.strictObject({ role }),
    resource: writesProject,
    errors: ['member_not_found'],
    output: memberView,
    async handler({ params, body }, { authorization, credential, transaction }) {
      const project = authorizedProject(authorization);
      // Refused inside the transaction: it then records nothing, and the call is recorded as the 404 it is.
      const member = await transaction(async (tx) => {
        if (!(await identityFor(tx).projectMembers.get(project.id, params.userId))) throw new ApiError('member_not_found', undefined, { param: 'userId' });
        return setRole(tx, credential, { projectId: project.id, personId: params.userId, role: body.role });
      });
      return toMemberView(member);
    },
  });

  const removeMember = defineOperation({
    name: 'projects.members.remove',
    method: 'DELETE',
    path: '/projects/:id/members/:userId',
    summary: "Remove a person's role on a project",
    readOnly: false,
    destructive: true,
    idempotent: true,
    scope: 'projects:write',
    params: memberParams,
    resource: writesProject,
    errors: ['member_not_found'],
    output: memberRemovalView,
    async handler({ params }, { authorization, credential, transaction }) {
      const project = authorizedProject(authorization);
      await transaction(async (tx) => {
        const stores = identityFor(tx);
        const member = await stores.projectMembers.get(project.id, params.userId);
        if (!member || !(await stores.projectMembers.remove(project.id, params.userId))) {
          throw new ApiError('member_not_found', undefined, { param: 'userId' });
        }
        const data = memberEventData(member);
        await events.emit(tx, { type: 'project.member_removed', organizationId: credential.organizationId, subject: project.id, actor: actorOf(credential), data });
      });
      return { object: 'ack' as const, ok: true as const };
    },
  });

  return [list, create, get, update, remove, listMembers, addMember, updateMember, removeMember];
}

import t from 'tap';
import {
  authorize,
  authorizedKey,
  authorizedProject,
  authorizedRecord,
  declaredScopeRefusal,
  resourceId,
  resourcesOf,
  roleRefusalCode,
  scopeRefusal,
  sessionRolesOf,
  type AuthorizedResource,
  type RecordKind,
  type ResourceDeclaration,
} from '../../core/identity/authorization.ts';
import type { ConnectorCredential, Credential, KeyCredential, SessionCredential } from '../../core/identity/credential.ts';
import { type AnyOperation, OperationRegistry } from '../../core/operations/operations.ts';
import type { ApiKey, IdentityStores, Project } from '../../core/ports/identity.ts';
import { isManagementScope, isScope, ORG_ROLES, SCOPES, scopesForRole, type OrgRole, type Scope } from '../../core/identity/scopes.ts';
// Catalogues the keys and webhooks plugins' codes, which declarations below answer.
import '../../plugins/keys/key-errors.ts';
import '../../plugins/webhooks/webhook-errors.ts';

/**
 * `authorize` (core/identity/authorization.ts) on its own, over an in-memory organisation: the decision every
 * surface asks, one rule per test. The scope matrix checks the same rules through HTTP on every
 * operation; these are fast enough to judge the module's mutants.
 */
const ORG = 'org-1';
const project = (id: string, isDefault = false) => ({ id, organizationId: ORG, name: `project ${id}`, isDefault }) as Project;
const projects = new Map([
  ['A', project('A', true)],
  ['B', project('B')],
]);
const apiKey = (id: string, projectId: string) => ({ id, organizationId: ORG, projectId }) as ApiKey;
const keys = new Map([
  ['key-of-A', apiKey('key-of-A', 'A')],
  ['key-of-B', apiKey('key-of-B', 'B')],
]);
/** personId -> projectId -> role */
const roles = new Map([
  ['viewer', new Map([['A', 'viewer']])],
  ['developer', new Map([['A', 'developer']])],
]);

function organisation(defaultProject: Project | null = projects.get('A')!): { identity: IdentityStores } {
  const identity = {
    apiKeys: { get: async (org: string, id: string) => (org === ORG ? (keys.get(id) ?? null) : null) },
    projects: {
      get: async (org: string, id: string) => (org === ORG ? (projects.get(id) ?? null) : null),
      getDefault: async () => defaultProject,
    },
    projectMembers: {
      get: async (projectId: string, personId: string) => {
        const role = roles.get(personId)?.get(projectId);
        return role ? { projectId, personId, role } : null;
      },
    },
  };
  return { identity: identity as unknown as IdentityStores };
}

function keyCredential(projectId: string, scopes: readonly Scope[] = SCOPES.filter((s) => s !== 'projects:write')): KeyCredential {
  return { kind: 'key', keyId: `caller-in-${projectId}`, organizationId: ORG, projectId, scopes: new Set(scopes) } as unknown as KeyCredential;
}
function session(role: OrgRole, personId: string = role): SessionCredential {
  return { kind: 'session', sessionId: 's', personId, email: `${personId}@x.test`, organizationId: ORG, role, scopes: scopesForRole(role), csrfTokenHash: null };
}

/** A person's connector (OAuth), confined to one project, holding the scopes granted. */
function connector(projectId: string, role: OrgRole = 'owner', personId: string = role, scopes: readonly Scope[] = SCOPES.filter(isManagementScope)): ConnectorCredential {
  return {
    kind: 'connector',
    grantId: 'grant-1',
    clientId: 'client-1',
    personId,
    email: `${personId}@x.test`,
    organizationId: ORG,
    projectId,
    role,
    scopes: new Set(scopes),
    audience: 'https://auth.x.test/mcp',
    expiresAt: new Date(8.64e15),
  };
}

function operation(fields: {
  scope?: Scope | null;
  ownerOnly?: boolean;
  roles?: readonly OrgRole[];
  resource?: ResourceDeclaration | ResourceDeclaration[];
  ownAppKey?: true;
}): AnyOperation {
  return {
    name: 'test.op',
    method: 'POST',
    path: '/test',
    scope: fields.scope ?? null,
    ownerOnly: fields.ownerOnly ?? false,
    roles: fields.roles,
    resource: fields.resource,
    ownAppKey: fields.ownAppKey,
  } as unknown as AnyOperation;
}
const keyInPath = (access: 'read' | 'write' = 'read'): ResourceDeclaration => ({ kind: 'key', access, in: 'path', field: 'id' });
const projectInBody = (extra: Partial<ResourceDeclaration> = {}): ResourceDeclaration =>
  ({ kind: 'project', access: 'write', in: 'body', field: 'projectId', ...extra }) as ResourceDeclaration;
const input = (fields: { params?: object; query?: object; body?: unknown } = {}) => ({ params: {}, query: {}, body: undefined, ...fields });

async function refusal(credential: Credential, op: AnyOperation, given = input(), deps = organisation()) {
  try {
    await authorize(credential, op, given, deps);
    return null;
  } catch (error) {
    const { status, code, param } = error as { status: number; code: string; param?: string | null };
    return { status, code, param: param ?? null };
  }
}

t.test('a credential without the scope an operation needs is refused with 403 missing_scope', async (t) => {
  t.same(await refusal(keyCredential('A', ['inference']), operation({ scope: 'keys:read' })), { status: 403, code: 'missing_scope', param: null });
  t.equal(await refusal(keyCredential('A', ['keys:read']), operation({ scope: 'keys:read' })), null);
  t.equal(await refusal(keyCredential('A', []), operation({ scope: null })), null, 'an operation without a scope needs none');
});

t.test('scopeRefusal answers null or the missing_scope error naming the scope', async (t) => {
  t.equal(scopeRefusal(keyCredential('A', ['usage:read']), 'usage:read'), null);
  t.equal(scopeRefusal(keyCredential('A', []), null), null);
  const refused = scopeRefusal(keyCredential('A', []), 'usage:read');
  t.equal(refused?.code, 'missing_scope');
  t.match(refused?.message, /'usage:read'/);
});

t.test('an owner-only operation admits an owner session only: not an admin, a member or a key with every scope', async (t) => {
  const ownerOnly = operation({ ownerOnly: true });
  t.equal(await refusal(session('owner'), ownerOnly), null);
  for (const credential of [session('admin'), session('member'), keyCredential('A', SCOPES)]) {
    t.same(await refusal(credential, ownerOnly), { status: 403, code: 'owner_required', param: null }, credential.kind);
  }
});

t.test('the scope is checked before owner-only', async (t) => {
  t.equal((await refusal(session('member'), operation({ scope: 'projects:write', ownerOnly: true })))?.code, 'missing_scope');
});

t.test('an operation that declares no resource resolves none', async (t) => {
  t.same(await authorize(session('owner'), operation({}), input(), organisation()), { resources: [] });
});

t.test('a key resource absent from the input is skipped', async (t) => {
  t.same(await authorize(keyCredential('A'), operation({ resource: keyInPath() }), input(), organisation()), { resources: [] });
});

t.test('a key resource that does not exist answers 404 key_not_found naming the field', async (t) => {
  t.same(await refusal(session('owner'), operation({ resource: keyInPath() }), input({ params: { id: 'nope' } })), { status: 404, code: 'key_not_found', param: 'id' });
});

t.test("a key reaches its own project's keys and resolves the key with its project", async (t) => {
  const decision = await authorize(keyCredential('A'), operation({ resource: keyInPath('write') }), input({ params: { id: 'key-of-A' } }), organisation());
  t.same(decision.resources, [{ kind: 'key', key: keys.get('key-of-A'), project: projects.get('A') }]);
  t.equal(authorizedKey(decision).id, 'key-of-A');
});

t.test("a key never reaches another project's keys, even holding projects:write", async (t) => {
  for (const scopes of [SCOPES.filter((s) => s !== 'projects:write'), [...SCOPES]]) {
    const outcome = await refusal(keyCredential('B', scopes), operation({ resource: keyInPath() }), input({ params: { id: 'key-of-A' } }));
    t.same(outcome, { status: 404, code: 'key_not_found', param: 'id' }, scopes.includes('projects:write') ? 'with projects:write' : 'without');
  }
});

t.test("owners and admins reach every project's keys", async (t) => {
  for (const role of ['owner', 'admin'] as const) {
    t.equal(await refusal(session(role), operation({ resource: keyInPath('write') }), input({ params: { id: 'key-of-B' } })), null, role);
  }
});

t.test("a member without a role on a key's project is told the key does not exist", async (t) => {
  t.same(await refusal(session('member', 'developer'), operation({ resource: keyInPath() }), input({ params: { id: 'key-of-B' } })), { status: 404, code: 'key_not_found', param: 'id' });
});

t.test('a viewer reads a project and its keys but writes neither (403 project_role_insufficient)', async (t) => {
  const viewer = session('member', 'viewer');
  t.equal(await refusal(viewer, operation({ resource: keyInPath('read') }), input({ params: { id: 'key-of-A' } })), null, 'key read');
  t.equal((await refusal(viewer, operation({ resource: keyInPath('write') }), input({ params: { id: 'key-of-A' } })))?.code, 'project_role_insufficient', 'key write');
  t.equal(await refusal(viewer, operation({ resource: projectInBody({ access: 'read' }) }), input({ body: { projectId: 'A' } })), null, 'project read');
  const write = await refusal(viewer, operation({ resource: projectInBody() }), input({ body: { projectId: 'A' } }));
  t.same(write, { status: 403, code: 'project_role_insufficient', param: null }, 'project write');
});

t.test('a developer writes on the project they have a role on', async (t) => {
  const developer = session('member', 'developer');
  t.equal(await refusal(developer, operation({ resource: projectInBody() }), input({ body: { projectId: 'A' } })), null);
  t.equal(await refusal(developer, operation({ resource: keyInPath('write') }), input({ params: { id: 'key-of-A' } })), null);
});

t.test('a project that does not exist answers 404 project_not_found naming the field', async (t) => {
  t.same(await refusal(session('owner'), operation({ resource: projectInBody() }), input({ body: { projectId: 'Z' } })), { status: 404, code: 'project_not_found', param: 'projectId' });
});

t.test('a key reaches its own project, and every project only with projects:write', async (t) => {
  const declared = operation({ resource: projectInBody() });
  t.equal(await refusal(keyCredential('A'), declared, input({ body: { projectId: 'A' } })), null, 'its own');
  t.same(await refusal(keyCredential('B'), declared, input({ body: { projectId: 'A' } })), { status: 404, code: 'project_not_found', param: 'projectId' }, 'another');
  const reached = await authorize(keyCredential('B', SCOPES), declared, input({ body: { projectId: 'A' } }), organisation());
  t.equal(authorizedProject(reached).id, 'A', 'another, with projects:write');
});

t.test('keyOwnProjectOnly keeps a key with projects:write in its own project, with 404 or the declared code', async (t) => {
  const hidden = operation({ resource: projectInBody({ keyOwnProjectOnly: true }) });
  t.same(await refusal(keyCredential('B', SCOPES), hidden, input({ body: { projectId: 'A' } })), { status: 404, code: 'project_not_found', param: 'projectId' });
  const told = operation({ resource: projectInBody({ keyOwnProjectOnly: { code: 'cross_project', message: 'own project only' } }) });
  const outcome = await refusal(keyCredential('B', SCOPES), told, input({ body: { projectId: 'A' } }));
  t.same(outcome, { status: 403, code: 'cross_project', param: 'projectId' });
  t.equal(await refusal(keyCredential('A', SCOPES), told, input({ body: { projectId: 'A' } })), null, 'its own project passes');
  t.equal(await refusal(session('owner'), told, input({ body: { projectId: 'B' } })), null, 'sessions are not confined');
});

t.test('an absent project is skipped unless the declaration defaults it', async (t) => {
  t.same(await authorize(keyCredential('B'), operation({ resource: projectInBody() }), input({ body: {} }), organisation()), { resources: [] });
});

t.test("an absent project defaults to a key's own project and a session's default project", async (t) => {
  const defaulted = operation({ resource: projectInBody({ whenAbsent: 'default-project' }) });
  t.equal(authorizedProject(await authorize(keyCredential('B'), defaulted, input({ body: {} }), organisation())).id, 'B', 'key');
  t.equal(authorizedProject(await authorize(session('owner'), defaulted, input({ body: {} }), organisation())).id, 'A', 'session');
  t.same(await refusal(session('owner'), defaulted, input({ body: {} }), organisation(null)), { status: 400, code: 'project_required', param: 'projectId' }, 'no default');
});

t.test('resources resolve in declaration order and the first of each kind is the one handed out', async (t) => {
  const both = operation({ resource: [keyInPath('write'), { ...projectInBody(), in: 'query', field: 'projectId' } as ResourceDeclaration] });
  const decision = await authorize(session('owner'), both, input({ params: { id: 'key-of-A' }, query: { projectId: 'B' } }), organisation());
  t.same(
    decision.resources.map((r) => r.kind),
    ['key', 'project'],
  );
  t.equal(authorizedKey(decision).id, 'key-of-A');
  t.equal(authorizedProject(decision).id, 'B');
});

t.test('authorizedKey and authorizedProject throw when the operation declared no such resource', async (t) => {
  t.throws(() => authorizedKey({ resources: [] }), /no key resource/);
  t.throws(() => authorizedProject({ resources: [] }), /no project resource/);
});

t.test('resourceId reads a string id from where the declaration points, and nothing else', async (t) => {
  const declaration = keyInPath();
  t.equal(resourceId(declaration, input({ params: { id: 'k' } })), 'k');
  t.equal(resourceId(declaration, input({ params: { id: 7 } })), undefined);
  t.equal(resourceId({ ...declaration, in: 'query' } as ResourceDeclaration, input({ query: { id: 'q' } })), 'q');
  t.equal(resourceId({ ...declaration, in: 'body' } as ResourceDeclaration, input({ body: { id: 'b' } })), 'b');
  t.equal(resourceId({ ...declaration, in: 'body' } as ResourceDeclaration, input()), undefined, 'no body');
});

t.test('owners and admins hold every scope; members all but projects:write and webhooks:write', async (t) => {
  t.same([...scopesForRole('owner')], [...SCOPES]);
  t.same([...scopesForRole('admin')], [...SCOPES]);
  t.same(
    [...scopesForRole('member')],
    SCOPES.filter((s) => s !== 'projects:write' && s !== 'webhooks:write'),
  );
});

t.test('an operation without a resource declaration lists none', async (t) => {
  t.same(resourcesOf(operation({})), []);
  t.same(resourcesOf(operation({ resource: keyInPath() })), [keyInPath()]);
});

t.test('authorizedKey finds the key among other resources', async (t) => {
  const projectOfA: AuthorizedResource = { kind: 'project', project: projects.get('A')! };
  const keyOfA: AuthorizedResource = { kind: 'key', key: keys.get('key-of-A')!, project: projects.get('A')! };
  t.equal(authorizedKey({ resources: [projectOfA, keyOfA] }).id, 'key-of-A');
  t.throws(() => authorizedKey({ resources: [projectOfA] }), /no key resource/);
});

t.test('each refusal names what it refused: the operation, the key, the project, the role', async (t) => {
  t.match((await refusal(keyCredential('A', SCOPES), operation({ ownerOnly: true })))?.code, 'owner_required');
  await t.rejects(authorize(keyCredential('A', SCOPES), operation({ ownerOnly: true }), input(), organisation()), { message: /Only an owner may call test\.op/ });
  await t.rejects(authorize(session('owner'), operation({ resource: keyInPath() }), input({ params: { id: 'nope' } }), organisation()), { message: /No API key nope/ });
  await t.rejects(authorize(session('owner'), operation({ resource: projectInBody() }), input({ body: { projectId: 'Z' } }), organisation()), { message: /No project Z/ });
  await t.rejects(authorize(session('member', 'viewer'), operation({ resource: projectInBody() }), input({ body: { projectId: 'A' } }), organisation()), {
    message: /role on project project A is viewer/,
  });
});

t.test("the scopes are the spec's thirteen, every one but inference a management scope", async (t) => {
  t.same(
    [...SCOPES],
    [
      'inference',
      'keys:read',
      'keys:write',
      'usage:read',
      'requests:read',
      'apps:read',
      'apps:deploy',
      'data:read',
      'projects:write',
      'webhooks:read',
      'webhooks:write',
      'mcp:read',
      'mcp:write',
    ],
  );
  for (const scope of SCOPES) t.ok(isScope(scope), scope);
  for (const text of ['admin', 'keys:delete', '', 'INFERENCE']) t.notOk(isScope(text), JSON.stringify(text));
  t.notOk(isManagementScope('inference'));
  for (const scope of SCOPES.filter((s) => s !== 'inference')) t.ok(isManagementScope(scope), scope);
  t.same(ORG_ROLES, ['owner', 'admin', 'member']);
});

t.test('a connector reaches only the project it was granted, even as an owner', async (t) => {
  const op = operation({ resource: projectInBody() });
  t.equal(await refusal(connector('A'), op, input({ body: { projectId: 'A' } })), null);
  t.same(await refusal(connector('A'), op, input({ body: { projectId: 'B' } })), { status: 404, code: 'project_not_found', param: 'projectId' });
  t.same(
    await refusal(connector('A', 'owner', 'owner', [...SCOPES]), op, input({ body: { projectId: 'B' } })),
    { status: 404, code: 'project_not_found', param: 'projectId' },
    'projects:write does not widen it',
  );
});

t.test('a connector reaches keys of its own project only, and an absent project means its own', async (t) => {
  t.equal(await refusal(connector('B'), operation({ resource: keyInPath() }), input({ params: { id: 'key-of-B' } })), null);
  t.same(await refusal(connector('B'), operation({ resource: keyInPath() }), input({ params: { id: 'key-of-A' } })), { status: 404, code: 'key_not_found', param: 'id' });
  const found = await authorize(connector('B'), operation({ resource: projectInBody({ whenAbsent: 'default-project' }) }), input({ body: {} }), organisation());
  t.equal(authorizedProject(found).id, 'B');
});

t.test("a connector holds its person's project role: a viewer's connector reads but does not write", async (t) => {
  t.equal(await refusal(connector('A', 'member', 'viewer'), operation({ resource: projectInBody({ access: 'read' }) }), input({ body: { projectId: 'A' } })), null);
  t.same(await refusal(connector('A', 'member', 'viewer'), operation({ resource: projectInBody() }), input({ body: { projectId: 'A' } })), {
    status: 403,
    code: 'project_role_insufficient',
    param: null,
  });
});

t.test('a connector never passes an owner-only operation, its person an owner or not', async (t) => {
  t.same(await refusal(connector('A', 'owner'), operation({ ownerOnly: true })), { status: 403, code: 'owner_required', param: null });
});

// A plugin's record kind (core/identity/authorization.ts RecordKind): records of project A or B, and one of the organisation as a whole.
const records = new Map<string, { record: { name: string }; projectId: string | null }>([
  ['record-of-A', { record: { name: 'of A' }, projectId: 'A' }],
  ['record-of-B', { record: { name: 'of B' }, projectId: 'B' }],
  ['record-of-org', { record: { name: 'of the organisation' }, projectId: null }],
]);
const recordKind: RecordKind<{ name: string }> = {
  name: 'webhook endpoint',
  notFound: 'webhook_not_found',
  find: async (org, id) => (org === ORG ? (records.get(id) ?? null) : null),
};
const recordInPath = (access: 'read' | 'write' = 'read'): ResourceDeclaration => ({ kind: recordKind, access, in: 'path', field: 'id' });
const onRecord = (id: string) => input({ params: { id } });

t.test("a plugin's record is reached through its project and handed out with it", async (t) => {
  const decision = await authorize(keyCredential('A'), operation({ resource: recordInPath('write') }), onRecord('record-of-A'), organisation());
  t.same(authorizedRecord(decision, recordKind), { record: { name: 'of A' }, project: projects.get('A') });
});

t.test("a record that does not exist, or of a project the caller does not reach, answers the kind's own 404", async (t) => {
  const missing = { status: 404, code: 'webhook_not_found', param: 'id' };
  t.same(await refusal(session('owner'), operation({ resource: recordInPath() }), onRecord('nope')), missing, 'absent');
  t.same(await refusal(keyCredential('B'), operation({ resource: recordInPath() }), onRecord('record-of-A')), missing, 'a key of another project');
  t.same(await refusal(session('member', 'developer'), operation({ resource: recordInPath() }), onRecord('record-of-B')), missing, 'a member without a role there');
  t.same(await refusal(connector('B'), operation({ resource: recordInPath() }), onRecord('record-of-A')), missing, 'a connector of another project');
});

t.test("a record's project roles apply: a viewer reads it but does not write it; projects:write reaches every project's", async (t) => {
  const viewer = session('member', 'viewer');
  t.equal(await refusal(viewer, operation({ resource: recordInPath('read') }), onRecord('record-of-A')), null);
  t.equal((await refusal(viewer, operation({ resource: recordInPath('write') }), onRecord('record-of-A')))?.code, 'project_role_insufficient');
  t.equal(await refusal(keyCredential('B', SCOPES), operation({ resource: recordInPath('write') }), onRecord('record-of-A')), null);
});

t.test("a record of the whole organisation is reached only by owners', admins' sessions and keys holding projects:write", async (t) => {
  const declared = operation({ resource: recordInPath('write') });
  for (const credential of [session('owner'), session('admin'), keyCredential('A', SCOPES)]) {
    const decision = await authorize(credential, declared, onRecord('record-of-org'), organisation());
    t.same(authorizedRecord(decision, recordKind), { record: { name: 'of the organisation' }, project: null }, credential.kind);
  }
  const missing = { status: 404, code: 'webhook_not_found', param: 'id' };
  for (const [who, credential] of [
    ['a key confined to its project', keyCredential('A')],
    ["a member's session", session('member', 'developer')],
    ["an owner's connector", connector('A', 'owner', 'owner', [...SCOPES])],
  ] as const) {
    t.same(await refusal(credential, declared, onRecord('record-of-org')), missing, who);
  }
});

t.test("keyOwnProjectOnly keeps a key (or connector) with projects:write to its own project's records, with 404 or the declared code; sessions are not kept", async (t) => {
  const confined = (keyOwnProjectOnly: ResourceDeclaration['keyOwnProjectOnly']) => operation({ resource: { ...recordInPath('write'), keyOwnProjectOnly } });
  const missing = { status: 404, code: 'webhook_not_found', param: 'id' };
  t.same(await refusal(keyCredential('B', SCOPES), confined(true), onRecord('record-of-A')), missing, "a key of B holding projects:write, A's record");
  t.same(await refusal(keyCredential('A', SCOPES), confined(true), onRecord('record-of-org')), missing, "a key holding projects:write, the organisation's record");
  t.same(await refusal(connector('B', 'owner', 'owner', [...SCOPES]), confined(true), onRecord('record-of-A')), missing, 'a connector of B');
  t.same(
    await refusal(keyCredential('B', SCOPES), confined({ code: 'cross_project', message: 'own project only' }), onRecord('record-of-A')),
    { status: 403, code: 'cross_project', param: 'id' },
    'the declared code',
  );
  t.equal(await refusal(keyCredential('A', SCOPES), confined(true), onRecord('record-of-A')), null, 'its own project’s record');
  t.equal(await refusal(session('owner'), confined(true), onRecord('record-of-B')), null, "an owner's session reaches every project's");
});

t.test('authorizedRecord throws when the operation declared no record of that kind', async (t) => {
  t.throws(() => authorizedRecord({ resources: [] }, recordKind), /no webhook endpoint resource/);
});

t.test("an operation reserved to owners and admins admits their sessions only: not a member's, a key with every scope or their connectors", async (t) => {
  const managing = operation({ roles: ['owner', 'admin'] });
  t.equal(await refusal(session('owner'), managing), null);
  t.equal(await refusal(session('admin'), managing), null);
  for (const credential of [session('member'), keyCredential('A', SCOPES), connector('A', 'owner'), connector('A', 'admin')]) {
    t.same(await refusal(credential, managing), { status: 403, code: 'role_required', param: null }, `${credential.kind} ${'role' in credential ? credential.role : ''}`);
  }
});

t.test("an operation reserved to every role admits any person's session, never a key", async (t) => {
  const people = operation({ roles: ORG_ROLES });
  for (const role of ORG_ROLES) t.equal(await refusal(session(role), people), null, role);
  t.equal((await refusal(keyCredential('A', SCOPES), people))?.code, 'role_required');
});

t.test('roles declared as owner alone refuse others as owner-only does, with owner_required', async (t) => {
  t.equal(await refusal(session('owner'), operation({ roles: ['owner'] })), null);
  t.equal((await refusal(session('admin'), operation({ roles: ['owner'] })))?.code, 'owner_required');
});

t.test('the role refusal names the operation and the roles it takes', async (t) => {
  try {
    await authorize(session('member'), operation({ roles: ['owner', 'admin'] }), input(), organisation());
    t.fail('refused');
  } catch (error) {
    t.match((error as Error).message, /test\.op/);
    t.match((error as Error).message, /owner or admin/);
  }
});

t.test('sessionRolesOf reads ownerOnly as the owner role, and nothing declared as no reservation', async (t) => {
  t.same(sessionRolesOf(operation({ ownerOnly: true })), ['owner']);
  t.same(sessionRolesOf(operation({ roles: ['owner', 'admin'] })), ['owner', 'admin']);
  t.equal(sessionRolesOf(operation({})), null);
  t.equal(roleRefusalCode(['owner']), 'owner_required');
  t.equal(roleRefusalCode(['owner', 'admin']), 'role_required');
  t.equal(roleRefusalCode(['admin']), 'role_required');
});

t.test('the scope is checked before the roles', async (t) => {
  t.equal((await refusal(session('member'), operation({ scope: 'projects:write', roles: ['owner', 'admin'] })))?.code, 'missing_scope');
});

t.test('the registry refuses an operation declared both owner-only and for roles, or for no role at all', async (t) => {
  const registry = new OperationRegistry(organisation());
  const op = (name: string, extra: object) => ({ ...operation({}), name, path: `/${name}`, ...extra }) as AnyOperation;
  t.throws(() => registry.add(op('both', { ownerOnly: true, roles: ['owner', 'admin'] })), /both ownerOnly and roles/);
  t.throws(() => registry.add(op('nobody', { roles: [] })), /admit nobody/);
  registry.add(op('managers', { roles: ['owner', 'admin'] }));
  t.ok(registry.get('managers'));
});

// An app's own key (its SVC_API_KEY): a key of project A carrying the app's id, holding `inference` only.
const appKey = (appId: string | null = 'record-of-A'): KeyCredential => ({ ...keyCredential('A', ['inference']), appId }) as KeyCredential;
const ownAppWrite = (extra: { scope?: Scope } = {}) => operation({ scope: 'apps:deploy', ownAppKey: true, resource: recordInPath('write'), ...extra });

t.test('an app’s own key passes an ownAppKey operation on its own app without the scope', async (t) => {
  const decision = await authorize(appKey(), ownAppWrite(), onRecord('record-of-A'), organisation());
  t.same(authorizedRecord(decision, recordKind), { record: { name: 'of A' }, project: projects.get('A') });
});

t.test('an app’s own key meets any other app as absent: the kind’s 404 naming the field', async (t) => {
  t.same(await refusal(appKey(), ownAppWrite(), onRecord('record-of-org')), { status: 404, code: 'webhook_not_found', param: 'id' });
  t.same(await refusal(appKey(), ownAppWrite(), input()), { status: 404, code: 'webhook_not_found', param: 'id' }, 'no id given');
});

t.test('without ownAppKey, or for a key of no app, the scope is still asked', async (t) => {
  const missing = { status: 403, code: 'missing_scope', param: null };
  t.same(await refusal(appKey(), operation({ scope: 'apps:deploy', resource: recordInPath('write') }), onRecord('record-of-A')), missing);
  t.same(await refusal(appKey(null), ownAppWrite(), onRecord('record-of-A')), missing, 'a key of no app');
  t.same(await refusal(session('member', 'developer'), ownAppWrite({ scope: 'projects:write' }), onRecord('record-of-A')), missing, 'a session');
});

t.test('an app’s key holding the scope is a key like any other: it reaches its project’s other records', async (t) => {
  // Its own app is record-of-B here: holding the scope, it writes record-of-A, as any key of project A does.
  const holding = { ...appKey('record-of-B'), scopes: new Set<Scope>(['inference', 'apps:deploy']) } as KeyCredential;
  const decision = await authorize(holding, ownAppWrite(), onRecord('record-of-A'), organisation());
  t.same(authorizedRecord(decision, recordKind), { record: { name: 'of A' }, project: projects.get('A') });
});

t.test('declaredScopeRefusal answers what the auth hook asks of a route: the waiver for an app’s own key only', async (t) => {
  t.equal(declaredScopeRefusal(appKey(), { scope: 'apps:deploy', ownAppKey: true }), null);
  t.equal(declaredScopeRefusal(appKey(), { scope: 'apps:deploy' })?.code, 'missing_scope');
  t.equal(declaredScopeRefusal(keyCredential('A', ['inference']), { scope: 'apps:deploy', ownAppKey: true })?.code, 'missing_scope');
  t.equal(declaredScopeRefusal(appKey(), { scope: null }), null);
  t.equal(declaredScopeRefusal(appKey(), {}), null);
});

t.test('an operation open to an app’s key but declaring no app resource is a programming error', async (t) => {
  await t.rejects(authorize(appKey(), operation({ scope: 'apps:deploy', ownAppKey: true }), input(), organisation()), /first resource/);
  await t.rejects(authorize(appKey(), operation({ scope: 'apps:deploy', ownAppKey: true, resource: keyInPath() }), input({ params: { id: 'key-of-A' } }), organisation()), /first resource/);
});

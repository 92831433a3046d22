import t from 'tap';
import { resourcesOf } from '../../core/identity/authorization.ts';
import { SCOPES, type Scope } from '../../core/identity/scopes.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { MANAGEMENT_PREFIXES } from '../../core/http/mount-operations.ts';
import { createKey } from '../helpers/app.ts';
import { reserved, roleRefusal, scopeMatrixApp, specRoles } from '../helpers/scope-matrix-app.ts';

// The scope matrix (test/helpers/scope-matrix-app.ts): people's roles, and every operation declaring a resource aimed at project A.
const matrix = await scopeMatrixApp(t);
const {
  test,
  operations,
  request,
  label,
  envelopeCode,
  adminOfOrg,
  developerOfA,
  viewerOfA,
  memberOfB,
  keyOfA,
  keyOfB,
  allScopesKey,
  projectA,
  RECORD_FIXTURES,
  withResources,
  keyScopes,
  memberScopes,
  mayCall,
  writes,
  requestOnProjectA,
  refusedOnA,
  allowedOnA,
} = matrix;

t.test("operations reserved to owners and admins refuse a member's session with role_required and let an admin's past; those for any person's session let a member's past", async (t) => {
  for (const operation of operations.filter(reserved)) {
    const roles = specRoles(operation)!;
    for (const [who, role, token] of [
      ['admin', 'admin', adminOfOrg.token],
      ['member', 'member', developerOfA.token],
    ] as const) {
      const response = await request(MANAGEMENT_PREFIXES[0], operation, token);
      if (roles.includes(role)) {
        t.notOk([401, 403].includes(response.statusCode), `${who}: ${label('', operation, response)}`);
        t.ok(response.statusCode < 500, `${who}: ${operation.name}: no server error`);
      } else {
        t.equal(response.statusCode, 403, `${who}: ${label('', operation, response)}`);
        t.equal(envelopeCode(response), roleRefusal(operation), `${who}: ${operation.name}: code ${roleRefusal(operation)}`);
      }
    }
  }
});

t.test('operations that name a project or a key in their input declare it as their resource', async (t) => {
  for (const operation of operations) {
    const fields = [operation.params, operation.query, operation.body].flatMap((schema) => Object.keys((schema as { shape?: object } | undefined)?.shape ?? {}));
    const namesOne = fields.includes('projectId') || /^\/(projects|keys)\/:id/.test(operation.path);
    if (namesOne) t.ok(resourcesOf(operation).length > 0, `${operation.name} declares a resource`);
  }
  t.ok(withResources.length >= 10, 'keys and projects operations declare resources');
});

t.test('every record kind an operation declares has a fixture', async (t) => {
  for (const operation of withResources) {
    for (const declaration of resourcesOf(operation)) {
      if (typeof declaration.kind === 'object') t.ok(RECORD_FIXTURES[declaration.kind.name], `${operation.name}: ${declaration.kind.name}`);
    }
  }
});

t.test('a key of another project is refused every resource of project A', async (t) => {
  for (const operation of withResources.filter((op) => mayCall(op, keyScopes, null))) refusedOnA(t, operation, 'key of B', await requestOnProjectA(operation, keyOfB));
});

t.test('a member without a role on project A is refused its resources', async (t) => {
  for (const operation of withResources.filter((op) => mayCall(op, memberScopes, 'member'))) refusedOnA(t, operation, 'member of B', await requestOnProjectA(operation, memberOfB.token));
});

t.test('a viewer of project A is refused every write on it and allowed every read', async (t) => {
  for (const operation of withResources.filter((op) => mayCall(op, memberScopes, 'member'))) {
    const response = await requestOnProjectA(operation, viewerOfA.token);
    if (writes(operation)) refusedOnA(t, operation, 'viewer of A', response);
    else allowedOnA(t, operation, 'viewer of A', response);
  }
});

t.test("a key of project A and a developer of project A are let through to project A's resources", async (t) => {
  for (const operation of withResources) {
    if (mayCall(operation, keyScopes, null)) allowedOnA(t, operation, 'key of A', await requestOnProjectA(operation, keyOfA));
    if (mayCall(operation, memberScopes, 'member')) allowedOnA(t, operation, 'developer of A', await requestOnProjectA(operation, developerOfA.token));
    if (!reserved(operation)) allowedOnA(t, operation, 'key of A with projects:write', await requestOnProjectA(operation, allScopesKey));
    allowedOnA(t, operation, 'owner', await requestOnProjectA(operation, test.ownerToken));
  }
});

t.test("the registry's authorize decides the same without HTTP, for the MCP surface", async (t) => {
  const registry = test.app.svc.container.resolve(Tokens.Operations);
  const authenticator = test.app.svc.container.resolve(Tokens.Authenticator);
  const get = registry.get('keys.get')!;
  const { id } = await createKey(test, { name: 'asked of the registry', projectId: projectA });
  const input = { params: { id }, query: {}, body: undefined };
  const ofB = await authenticator.authenticate(`Bearer ${keyOfB}`);
  await t.rejects(registry.authorize(ofB, get, input), { status: 404, code: 'key_not_found' });
  const ofA = await authenticator.authenticate(`Bearer ${keyOfA}`);
  const decision = await registry.authorize(ofA, get, input);
  t.match(decision.resources, [{ kind: 'key', key: { id, projectId: projectA }, project: { id: projectA } }]);
});

t.test('a key that may write keys grants no scope or model beyond its own and changes none of its own restrictions', async (t) => {
  const held: Scope[] = ['inference', 'keys:read', 'keys:write'];
  const narrow = await createKey(test, { name: 'narrow writer', scopes: held, models: ['mock-small'] });
  const target = await createKey(test, { name: 'target of the narrow writer', models: ['mock-small'] });
  const as = (method: string, url: string, body: Record<string, unknown>) => test.call(method, url, { token: narrow.key, body });
  for (const scope of SCOPES.filter((s) => !held.includes(s))) {
    t.equal(envelopeCode(await as('POST', '/client/keys', { name: 'wider', scopes: [scope] })), 'scope_escalation', `create granting ${scope}`);
    t.equal(envelopeCode(await as('PATCH', `/client/keys/${target.id}`, { scopes: [scope] })), 'scope_escalation', `update granting ${scope}`);
  }
  for (const models of [null, ['mock-small', 'mock-large']]) {
    t.equal(envelopeCode(await as('POST', '/client/keys', { name: 'wider', models })), 'limit_escalation', `create with models ${JSON.stringify(models)}`);
    t.equal(envelopeCode(await as('PATCH', `/client/keys/${target.id}`, { models })), 'limit_escalation', `update with models ${JSON.stringify(models)}`);
  }
  const own = { scopes: held, models: ['mock-small'], expiresAt: null, spendCap: null, rateLimits: { concurrency: null } };
  for (const [field, value] of Object.entries(own)) {
    t.equal(envelopeCode(await as('PATCH', `/client/keys/${narrow.id}`, { [field]: value })), 'key_cannot_change_itself', `its own ${field}`);
  }
});

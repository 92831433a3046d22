import t from 'tap';
import { resourcesOf, type ResourceDeclaration } from '../../core/identity/authorization.ts';
import type { AnyOperation } from '../../core/operations/operations.ts';
import { SCOPES, type Scope } from '../../core/identity/scopes.ts';
import { sampleToolArguments, type InputFields } from '../fixtures/operation-inputs.ts';
import { createKey } from '../helpers/app.ts';
import { toolError } from '../helpers/mcp-client.ts';
import { connectorMcpClient, connectorToken, onAuthHost } from '../helpers/oauth.ts';
import { ACCESS_REFUSALS, reserved, roleRefusal, scopeMatrixApp, specScope } from '../helpers/scope-matrix-app.ts';

// The scope matrix (test/helpers/scope-matrix-app.ts): {auth_url}/mcp, for connectors signed in over OAuth.
const matrix = await scopeMatrixApp(t);
const { AUTH_URL, test, operations, neededScopes, reachesMcpWithout, projectA, projectB, withResources, mayCall, resourceOfA, toolName, expectedTools, toolCode } = matrix;

const auth = onAuthHost(test, AUTH_URL);
/** What a connector may be granted: every scope but `inference` (connectors never call /v1). */
const grantable = SCOPES.filter((s) => s !== 'inference');
const grantOf = (scopes: readonly Scope[]) => scopes.join(' ');
const connectorWithout = new Map<Scope, string>();
for (const scope of [...neededScopes, 'mcp:write' as Scope]) {
  connectorWithout.set(scope, await connectorToken(auth, { scope: grantOf(grantable.filter((s) => s !== scope)) }));
}
const connectorOfA = await connectorToken(auth);
/** Whether a connector can hold the operation's scope at all (it is never granted inference). */
const grantableScope = (op: AnyOperation) => specScope(op) === null || (grantable as readonly Scope[]).includes(specScope(op)!);
const connectorOfB = await connectorToken(auth, { projectId: projectB });

t.test("{auth_url}/mcp: connectors with different grants list exactly the tools the scope table gives them, never ones reserved to people's sessions", async (t) => {
  const cases: Array<{ who: string; token: string; scopes: ReadonlySet<Scope> }> = [
    { who: 'connector granted every scope', token: connectorOfA, scopes: new Set(grantable) },
    { who: 'connector granted only mcp:read', token: await connectorToken(auth, { scope: 'mcp:read' }), scopes: new Set<Scope>(['mcp:read']) },
    { who: 'connector granted mcp:read and keys:read', token: await connectorToken(auth, { scope: 'mcp:read keys:read' }), scopes: new Set<Scope>(['mcp:read', 'keys:read']) },
  ];
  for (const [scope, token] of [...connectorWithout].filter(([scope]) => reachesMcpWithout(scope)))
    cases.push({ who: `connector granted all but ${scope}`, token, scopes: new Set(grantable.filter((s) => s !== scope)) });
  for (const { who, token, scopes } of cases) {
    const client = await connectorMcpClient(t, auth, token);
    const listed = (await client.listTools()).tools.map((tool) => tool.name);
    t.same(listed, expectedTools(scopes, null, true), who);
    t.notOk(
      listed.some((name) => operations.some((op) => reserved(op) && toolName(op) === name)),
      `${who}: no owner-only or people's tool`,
    );
  }
});

t.test('{auth_url}/mcp: a connector granted no mcp:read is refused 403 missing_scope', async (t) => {
  const token = await connectorToken(auth, { scope: grantOf(grantable.filter((s) => s !== 'mcp:read')) });
  await t.rejects(connectorMcpClient(t, auth, token), { code: 403 });
});

t.test('{auth_url}/mcp: every scoped tool is refused missing_scope to a connector granted every other scope', async (t) => {
  for (const operation of operations) {
    const scope = specScope(operation);
    if (scope === null || !reachesMcpWithout(scope)) continue;
    const client = await connectorMcpClient(t, auth, connectorWithout.get(scope)!);
    t.equal(toolCode(await client.callTool({ name: toolName(operation), arguments: sampleToolArguments(operation) })), 'missing_scope', operation.name);
  }
});

t.test('{auth_url}/mcp: every write tool is refused missing_scope to a connector granted all but mcp:write', async (t) => {
  const client = await connectorMcpClient(t, auth, connectorWithout.get('mcp:write')!);
  for (const operation of operations.filter((op) => !op.readOnly && !reserved(op) && grantableScope(op))) {
    const error = toolError(await client.callTool({ name: toolName(operation), arguments: sampleToolArguments(operation) }));
    t.match(error, { code: 'missing_scope', param: null, message: /mcp:write/ }, operation.name);
  }
});

t.test("{auth_url}/mcp: every tool reserved to people's sessions is refused owner_required or role_required to a connector granted every scope by an owner", async (t) => {
  const client = await connectorMcpClient(t, auth, connectorOfA);
  for (const operation of operations.filter(reserved)) {
    t.equal(toolCode(await client.callTool({ name: toolName(operation), arguments: sampleToolArguments(operation) })), roleRefusal(operation), operation.name);
  }
});

t.test('{auth_url}/mcp: every other tool lets a connector holding its scope past authorisation', async (t) => {
  const refusals = ['missing_scope', 'owner_required', 'role_required', 'tool_not_found', 'internal_error'];
  const client = await connectorMcpClient(t, auth, connectorOfA);
  for (const operation of operations.filter((op) => !reserved(op) && grantableScope(op))) {
    const code = toolCode(await client.callTool({ name: toolName(operation), arguments: sampleToolArguments(operation) }));
    t.notOk(refusals.includes(code ?? ''), `${operation.name} -> ${code}`);
  }
});

t.test("{auth_url}/mcp: a connector of another project is refused project A's resources (a key of A is not found); a connector of A is let through", async (t) => {
  const ofB = await connectorMcpClient(t, auth, connectorOfB);
  const ofA = await connectorMcpClient(t, auth, connectorOfA);
  const grantableScopes = new Set<Scope>(grantable);
  for (const operation of withResources.filter((op) => mayCall(op, grantableScopes, null, true))) {
    const fields: Required<InputFields> = { path: {}, query: {}, body: {} };
    for (const declaration of resourcesOf(operation) as ResourceDeclaration[]) fields[declaration.in][declaration.field] = await resourceOfA(declaration);
    const call = { name: toolName(operation), arguments: sampleToolArguments(operation, fields) };
    t.ok(ACCESS_REFUSALS.includes(toolCode(await ofB.callTool(call)) ?? ''), `connector of B: ${operation.name}`);
    t.notOk(ACCESS_REFUSALS.includes(toolCode(await ofA.callTool(call)) ?? ''), `connector of A: ${operation.name}`);
  }
  const keyOfProjectA = await createKey(test, { name: 'looked up by a connector of B', projectId: projectA });
  const error = toolError(await ofB.callTool({ name: 'keys_get', arguments: { id: keyOfProjectA.id } }));
  t.match(error, { code: 'key_not_found' }, "another project's key is not found, as over HTTP (404)");
});

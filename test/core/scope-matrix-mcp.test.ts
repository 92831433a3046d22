import t from 'tap';
import { resourcesOf, type ResourceDeclaration } from '../../core/identity/authorization.ts';
import { SCOPES, scopesForRole, type OrgRole, type Scope } from '../../core/identity/scopes.ts';
import { sampleToolArguments, type InputFields } from '../fixtures/operation-inputs.ts';
import { createKey } from '../helpers/app.ts';
import { listeningBase, mcpClient } from '../helpers/mcp-client.ts';
import { ACCESS_REFUSALS, reserved, roleRefusal, scopeMatrixApp, specPersonOnly, specScope } from '../helpers/scope-matrix-app.ts';

// The scope matrix (test/helpers/scope-matrix-app.ts): /mcp, for keys and people's sessions.
const matrix = await scopeMatrixApp(t);
const {
  test,
  operations,
  allScopesKey,
  adminOfOrg,
  developerOfA,
  memberOfB,
  keyOfA,
  keyOfB,
  keyWithout,
  neededScopes,
  reachesMcpWithout,
  memberScopes,
  keyScopes,
  withResources,
  mayCall,
  resourceOfA,
  toolName,
  expectedTools,
  toolCode,
} = matrix;

const mcpBase = await listeningBase(test);

t.test('/mcp: every credential kind lists exactly the tools the scope table gives it', async (t) => {
  const allScopes = new Set<Scope>(SCOPES);
  const cases: Array<{ who: string; token: string; scopes: ReadonlySet<Scope>; role: OrgRole | null }> = [
    { who: "owner's session", token: test.ownerToken, scopes: scopesForRole('owner'), role: 'owner' },
    { who: "admin's session", token: adminOfOrg.token, scopes: scopesForRole('admin'), role: 'admin' },
    { who: "member's session", token: developerOfA.token, scopes: memberScopes, role: 'member' },
    { who: 'key holding every scope', token: allScopesKey, scopes: allScopes, role: null },
    {
      who: 'key without mcp:write',
      token: keyWithout.get('mcp:write' as Scope) ?? (await createKey(test, { name: 'no mcp:write', scopes: SCOPES.filter((s) => s !== 'mcp:write') })).key,
      scopes: new Set(SCOPES.filter((s) => s !== 'mcp:write')),
      role: null,
    },
  ];
  for (const scope of neededScopes.filter(reachesMcpWithout))
    cases.push({ who: `key without ${scope}`, token: keyWithout.get(scope)!, scopes: new Set(SCOPES.filter((s) => s !== scope)), role: null });
  for (const { who, token, scopes, role } of cases) {
    const client = await mcpClient(t, mcpBase, token);
    const listed = (await client.listTools()).tools.map((tool) => tool.name);
    t.same(listed, expectedTools(scopes, role), who);
  }
});

t.test('/mcp: a key without mcp:read is refused 403 missing_scope', async (t) => {
  const noMcp = (await createKey(test, { name: 'no mcp:read', scopes: SCOPES.filter((s) => s !== 'mcp:read') })).key;
  await t.rejects(mcpClient(t, mcpBase, noMcp), { code: 403 });
});

t.test('/mcp: every scoped tool is refused missing_scope to a key holding every other scope', async (t) => {
  for (const operation of operations) {
    const scope = specScope(operation);
    if (scope === null || !reachesMcpWithout(scope)) continue;
    const client = await mcpClient(t, mcpBase, keyWithout.get(scope)!);
    const result = await client.callTool({ name: toolName(operation), arguments: sampleToolArguments(operation) });
    t.equal(toolCode(result), 'missing_scope', operation.name);
  }
});

t.test("/mcp: every tool reserved to people's sessions is refused owner_required or role_required to a key holding every scope", async (t) => {
  const client = await mcpClient(t, mcpBase, allScopesKey);
  for (const operation of operations.filter(reserved)) {
    t.equal(toolCode(await client.callTool({ name: toolName(operation), arguments: sampleToolArguments(operation) })), roleRefusal(operation), operation.name);
  }
});

t.test('/mcp: every person-only tool is refused person_required to a key holding every scope', async (t) => {
  const client = await mcpClient(t, mcpBase, allScopesKey);
  for (const operation of operations.filter(specPersonOnly)) {
    t.equal(toolCode(await client.callTool({ name: toolName(operation), arguments: sampleToolArguments(operation) })), 'person_required', operation.name);
  }
});

t.test("/mcp: every tool lets a key holding its scope and the owner's session past authorisation", async (t) => {
  const refusals = ['missing_scope', 'owner_required', 'role_required', 'tool_not_found', 'internal_error'];
  const asKey = await mcpClient(t, mcpBase, allScopesKey);
  const asOwner = await mcpClient(t, mcpBase, test.ownerToken);
  for (const operation of operations) {
    if (!reserved(operation) && !specPersonOnly(operation)) {
      const code = toolCode(await asKey.callTool({ name: toolName(operation), arguments: sampleToolArguments(operation) }));
      t.notOk(refusals.includes(code ?? ''), `key: ${operation.name} -> ${code}`);
    }
    const code = toolCode(await asOwner.callTool({ name: toolName(operation), arguments: sampleToolArguments(operation) }));
    t.notOk(refusals.includes(code ?? ''), `owner: ${operation.name} -> ${code}`);
  }
});

t.test("/mcp: a key of another project and a member without a role are refused project A's resources; a key of A is let through", async (t) => {
  const ofB = await mcpClient(t, mcpBase, keyOfB);
  const member = await mcpClient(t, mcpBase, memberOfB.token);
  const ofA = await mcpClient(t, mcpBase, keyOfA);
  for (const operation of withResources) {
    const fields: Required<InputFields> = { path: {}, query: {}, body: {} };
    for (const declaration of resourcesOf(operation) as ResourceDeclaration[]) fields[declaration.in][declaration.field] = await resourceOfA(declaration);
    const call = { name: toolName(operation), arguments: sampleToolArguments(operation, fields) };
    if (mayCall(operation, keyScopes, null)) {
      t.ok(ACCESS_REFUSALS.includes(toolCode(await ofB.callTool(call)) ?? ''), `key of B: ${operation.name}`);
      t.notOk(ACCESS_REFUSALS.includes(toolCode(await ofA.callTool(call)) ?? ''), `key of A: ${operation.name}`);
    }
    if (mayCall(operation, memberScopes, 'member')) t.ok(ACCESS_REFUSALS.includes(toolCode(await member.callTool(call)) ?? ''), `member of B: ${operation.name}`);
  }
});

// The same at {auth_url}/mcp for connectors that signed in over OAuth: a person (an organisation owner
// here) confined to the project picked on the consent page, holding the scopes granted there. The
// table decides their tools exactly as for a key holding those scopes: owner-only tools never, even

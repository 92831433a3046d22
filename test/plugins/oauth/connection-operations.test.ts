import { randomUUID } from 'node:crypto';
import t from 'tap';
import { CONNECTOR_ACCESS_PREFIX, CONNECTOR_REFRESH_PREFIX, generateToken, hashToken } from '../../../core/identity/api-tokens.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { OAuthStore } from '../../../plugins/oauth/oauth-store.ts';
import { addPerson, createKey } from '../../helpers/app.ts';
import { buildOAuthApp, connectorToken } from '../../helpers/oauth.ts';

/** GET /client/oauth/connections and DELETE /client/oauth/connections/{id} (plugins/oauth/connection-operations.ts). */

t.setTimeout(240_000);

const test = await buildOAuthApp(t);
const store = new OAuthStore(test.app.svc.container.resolve(Tokens.Database));

const mcpCall = (token: string) =>
  test.auth('POST', '/mcp', {
    json: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
    headers: { authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream' },
  });

interface Listed {
  id: string;
  client: { id: string; name: string | null; redirectHosts: string[] };
  person: { id: string; email: string };
  scopes: string[];
  expiresAt: string;
}
const list = async (token?: string): Promise<Listed[]> => {
  const answer = await test.call('GET', '/client/oauth/connections', { token });
  if (answer.statusCode !== 200) throw new Error(`list: ${answer.statusCode} ${answer.body}`);
  return answer.json().data;
};

/** A grant approved by `personId` and its access token, stored as the token endpoint stores them. */
async function grantOf(personId: string): Promise<{ grantId: string; token: string }> {
  const clientId = `svc_client_${randomUUID()}`;
  const now = new Date();
  await store.createClient({ id: clientId, clientName: 'Member tool', redirectUris: ['cursor://anysphere/callback'], createdAt: now });
  const grantId = randomUUID();
  const grant = { id: grantId, clientId, personId, organizationId: test.organizationId, projectId: test.defaultProjectId, scopes: ['mcp:read'], resource: `${test.authUrl}/mcp` };
  const code = { codeHash: hashToken(generateToken(CONNECTOR_ACCESS_PREFIX)), redirectUri: 'cursor://anysphere/callback', codeChallenge: 'x', expiresAt: now };
  await store.createGrantWithCode(grant, code, now);
  const token = generateToken(CONNECTOR_ACCESS_PREFIX);
  const later = new Date(now.getTime() + 600_000);
  await store.storeTokens(grantId, { hash: hashToken(token), expiresAt: later }, { hash: hashToken(generateToken(CONNECTOR_REFRESH_PREFIX)), expiresAt: later });
  return { grantId, token };
}

t.test('a connector signed in through the OAuth flow is listed with its client, redirect host, person, scopes and expiry', async (t) => {
  await connectorToken(test, { scope: 'mcp:read keys:read' });
  const [connection] = await list();
  t.match(connection, {
    object: 'connector_connection',
    client: { id: /^svc_client_/, name: 'Test connector', redirectHosts: ['client.example'] },
    person: { email: /^person-.*@example\.com$/ },
    projectId: test.defaultProjectId,
    scopes: ['keys:read', 'mcp:read'],
    createdAt: String,
  });
  t.ok(Date.parse(connection!.expiresAt) > Date.now() + 29 * 86_400_000, "its refresh token's expiry, 30 days out");
});

t.test("revoking a connection ends every token of its grant: the connector's next /mcp call is 401", async (t) => {
  const token = await connectorToken(test, { scope: 'mcp:read' });
  t.equal((await mcpCall(token)).statusCode, 200, 'connected');
  const [newest] = await list();
  const revoked = await test.call('DELETE', `/client/oauth/connections/${newest!.id}`);
  t.equal(revoked.statusCode, 200);
  t.same(revoked.json(), { object: 'ack', ok: true, id: newest!.id, status: 'revoked' });
  t.equal((await mcpCall(token)).statusCode, 401, 'refused from the next call');
  t.notOk(
    (await list()).some((row) => row.id === newest!.id),
    'no longer listed',
  );
  t.equal((await test.call('DELETE', `/client/oauth/connections/${newest!.id}`)).statusCode, 200, 'revoking again answers the same');
});

t.test('a member sees and revokes only their own connections; an owner or admin sees everyone’s', async (t) => {
  const member = await addPerson(test, { role: 'member' });
  const own = await grantOf(member.personId);
  const admin = await addPerson(test, { role: 'admin' });
  const someoneElses = await grantOf(admin.personId);
  t.same(
    (await list(member.token)).map((row) => row.id),
    [own.grantId],
    'the member lists their own only',
  );
  t.match((await list(member.token))[0], { client: { name: 'Member tool', redirectHosts: ['anysphere'] } });
  const adminSees = (await list(admin.token)).map((row) => row.id);
  t.ok(adminSees.includes(own.grantId) && adminSees.includes(someoneElses.grantId), 'an admin lists everyone’s');
  const refused = await test.call('DELETE', `/client/oauth/connections/${someoneElses.grantId}`, { token: member.token });
  t.equal(refused.statusCode, 404, "another person's connection is not the member's to see");
  t.equal(refused.json().error.code, 'connector_connection_not_found');
  t.equal((await mcpCall(someoneElses.token)).statusCode, 200, 'and it still works');
  t.equal((await test.call('DELETE', `/client/oauth/connections/${own.grantId}`, { token: member.token })).statusCode, 200, 'their own they revoke');
  t.equal((await mcpCall(own.token)).statusCode, 401);
  t.equal((await test.call('DELETE', `/client/oauth/connections/${someoneElses.grantId}`, { token: admin.token })).statusCode, 200, 'an admin revokes anyone’s');
  t.equal((await mcpCall(someoneElses.token)).statusCode, 401);
});

t.test('an unknown connection is 404', async (t) => {
  const answer = await test.call('DELETE', `/client/oauth/connections/${randomUUID()}`);
  t.equal(answer.statusCode, 404);
  t.equal(answer.json().error.code, 'connector_connection_not_found');
});

t.test('API keys are refused with role_required, whatever their scopes', async (t) => {
  const key = (await createKey(test, { name: 'every scope', scopes: ['mcp:read', 'mcp:write', 'keys:read', 'projects:write'] })).key;
  for (const [method, path] of [
    ['GET', '/client/oauth/connections'],
    ['DELETE', `/client/oauth/connections/${randomUUID()}`],
  ] as const) {
    const answer = await test.call(method, path, { token: key });
    t.equal(answer.statusCode, 403, `${method} ${path}`);
    t.equal(answer.json().error.code, 'role_required');
  }
});

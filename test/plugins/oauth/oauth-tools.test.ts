import t from 'tap';
import { connectorMcpClient, buildOAuthApp, connectorToken } from '../../helpers/oauth.ts';

/** `{auth_url}/mcp` serves the operation tools, authorized for the connector exactly as /mcp is for keys and sessions. */

t.setTimeout(240_000);

const test = await buildOAuthApp(t, { echo: false });
const token = await connectorToken(test, { scope: 'mcp:read keys:read usage:read' });
const rpc = (method: string, params: Record<string, unknown> = {}) =>
  test.auth('POST', '/mcp', {
    json: { jsonrpc: '2.0', id: 1, method, params },
    headers: { authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream' },
  });

t.test("a connector lists the operation tools its grant allows, and never an owner's", async (t) => {
  const answer = await rpc('tools/list');
  t.equal(answer.statusCode, 200, 'answered');
  const names = (JSON.parse(answer.body) as { result: { tools: Array<{ name: string }> } }).result.tools.map((tool) => tool.name);
  t.ok(names.includes('account_whoami'), 'a read tool every credential may call');
  t.notOk(names.includes('audit_list'), 'owner-only operations are not offered to a connector');
  t.same(names, [...names].sort(), 'in a deterministic order');
});

t.test('a connector calls a tool and gets the operation answer as structured content', async (t) => {
  const answer = await rpc('tools/call', { name: 'keys_list', arguments: {} });
  t.equal(answer.statusCode, 200, 'answered');
  const { result } = JSON.parse(answer.body) as { result: { isError?: boolean; structuredContent?: Record<string, unknown> } };
  t.notOk(result.isError, 'no error');
  t.match(result.structuredContent, { object: 'list', data: Array }, 'the operation answer as structured content');
});

/** What whoami answers a connector: the person behind it, the client, the one project and the granted scopes. */
const connectorWhoami = (clientIdPattern: RegExp) => ({
  object: 'whoami',
  account: { id: test.organizationId },
  project: { id: test.defaultProjectId, name: String },
  credential: { type: 'connector', personId: String, email: /@example\.com$/, role: 'owner', clientId: clientIdPattern },
  scopes: ['keys:read', 'usage:read', 'mcp:read'],
});

t.test('whoami over HTTP at {auth_url}/mcp answers a connector as a connector, confined to its project', async (t) => {
  const answer = await rpc('tools/call', { name: 'account_whoami', arguments: {} });
  t.equal(answer.statusCode, 200, 'answered');
  const { result } = JSON.parse(answer.body) as { result: { isError?: boolean; structuredContent?: Record<string, unknown> } };
  t.notOk(result.isError, 'no error');
  t.match(result.structuredContent, connectorWhoami(/^svc_client_/));
  t.same(Object.keys(result.structuredContent?.credential as object).sort(), ['clientId', 'email', 'personId', 'role', 'type'], 'nothing more about the credential');
});

t.test('whoami as a tool of the MCP SDK client answers the connector, its client and its project', async (t) => {
  const client = await connectorMcpClient(t, test, token);
  const result = await client.callTool({ name: 'account_whoami', arguments: {} });
  t.notOk(result.isError, 'no error');
  t.match(result.structuredContent, connectorWhoami(/^svc_client_/));
  const other = await connectorToken(test, { scope: 'mcp:read', projectId: await anotherProject() });
  const otherResult = await (await connectorMcpClient(t, test, other)).callTool({ name: 'account_whoami', arguments: {} });
  t.match(otherResult.structuredContent, { project: { name: 'whoami: another project' }, scopes: ['mcp:read'] }, "another grant's project and scopes");
});

async function anotherProject(): Promise<string> {
  const created = await test.call('POST', '/client/projects', { body: { name: 'whoami: another project' } });
  return (created.json() as { id: string }).id;
}

t.test('a connector sends a tool call larger than the 8 KB limit of unauthenticated routes, as at /mcp', async (t) => {
  const text = 'a'.repeat(20_000);
  const answer = await rpc('tools/call', { name: 'guardrails_test', arguments: { text } });
  t.equal(answer.statusCode, 200, 'read and answered');
  const { result } = JSON.parse(answer.body) as { result: { isError?: boolean; structuredContent?: { text?: string } } };
  t.notOk(result.isError, 'no error');
  t.equal(result.structuredContent?.text?.length, text.length, 'the whole text reached the operation');
});

t.test('{auth_url}/mcp refuses a request without a token before reading its body', async (t) => {
  const answer = await test.auth('POST', '/mcp', {
    json: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {}, padding: 'a'.repeat(20_000) },
    headers: { accept: 'application/json, text/event-stream' },
  });
  t.equal(answer.statusCode, 401, 'a credential is asked for, whatever the body');
  t.match(answer.headers['www-authenticate'], /^Bearer resource_metadata=/);
});

t.test("{auth_url}/mcp refuses a request from another site's page, and takes one from its own origin", async (t) => {
  const from = (origin: string) =>
    test.auth('POST', '/mcp', {
      json: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
      headers: { authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream', origin },
    });
  const foreign = await from('https://evil.example');
  t.equal(foreign.statusCode, 403);
  t.equal(foreign.json().error.code, 'origin_not_allowed');
  t.equal((await from(test.authUrl)).statusCode, 200, "auth_url's own origin");
});

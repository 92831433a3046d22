import t from 'tap';
import { buildOAuthApp, issuedCode, redeem } from '../../helpers/oauth.ts';

/** `{auth_url}/mcp` serves the operation tools, authorized for the connector exactly as /mcp is for keys and sessions. */

t.setTimeout(240_000);

const test = await buildOAuthApp(t, { echo: false });
const { access_token: token } = JSON.parse((await redeem(test, await issuedCode(test))).body) as { access_token: string };
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
  const answer = await rpc('tools/call', { name: 'account_whoami', arguments: {} });
  t.equal(answer.statusCode, 200, 'answered');
  const { result } = JSON.parse(answer.body) as { result: { isError?: boolean; structuredContent?: Record<string, unknown> } };
  t.notOk(result.isError, 'no error');
  t.ok(result.structuredContent, 'the operation answer as structured content');
});

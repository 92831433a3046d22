import net, { type LookupFunction } from 'node:net';
import t from 'tap';
import { buildTestApp, createKey, type TapLike, type TestApp } from '../../helpers/app.ts';
import { type FakeMcpServer, startFakeMcpServer, tool } from './fake-mcp-server.ts';

t.setTimeout(120_000);

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | Array<{ address: string; family: number }>, family?: number) => void;

/** A resolver answering the next of these addresses each time (the last one again once they run out). */
function answersInTurn(...addresses: string[]): LookupFunction {
  let next = 0;
  return ((_hostname: string, options: { all?: boolean }, callback: LookupCallback) => {
    const address = addresses[Math.min(next++, addresses.length - 1)]!;
    const family = net.isIP(address);
    if (options.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  }) as unknown as LookupFunction;
}

async function server(t: TapLike, tools = [tool('search'), tool('create_issue', { annotations: { destructiveHint: true } }), tool('close_issue')]): Promise<FakeMcpServer> {
  const started = await startFakeMcpServer(tools);
  t.teardown(() => started.close());
  return started;
}

let logLines = '';
const app = await buildTestApp(t, {
  config: { outbound: { allowPrivateNetwork: true }, server: { logLevel: 'info' } },
  logStream: { write: (line: string) => void (logLines += line) },
});

async function register(test: TestApp, body: Record<string, unknown>, token?: string) {
  const response = await test.call('POST', '/client/mcp/upstreams', { body, token });
  return { response, body: response.json() as Record<string, any> };
}

async function toolsOf(test: TestApp, upstreamId: string) {
  const response = await test.call('GET', `/client/mcp/tools?upstreamId=${upstreamId}&limit=200`);
  return (response.json() as { data: Array<Record<string, any>> }).data;
}

t.test('registering a Streamable HTTP server discovers every tool over paginated tools/list, switched off by default', async (t) => {
  const mcp = await server(t);
  const { response, body } = await register(app, { name: 'Issue Tracker', url: `${mcp.url}/mcp` });
  t.equal(response.statusCode, 201, response.body);
  t.equal(body.slug, 'issue-tracker');
  t.match(body.health, { status: 'ok', toolCount: 3, serverInfo: { name: 'fake-tracker', version: '1.2.3' } });
  const tools = await toolsOf(app, body.id);
  t.same(tools.map((each) => each.name).sort(), ['close_issue', 'create_issue', 'search']);
  t.ok(tools.every((each) => each.enabled === false));
  t.equal(tools.find((each) => each.name === 'search')?.gatewayName, 'issue-tracker__search');
});

t.test('a legacy HTTP+SSE server is discovered too', async (t) => {
  const mcp = await server(t);
  const { response, body } = await register(app, { name: 'Legacy', url: `${mcp.url}/sse`, transport: 'sse', newTools: 'enabled' });
  t.equal(response.statusCode, 201, response.body);
  t.match(body.health, { status: 'ok', toolCount: 3 });
  t.ok(
    (await toolsOf(app, body.id)).every((each) => each.enabled === true),
    'newTools enabled: they arrive switched on',
  );
});

t.test('test answers what the server lists and saves nothing', async (t) => {
  const mcp = await server(t);
  const before = (await app.call('GET', '/client/mcp/upstreams?limit=200')).json().data.length;
  const response = await app.call('POST', '/client/mcp/upstreams/test', { body: { name: 'Try', url: `${mcp.url}/mcp` } });
  t.equal(response.statusCode, 200, response.body);
  t.match(response.json(), { ok: true, serverInfo: { name: 'fake-tracker' }, tools: [{ name: 'search' }, { name: 'create_issue' }, { name: 'close_issue' }] });
  t.equal((await app.call('GET', '/client/mcp/upstreams?limit=200')).json().data.length, before);
});

t.test('a refresh answers the diff: added, removed and changed, keeping ids and settings', async (t) => {
  const mcp = await server(t);
  const { body } = await register(app, { name: 'Diffed', url: `${mcp.url}/mcp` });
  const search = (await toolsOf(app, body.id)).find((each) => each.name === 'search')!;
  t.equal((await app.call('PATCH', `/client/mcp/tools/${search.id}`, { body: { enabled: true, alias: 'find' } })).statusCode, 200);
  mcp.tools = [tool('search', { description: 'Search better' }), tool('create_issue', { annotations: { destructiveHint: true } }), tool('label_issue')];
  const refreshed = await app.call('POST', `/client/mcp/upstreams/${body.id}/refresh`);
  t.equal(refreshed.statusCode, 200, refreshed.body);
  t.match(refreshed.json(), { ok: true, added: ['label_issue'], removed: ['close_issue'], changed: ['search'] });
  const after = (await toolsOf(app, body.id)).find((each) => each.name === 'search')!;
  t.match(after, { id: search.id, enabled: true, alias: 'find', description: 'Search better', gatewayName: 'diffed__find' });
});

t.test('tool switches: alias validated and unique in the upstream, description override, approval policy', async (t) => {
  const mcp = await server(t);
  const { body } = await register(app, { name: 'Switches', url: `${mcp.url}/mcp` });
  const [first, second] = await toolsOf(app, body.id);
  t.equal((await app.call('PATCH', `/client/mcp/tools/${first!.id}`, { body: { alias: 'bad name!' } })).statusCode, 400);
  const taken = await app.call('PATCH', `/client/mcp/tools/${first!.id}`, { body: { alias: second!.name } });
  t.equal(taken.statusCode, 409);
  t.equal(taken.json().error.code, 'tool_alias_taken');
  const patched = await app.call('PATCH', `/client/mcp/tools/${first!.id}`, { body: { description: 'Ours', approval: 'always' } });
  t.match(patched.json(), { description: 'Ours', descriptionOverride: 'Ours', approval: 'always' });
  t.match((await app.call('PATCH', `/client/mcp/tools/${first!.id}`, { body: { description: null } })).json(), { descriptionOverride: null });
  t.equal((await app.call('PATCH', `/client/mcp/tools/${first!.id}`, { body: { enabld: true } })).json().error.param, 'enabld', 'unknown fields are named');
});

t.test('approve switches on the tools named, reporting those already on', async (t) => {
  const mcp = await server(t);
  const { body } = await register(app, { name: 'Approved', url: `${mcp.url}/mcp` });
  const ids = (await toolsOf(app, body.id)).map((each) => each.id);
  const first = await app.call('POST', '/client/mcp/tools/approve', { body: { ids: ids.slice(0, 2) } });
  t.match(first.json(), { enabled: ids.slice(0, 2), alreadyEnabled: [] });
  const second = await app.call('POST', '/client/mcp/tools/approve', { body: { ids } });
  t.match(second.json(), { enabled: [ids[2]], alreadyEnabled: ids.slice(0, 2) });
  t.equal((await app.call('GET', `/client/mcp/tools?upstreamId=${body.id}&enabled=false`)).json().data.length, 0);
});

t.test('a header secret is sent upstream, never returned, and never in the log', async (t) => {
  const mcp = await server(t);
  const secret = 'Bearer upstream-secret-4711';
  const { body } = await register(app, { name: 'Secret', url: `${mcp.url}/mcp`, auth: { type: 'header', name: 'Authorization', value: secret } });
  t.ok(mcp.headers.length > 0 && mcp.headers.every((headers) => headers.authorization === secret), 'every request carries it');
  t.same(body.auth, { type: 'header', name: 'Authorization' });
  const everything = JSON.stringify([body, (await app.call('GET', '/client/mcp/upstreams?limit=200')).json(), (await app.call('GET', `/client/mcp/upstreams/${body.id}`)).json()]);
  t.notOk(everything.includes('upstream-secret-4711'));
  t.notOk(logLines.includes('upstream-secret-4711'));
  const reserved = await register(app, { name: 'Host', url: `${mcp.url}/mcp`, auth: { type: 'header', name: 'Host', value: 'x' } });
  t.equal(reserved.body.error.code, 'upstream_header_invalid');
});

t.test('a server that is down: health says so, and a refresh keeps its tools', async (t) => {
  const mcp = await server(t);
  const { body } = await register(app, { name: 'Flaky', url: `${mcp.url}/mcp` });
  await mcp.close();
  const refreshed = await app.call('POST', `/client/mcp/upstreams/${body.id}/refresh`);
  t.match(refreshed.json(), { ok: false, error: { kind: 'connect' }, added: [], removed: [], upstream: { health: { status: 'error', errorKind: 'connect', toolCount: 3 } } });
  t.equal((await toolsOf(app, body.id)).length, 3);
});

t.test('slugs: derived ones are made unique, a given one that is taken is refused, and they are [a-z0-9-]', async (t) => {
  const mcp = await server(t);
  const first = await register(app, { name: 'Twin', url: `${mcp.url}/mcp` });
  const second = await register(app, { name: 'Twin', url: `${mcp.url}/mcp` });
  t.equal(first.body.slug, 'twin');
  t.equal(second.body.slug, 'twin-2');
  t.equal((await register(app, { name: 'Other', slug: 'twin', url: `${mcp.url}/mcp` })).body.error.code, 'upstream_slug_taken');
  t.equal((await register(app, { name: 'Other', slug: 'Not_OK', url: `${mcp.url}/mcp` })).response.statusCode, 400);
  t.equal((await register(app, { name: 'Other', url: `${mcp.url}/mcp`, colour: 'red' })).body.error.param, 'colour');
});

t.test('deleting an upstream deletes its tools', async (t) => {
  const mcp = await server(t);
  const { body } = await register(app, { name: 'Gone', url: `${mcp.url}/mcp` });
  t.equal((await app.call('DELETE', `/client/mcp/upstreams/${body.id}`)).statusCode, 200);
  t.equal((await app.call('GET', `/client/mcp/upstreams/${body.id}`)).statusCode, 404);
  t.equal((await toolsOf(app, body.id)).length, 0);
});

t.test("another project's key gets 404 for an upstream and its tools", async (t) => {
  const mcp = await server(t);
  const { body } = await register(app, { name: 'Mine', url: `${mcp.url}/mcp` });
  const other = (await app.call('POST', '/client/projects', { body: { name: 'Elsewhere' } })).json() as { id: string };
  const key = await createKey(app, { name: 'other', projectId: other.id, scopes: ['mcp:read', 'mcp:write'] });
  const got = await app.call('GET', `/client/mcp/upstreams/${body.id}`, { token: key.key });
  t.equal(got.statusCode, 404);
  t.equal(got.json().error.code, 'upstream_not_found');
  const toolId = (await toolsOf(app, body.id))[0]!.id;
  t.equal((await app.call('PATCH', `/client/mcp/tools/${toolId}`, { token: key.key, body: { enabled: true } })).statusCode, 404);
  t.equal((await app.call('GET', '/client/mcp/upstreams', { token: key.key })).json().data.length, 0);
});

t.test('a full-access project refuses key creation with 403; governed and off do not', async (t) => {
  const project = (await app.call('POST', '/client/projects', { body: { name: 'Full' } })).json() as { id: string };
  const set = await app.call('PUT', `/client/mcp/projects/${project.id}/switch`, { body: { mode: 'full' } });
  t.match(set.json(), { mode: 'full', projectId: project.id });
  const refused = await app.call('POST', '/client/keys', { body: { name: 'k', projectId: project.id } });
  t.equal(refused.statusCode, 403);
  t.equal(refused.json().error.code, 'project_full_tool_access');
  const switches = (await app.call('GET', '/client/mcp/switches')).json().data as Array<{ projectId: string; mode: string }>;
  t.equal(switches.find((each) => each.projectId === project.id)?.mode, 'full');
  await app.call('PUT', `/client/mcp/projects/${project.id}/switch`, { body: { mode: 'off' } });
  t.equal((await app.call('POST', '/client/keys', { body: { name: 'k', projectId: project.id } })).statusCode, 201);
});

t.test('a private address is refused at save unless the operator allows it', async (t) => {
  const guarded = await buildTestApp(t);
  const refused = await register(guarded, { name: 'Loop', url: 'https://127.0.0.1/mcp' });
  t.equal(refused.response.statusCode, 400);
  t.equal(refused.body.error.code, 'upstream_url_refused');
  t.equal((await register(guarded, { name: 'Plain', url: 'http://mcp.example.invalid/mcp' })).body.error.code, 'upstream_url_invalid', 'plain http only where private networks are allowed');
});

t.test('a name that resolved publicly at save and privately at connect time is refused (DNS rebinding)', async (t) => {
  const mcp = await server(t);
  const guarded = await buildTestApp(t, { outboundLookup: answersInTurn('93.184.216.34', '127.0.0.1') });
  const { response, body } = await register(guarded, { name: 'Rebound', url: `https://rebind.example:${mcp.port}/mcp` });
  t.equal(response.statusCode, 201, 'saved: the name resolved publicly then');
  t.match(body.health, { status: 'error', errorKind: 'refused_address', toolCount: 0 });
  t.equal(mcp.headers.length, 0, 'nothing reached the server');
});

t.test("a project's mode is an owner's or admin's decision: a key with mcp:write is refused 403 role_required", async (t) => {
  const project = (await app.call('POST', '/client/projects', { body: { name: 'Decided by people' } })).json() as { id: string };
  const key = (await app.call('POST', '/client/keys', { body: { name: 'mcp writer', scopes: ['mcp:read', 'mcp:write'], projectId: project.id } })).json() as { key: string };
  const refused = await app.call('PUT', `/client/mcp/projects/${project.id}/switch`, { token: key.key, body: { mode: 'full' } });
  t.equal(refused.statusCode, 403);
  t.equal(refused.json().error.code, 'role_required');
  const switches = (await app.call('GET', '/client/mcp/switches', { token: key.key })).json().data as Array<{ projectId: string; mode: string }>;
  t.equal(switches.find((each) => each.projectId === project.id)?.mode, 'governed', 'the mode is unchanged');
});

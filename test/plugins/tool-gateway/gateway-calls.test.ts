import { createHash, randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type CallToolResult, ErrorCode, McpError, type Progress } from '@modelcontextprotocol/sdk/types.js';
import t from 'tap';
import { allPlugins, buildTestApp, createKey, realServersConfig, type TapLike } from '../../helpers/app.ts';
import { eventually } from '../../helpers/eventually.ts';
import { listeningBase, mcpClient } from '../../helpers/mcp-client.ts';
import { type FakeMcpServer, startFakeMcpServer, tool } from './fake-mcp-server.ts';

t.setTimeout(180_000);

// PostgreSQL and Redis when TEST_PG_URL and TEST_REDIS_URL are set (call rows, their totals and the
// rate limit on the real servers), else PGlite and memory coordination.
const servers = realServersConfig();
if (servers) t.teardown(() => servers.dropSchema());
const app = await buildTestApp(t, {
  // A call needing approval waits a moment only: the approval flows themselves are approvals*.test.ts's.
  plugins: { ...allPlugins(), 'tool-gateway': { approvalWaitMs: 300, approvalProgressMs: 100 } },
  config: { outbound: { allowPrivateNetwork: true }, metrics: { enabled: true }, ...(servers ? { storage: servers.storage, secrets: servers.secrets } : {}) },
});
const base = await listeningBase(app);

type Json = Record<string, any>;

async function call(method: string, url: string, body?: unknown, token?: string) {
  const response = await app.call(method as 'GET', `/client${url}`, { ...(body !== undefined ? { body } : {}), token });
  return { status: response.statusCode, json: response.json() as Json, raw: response.body };
}

/** Read-only tools: no approval is asked for them in a governed project. */
const readOnly = (name: string) => tool(name, { annotations: { readOnlyHint: true } });
const NAMES = ['echo', 'fail', 'slow', 'die'];

interface Upstream {
  id: string;
  slug: string;
  mcp: FakeMcpServer;
  tools: Record<string, string>;
}

async function upstream(t: TapLike, projectId: string, options: { names?: string[]; transport?: 'sse'; path?: string } = {}): Promise<Upstream> {
  const slug = `u${randomUUID().slice(0, 8)}`;
  const mcp = await startFakeMcpServer((options.names ?? NAMES).map(readOnly));
  t.teardown(() => mcp.close());
  const url = `${mcp.url}${options.path ?? (options.transport === 'sse' ? '/sse' : '/mcp')}`;
  const created = await call('POST', '/mcp/upstreams', { name: 'Tracker', slug, url, newTools: 'enabled', projectId, ...(options.transport ? { transport: 'sse' } : {}) });
  if (created.status !== 201 || created.json.health.status !== 'ok') throw new Error(created.raw);
  const listed = (await call('GET', `/mcp/tools?upstreamId=${created.json.id}&limit=200`)).json.data as Json[];
  return { id: created.json.id, slug, mcp, tools: Object.fromEntries(listed.map((each) => [each.name, each.id as string])) };
}

async function project(t: TapLike, keyBody: Record<string, unknown> = {}) {
  const projectId = (await call('POST', '/projects', { name: `p-${randomUUID().slice(0, 8)}` })).json.id as string;
  const key = await createKey(app, { name: 'agent', projectId, ...keyBody });
  const up = await upstream(t, projectId);
  return { projectId, key, up };
}

/** A group of these tools granted to the key. */
async function grant(projectId: string, keyId: string, toolIds: string[]) {
  const groupId = (await call('POST', '/mcp/groups', { name: `g-${randomUUID().slice(0, 6)}`, projectId })).json.id as string;
  await call('PUT', `/mcp/groups/${groupId}/tools`, { toolIds });
  const granted = await call('POST', '/mcp/grants', { groupId, keyId });
  if (granted.status !== 201) throw new Error(granted.raw);
  return groupId;
}

const agent = (t: TapLike, token: string) => mcpClient(t, base, token, '/mcp/gateway');
const names = async (client: Client) => (await client.listTools()).tools.map((each) => each.name);
const text = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;

async function refusal(client: Client, name: string): Promise<McpError> {
  try {
    await client.callTool({ name, arguments: {} });
  } catch (error) {
    if (error instanceof McpError) return error;
    throw error;
  }
  throw new Error(`${name} was called`);
}

async function rows(projectId: string) {
  return (await call('GET', `/usage/tools/calls?projectId=${projectId}`)).json.data as Json[];
}

t.test('an agent sees exactly the union of its granted, switched-on tools, in name order', async (t) => {
  const p = await project(t);
  const other = await createKey(app, { name: 'other agent', projectId: p.projectId });
  const second = await upstream(t, p.projectId, { names: ['alpha', 'beta'] });
  await grant(p.projectId, p.key.id, [p.up.tools.echo!, second.tools.beta!]);
  await grant(p.projectId, p.key.id, [p.up.tools.echo!, p.up.tools.fail!]);
  await grant(p.projectId, other.id, [second.tools.alpha!]);
  const listed = (await (await agent(t, p.key.key)).listTools()).tools;
  t.same(
    listed.map((each) => each.name),
    [`${p.up.slug}__echo`, `${p.up.slug}__fail`, `${second.slug}__beta`].sort(),
  );
  t.match(
    listed.find((each) => each.name === `${p.up.slug}__echo`),
    { description: 'The echo tool', inputSchema: { type: 'object' }, annotations: { readOnlyHint: true } },
  );
  t.same(await names(await agent(t, other.key)), [`${second.slug}__alpha`]);
});

t.test("a switched-off, ungranted, other project's or made-up tool is refused alike, even by its exact name", async (t) => {
  const p = await project(t);
  const q = await project(t);
  await grant(p.projectId, p.key.id, [p.up.tools.echo!, p.up.tools.fail!]);
  await grant(q.projectId, q.key.id, [q.up.tools.echo!]);
  await call('PATCH', `/mcp/tools/${p.up.tools.fail}`, { enabled: false });
  const client = await agent(t, p.key.key);
  for (const name of [`${p.up.slug}__fail`, `${p.up.slug}__slow`, `${q.up.slug}__echo`, 'nobody__nothing']) {
    const error = await refusal(client, name);
    t.equal(error.code, ErrorCode.InvalidParams, name);
    t.ok(error.message.endsWith(`: Unknown tool: ${name}`), error.message);
  }
  t.same(p.up.mcp.calls, [], 'the server was never called');
  t.same(await rows(p.projectId), [], 'a refused name leaves no row');
});

t.test("the upstream's result comes back verbatim: content, structuredContent, isError and _meta", async (t) => {
  const p = await project(t);
  await grant(p.projectId, p.key.id, [p.up.tools.echo!, p.up.tools.fail!]);
  const client = await agent(t, p.key.key);
  const echoed = await client.callTool({ name: `${p.up.slug}__echo`, arguments: { q: 'open bugs', n: 3 } });
  t.same(echoed, { content: [{ type: 'text', text: '{"q":"open bugs","n":3}' }], structuredContent: { echoed: { q: 'open bugs', n: 3 } } });
  t.same(p.up.mcp.calls, [{ name: 'echo', arguments: { q: 'open bugs', n: 3 } }], 'called by its name at the server');
  const failed = await client.callTool({ name: `${p.up.slug}__fail`, arguments: {} });
  t.same(failed, { isError: true, content: [{ type: 'text', text: 'the tracker refused: no such issue' }], _meta: { 'tracker/trace': 'f1' } });
  t.same(
    (await rows(p.projectId)).map((row) => row.status),
    ['tool_error', 'ok'],
  );
});

t.test('an upstream on the legacy SSE transport is called too', async (t) => {
  const p = await project(t);
  const sse = await upstream(t, p.projectId, { transport: 'sse', names: ['echo'] });
  await grant(p.projectId, p.key.id, [sse.tools.echo!]);
  const result = await (await agent(t, p.key.key)).callTool({ name: `${sse.slug}__echo`, arguments: { over: 'sse' } });
  t.same(result.structuredContent, { echoed: { over: 'sse' } });
});

t.test('calls to one upstream share one MCP session: one handshake for several calls, concurrent ones included', async (t) => {
  const p = await project(t);
  const stateful = await upstream(t, p.projectId, { path: '/stateful', names: ['echo'] });
  await grant(p.projectId, p.key.id, [stateful.tools.echo!]);
  const client = await agent(t, p.key.key);
  const started = stateful.mcp.sessionsStarted;
  for (const n of [1, 2, 3]) t.same((await client.callTool({ name: `${stateful.slug}__echo`, arguments: { n } })).structuredContent, { echoed: { n } });
  const together = await Promise.all([4, 5, 6].map((n) => client.callTool({ name: `${stateful.slug}__echo`, arguments: { n } })));
  t.same(
    together.map((result) => result.structuredContent),
    [4, 5, 6].map((n) => ({ echoed: { n } })),
  );
  t.equal(stateful.mcp.sessionsStarted - started, 1, 'six calls, one initialize');
});

t.test('a session the upstream forgot (404) is replaced and the call runs exactly once', async (t) => {
  const p = await project(t);
  const stateful = await upstream(t, p.projectId, { path: '/stateful', names: ['echo'] });
  await grant(p.projectId, p.key.id, [stateful.tools.echo!]);
  const client = await agent(t, p.key.key);
  await client.callTool({ name: `${stateful.slug}__echo`, arguments: { first: true } });
  const started = stateful.mcp.sessionsStarted;
  stateful.mcp.forgetSessions();
  const result = await client.callTool({ name: `${stateful.slug}__echo`, arguments: { after: 'restart' } });
  t.same(result.structuredContent, { echoed: { after: 'restart' } });
  t.equal(stateful.mcp.sessionsStarted - started, 1, 'a new session');
  t.same(
    stateful.mcp.calls.map((each) => each.arguments),
    [{ first: true }, { after: 'restart' }],
    'the server ran each call once',
  );
  t.match(await rows(p.projectId), [{ status: 'ok' }, { status: 'ok' }]);
});

t.test("a changed upstream secret opens a new session carrying the new header; the agent's call is unaffected", async (t) => {
  const p = await project(t);
  const mcp = await startFakeMcpServer([readOnly('echo')]);
  t.teardown(() => mcp.close());
  const slug = `s${randomUUID().slice(0, 8)}`;
  const auth = (value: string) => ({ type: 'header', name: 'x-tracker-key', value });
  const created = await call('POST', '/mcp/upstreams', { name: 'Rotated', slug, url: `${mcp.url}/stateful`, newTools: 'enabled', projectId: p.projectId, auth: auth('old-secret') });
  t.equal(created.json.health?.status, 'ok', created.raw);
  const toolId = (await call('GET', `/mcp/tools?upstreamId=${created.json.id}`)).json.data[0].id;
  await grant(p.projectId, p.key.id, [toolId]);
  const client = await agent(t, p.key.key);
  await client.callTool({ name: `${slug}__echo`, arguments: {} });
  t.equal((await call('PATCH', `/mcp/upstreams/${created.json.id}`, { auth: auth('new-secret') })).status, 200);
  const before = mcp.headers.length;
  const started = mcp.sessionsStarted;
  t.same((await client.callTool({ name: `${slug}__echo`, arguments: { rotated: true } })).structuredContent, { echoed: { rotated: true } });
  t.equal(mcp.sessionsStarted - started, 1, 'a session of its own for the new secret');
  t.ok(
    mcp.headers.slice(before).every((headers) => headers['x-tracker-key'] === 'new-secret'),
    'only the new secret was sent',
  );
});

t.test("the upstream gets its own header, never the agent's key", async (t) => {
  const p = await project(t);
  const mcp = await startFakeMcpServer([readOnly('echo')]);
  t.teardown(() => mcp.close());
  const slug = `h${randomUUID().slice(0, 8)}`;
  const created = await call('POST', '/mcp/upstreams', {
    name: 'Secured',
    slug,
    url: `${mcp.url}/mcp`,
    newTools: 'enabled',
    projectId: p.projectId,
    auth: { type: 'header', name: 'x-tracker-key', value: 'tracker-secret' },
  });
  t.equal(created.json.health?.status, 'ok', created.raw);
  const toolId = (await call('GET', `/mcp/tools?upstreamId=${created.json.id}`)).json.data[0].id;
  await grant(p.projectId, p.key.id, [toolId]);
  const before = mcp.headers.length;
  await (await agent(t, p.key.key)).callTool({ name: `${slug}__echo`, arguments: {} });
  const sent = mcp.headers.slice(before);
  t.ok(sent.length > 0);
  t.ok(sent.every((headers) => headers['x-tracker-key'] === 'tracker-secret' && headers.authorization === undefined));
});

t.test('an upstream that dies mid-call answers an isError naming it; the other upstream keeps working', async (t) => {
  const p = await project(t);
  const healthy = await upstream(t, p.projectId, { names: ['echo'] });
  await grant(p.projectId, p.key.id, [p.up.tools.die!, healthy.tools.echo!]);
  const client = await agent(t, p.key.key);
  const died = await client.callTool({ name: `${p.up.slug}__die`, arguments: {} });
  t.equal(died.isError, true);
  t.match(text(died), new RegExp(`^The tool server "${p.up.slug}" failed: `));
  t.notMatch(text(died), /127\.0\.0\.1|\/mcp/, 'neither its address nor its path');
  t.same((await client.callTool({ name: `${healthy.slug}__echo`, arguments: { still: 'here' } })).structuredContent, { echoed: { still: 'here' } });
  t.match(await rows(p.projectId), [{ status: 'ok' }, { status: 'upstream_error', errorKind: String }]);
});

t.test("the upstream's progress reaches the agent with the agent's token", async (t) => {
  const p = await project(t);
  await grant(p.projectId, p.key.id, [p.up.tools.slow!]);
  const client = await agent(t, p.key.key);
  const seen: Progress[] = [];
  const waiting = p.up.mcp.slowWaiting();
  const result = client.callTool({ name: `${p.up.slug}__slow`, arguments: {} }, undefined, { onprogress: (progress) => void seen.push(progress) });
  await waiting;
  await eventually(() => seen.length === 3, 'three progress notifications');
  p.up.mcp.release();
  t.same(text(await result), 'slow done');
  t.same(
    seen,
    [1, 2, 3].map((progress) => ({ progress, total: 4, message: `step ${progress}` })),
  );
});

t.test('an agent cancelling a call aborts the upstream request', async (t) => {
  const p = await project(t);
  await grant(p.projectId, p.key.id, [p.up.tools.slow!]);
  const client = await agent(t, p.key.key);
  const controller = new AbortController();
  const waiting = p.up.mcp.slowWaiting();
  const result = client.callTool({ name: `${p.up.slug}__slow`, arguments: {} }, undefined, { signal: controller.signal });
  await waiting;
  controller.abort('no longer needed');
  await t.rejects(result);
  await eventually(() => p.up.mcp.aborted.includes('slow'), 'the upstream saw its request aborted');
  t.match(await eventually(async () => (await rows(p.projectId))[0], 'the row'), { status: 'cancelled' });
});

t.test('an agent going away aborts the upstream request', async (t) => {
  const p = await project(t);
  await grant(p.projectId, p.key.id, [p.up.tools.slow!]);
  const client = new Client({ name: 'leaving', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp/gateway`), { requestInit: { headers: { authorization: `Bearer ${p.key.key}` } } }));
  const waiting = p.up.mcp.slowWaiting();
  const result = client.callTool({ name: `${p.up.slug}__slow`, arguments: {} }).catch(() => 'closed');
  await waiting;
  await client.close();
  await result;
  await eventually(() => p.up.mcp.aborted.includes('slow'), 'the upstream saw its request aborted');
});

t.test("each call is charged to the key's rate limit: the third of a 2-per-minute key is refused", async (t) => {
  const p = await project(t, { rateLimits: { requestsPerMinute: 2 } });
  await grant(p.projectId, p.key.id, [p.up.tools.echo!]);
  const client = await agent(t, p.key.key);
  const name = `${p.up.slug}__echo`;
  t.notOk((await client.callTool({ name, arguments: {} })).isError);
  t.notOk((await client.callTool({ name, arguments: {} })).isError);
  const third = await client.callTool({ name, arguments: {} });
  t.equal(third.isError, true);
  t.match(text(third), /^Rate limit reached: .+ Retry in \d+ seconds\.$/);
  t.equal(p.up.mcp.calls.length, 2, 'the refused call never reached the server');
  t.equal((await rows(p.projectId))[0]!.status, 'rate_limited');
});

t.test('a call needing approval that nobody decides in time is not run: isError naming the approval, with progress meanwhile', async (t) => {
  const p = await project(t);
  const destructive = await upstream(t, p.projectId, { names: ['echo'] });
  await call('PATCH', `/mcp/tools/${destructive.tools.echo}`, { approval: 'always' });
  await grant(p.projectId, p.key.id, [destructive.tools.echo!]);
  const progress: Progress[] = [];
  const result = await (await agent(t, p.key.key)).callTool({ name: `${destructive.slug}__echo`, arguments: {} }, undefined, {
    onprogress: (update) => void progress.push(update),
  });
  t.equal(result.isError, true);
  const approvalId = /Approval ([0-9a-f-]{36}) is pending until /.exec(text(result))?.[1];
  t.ok(approvalId, text(result));
  t.ok(progress.length > 0, 'the agent heard that its call waits');
  t.same(destructive.mcp.calls, []);
  t.match(await rows(p.projectId), [{ status: 'approval_pending', approvalId }]);
  t.match((await call('GET', `/mcp/approvals/waiting?projectId=${p.projectId}`)).json.data, [{ id: approvalId }]);
});

t.test('every call is a row with the SHA-256 of its canonical arguments, never the arguments', async (t) => {
  const p = await project(t);
  const groupId = await grant(p.projectId, p.key.id, [p.up.tools.echo!]);
  await (await agent(t, p.key.key)).callTool({ name: `${p.up.slug}__echo`, arguments: { secret: 'hunter2', a: [1, { z: 1, b: 2 }] } });
  const listed = await call('GET', `/usage/tools/calls?projectId=${p.projectId}`);
  t.notMatch(listed.raw, /hunter2/);
  const canonical = '{"a":[1,{"b":2,"z":1}],"secret":"hunter2"}';
  t.match(listed.json.data, [
    {
      object: 'mcp_tool_call',
      projectId: p.projectId,
      keyId: p.key.id,
      groupId,
      upstreamId: p.up.id,
      upstreamSlug: p.up.slug,
      toolId: p.up.tools.echo,
      toolName: 'echo',
      gatewayName: `${p.up.slug}__echo`,
      status: 'ok',
      errorKind: null,
      approvalId: null,
      argumentsSha256: createHash('sha256').update(canonical).digest('hex'),
      requestBytes: Buffer.byteLength(JSON.stringify({ secret: 'hunter2', a: [1, { z: 1, b: 2 }] })),
    },
  ]);
  t.ok(listed.json.data[0].responseBytes > 0);
  const stored = await app.app.svc.container
    .resolve((await import('../../../core/kernel/di-tokens.ts')).Tokens.Database)
    .query('SELECT * FROM mcp_tool_calls WHERE project_id = $1', [p.projectId]);
  t.notMatch(JSON.stringify(stored.rows), /hunter2/, 'nor in any column');
});

t.test('usage totals per tool, upstream, key and day, and the calls list filtered and paged', async (t) => {
  const p = await project(t);
  await grant(p.projectId, p.key.id, [p.up.tools.echo!, p.up.tools.fail!]);
  const client = await agent(t, p.key.key);
  for (const name of ['echo', 'echo', 'fail']) await client.callTool({ name: `${p.up.slug}__${name}`, arguments: {} });
  const usage = (await call('GET', `/usage/tools?projectId=${p.projectId}`)).json;
  t.match(usage, { object: 'tool_usage', totals: { calls: 3, errors: 1 } });
  t.match(usage.byTool, [
    { toolId: p.up.tools.echo, gatewayName: `${p.up.slug}__echo`, calls: 2, errors: 0 },
    { toolId: p.up.tools.fail, calls: 1, errors: 1 },
  ]);
  t.match(usage.byUpstream, [{ upstreamId: p.up.id, upstreamSlug: p.up.slug, calls: 3 }]);
  t.match(usage.byKey, [{ keyId: p.key.id, calls: 3 }]);
  t.match(usage.byDay, [{ day: new Date().toISOString().slice(0, 10), calls: 3 }]);
  t.equal(typeof usage.totals.durationP50Ms, 'number');
  const first = (await call('GET', `/usage/tools/calls?projectId=${p.projectId}&limit=2`)).json;
  t.equal(first.data.length, 2);
  const second = (await call('GET', `/usage/tools/calls?projectId=${p.projectId}&limit=2&cursor=${first.nextCursor}`)).json;
  t.same(second.data.length, 1);
  t.equal(second.nextCursor, null);
  t.same(
    (await call('GET', `/usage/tools/calls?projectId=${p.projectId}&status=tool_error`)).json.data.map((row: Json) => row.toolId),
    [p.up.tools.fail],
  );
  const otherKey = await createKey(app, { name: 'reader', projectId: (await call('POST', '/projects', { name: 'elsewhere' })).json.id, scopes: ['usage:read'] });
  t.same((await call('GET', '/usage/tools/calls', undefined, otherKey.key)).json.data, [], "another project's key sees none of them");
  const metrics = await app.call('GET', '/metrics', { token: null });
  t.match(metrics.body, /svc_tool_gateway_calls_total\{status="ok"\} [1-9]/);
});

t.test("the overview counts each project's upstreams, tools, groups, grants and calls", async (t) => {
  const p = await project(t);
  await grant(p.projectId, p.key.id, [p.up.tools.echo!]);
  await (await agent(t, p.key.key)).callTool({ name: `${p.up.slug}__echo`, arguments: {} });
  const overview = await call('GET', `/mcp/overview?projectId=${p.projectId}`);
  t.equal(overview.status, 200, overview.raw);
  t.same(overview.json.data, [
    {
      object: 'mcp_overview',
      projectId: p.projectId,
      projectName: overview.json.data[0].projectName,
      mode: 'governed',
      upstreams: { total: 1, ok: 1, error: 0, unknown: 0 },
      tools: { total: 4, enabled: 4 },
      groups: 1,
      grants: 1,
      pendingApprovals: 0,
      calls: { today: 1, todayErrors: 0, last24h: 1, last24hErrors: 0 },
    },
  ]);
});

t.test('in a full project every key sees every switched-on tool and calls it without a grant; off shows none', async (t) => {
  const p = await project(t);
  await call('PATCH', `/mcp/tools/${p.up.tools.die}`, { enabled: false });
  t.equal((await call('PUT', `/mcp/projects/${p.projectId}/switch`, { mode: 'full' })).status, 200);
  const client = await agent(t, p.key.key);
  t.same(
    await names(client),
    ['echo', 'fail', 'slow'].map((name) => `${p.up.slug}__${name}`),
  );
  t.notOk((await client.callTool({ name: `${p.up.slug}__echo`, arguments: {} })).isError);
  t.match(await rows(p.projectId), [{ status: 'ok', groupId: null }]);
  t.equal((await call('PUT', `/mcp/projects/${p.projectId}/switch`, { mode: 'off' })).status, 200);
  t.same(await names(client), []);
  t.equal((await refusal(client, `${p.up.slug}__echo`)).code, ErrorCode.InvalidParams);
});

t.test("/mcp/gateway takes API keys only and needs no management scope: a person's session is refused", async (t) => {
  const p = await project(t, { scopes: ['inference'] });
  await grant(p.projectId, p.key.id, [p.up.tools.echo!]);
  t.notOk((await (await agent(t, p.key.key)).callTool({ name: `${p.up.slug}__echo`, arguments: {} })).isError, 'a key without mcp:read');
  const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
  const headers = { accept: 'application/json, text/event-stream', 'content-type': 'application/json' };
  const session = await app.call('POST', '/mcp/gateway', { body: initialize, headers });
  t.equal(session.statusCode, 401);
  t.equal(session.json().error.code, 'invalid_api_key');
  t.equal(session.headers['www-authenticate'], 'Bearer');
  for (const method of ['GET', 'DELETE']) t.equal((await app.call(method, '/mcp/gateway', { token: p.key.key })).statusCode, 405, method);
});

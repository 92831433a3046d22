import { randomUUID } from 'node:crypto';
import type { CallToolResult, Progress } from '@modelcontextprotocol/sdk/types.js';
import t from 'tap';
import { allPlugins, buildTestApp, createKey, type TapLike, type TestApp } from '../../helpers/app.ts';
import { listeningBase, mcpClient } from '../../helpers/mcp-client.ts';

t.setTimeout(120_000);

// Private networks stay refused (the default): the demo tools are reached in process, never by URL.
const app = await buildTestApp(t, {
  plugins: { ...allPlugins(), 'tool-gateway': { demoUpstream: true, approvalWaitMs: 60_000, approvalProgressMs: 100 } },
});
const base = await listeningBase(app);

type Json = Record<string, any>;

async function call(test: TestApp, method: string, url: string, body?: unknown) {
  const response = await test.call(method, `/client${url}`, body === undefined ? {} : { body });
  return { status: response.statusCode, json: response.json() as Json, raw: response.body };
}

const DEMO_TOOLS = ['add', 'count_slowly', 'current_time', 'echo', 'notes_create', 'notes_delete', 'notes_list'];

/** A fresh project with the demo upstream (its tools switched on) and an agent's key granted all of them. */
async function demoProject(t: TapLike) {
  const slug = `demo-${randomUUID().slice(0, 8)}`;
  const projectId = (await call(app, 'POST', '/projects', { name: `p-${slug}` })).json.id as string;
  const created = await call(app, 'POST', '/mcp/upstreams', { name: 'Demo tools', slug, transport: 'demo', newTools: 'enabled', projectId });
  if (created.status !== 201) throw new Error(created.raw);
  const tools = (await call(app, 'GET', `/mcp/tools?upstreamId=${created.json.id}&limit=200`)).json.data as Json[];
  const key = await createKey(app, { name: 'agent', projectId });
  const groupId = (await call(app, 'POST', '/mcp/groups', { name: 'demo', projectId })).json.id as string;
  await call(app, 'PUT', `/mcp/groups/${groupId}/tools`, { toolIds: tools.map((each) => each.id) });
  const granted = await call(app, 'POST', '/mcp/grants', { groupId, keyId: key.id });
  if (granted.status !== 201) throw new Error(granted.raw);
  return { upstream: created.json, tools, slug, agent: await mcpClient(t, base, key.key, '/mcp/gateway') };
}

const text = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;

t.test('registering a demo upstream needs no URL and discovers its 7 tools in process', async (t) => {
  const { upstream, tools } = await demoProject(t);
  t.match(upstream, { transport: 'demo', url: 'demo:', auth: { type: 'none' } });
  t.match(upstream.health, { status: 'ok', toolCount: 7, serverInfo: { name: 'svc-demo-tools' } });
  t.same(tools.map((each) => each.name).sort(), DEMO_TOOLS);
});

t.test('a demo upstream refuses a URL or a credential, naming the field', async (t) => {
  const withUrl = await call(app, 'POST', '/mcp/upstreams', { name: 'Demo', transport: 'demo', url: 'https://example.com/mcp' });
  t.match(withUrl, { status: 400, json: { error: { code: 'upstream_transport_invalid', param: 'url' } } });
  const withAuth = await call(app, 'POST', '/mcp/upstreams', { name: 'Demo', transport: 'demo', auth: { type: 'header', name: 'X-Api-Key', value: 'k' } });
  t.match(withAuth, { status: 400, json: { error: { code: 'upstream_transport_invalid', param: 'auth' } } });
  const noUrl = await call(app, 'POST', '/mcp/upstreams', { name: 'Remote' });
  t.match(noUrl, { status: 400, json: { error: { code: 'upstream_url_invalid', param: 'url' } } });
});

t.test('an agent calls the demo add tool through /mcp/gateway and gets its structured content', async (t) => {
  const { slug, agent } = await demoProject(t);
  const result = await agent.callTool({ name: `${slug}__add`, arguments: { a: 2, b: 40 } });
  t.notOk(result.isError);
  t.same(result.structuredContent, { sum: 42 });
  t.equal(text(result), '42');
});

t.test('a demo upstream keeps its own notes across calls; another demo upstream never sees them', async (t) => {
  const a = await demoProject(t);
  const b = await demoProject(t);
  t.notOk((await a.agent.callTool({ name: `${a.slug}__notes_create`, arguments: { title: 'only for A' } })).isError);
  const ofA = await a.agent.callTool({ name: `${a.slug}__notes_list`, arguments: {} });
  t.match(ofA.structuredContent, { notes: [{ title: 'only for A' }] }, 'a later call (a new connection) sees the note');
  const ofB = await b.agent.callTool({ name: `${b.slug}__notes_list`, arguments: {} });
  t.same(ofB.structuredContent, { notes: [] });
});

t.test("the demo count_slowly tool's progress reaches the agent", async (t) => {
  const { slug, agent } = await demoProject(t);
  const seen: Progress[] = [];
  const result = await agent.callTool({ name: `${slug}__count_slowly`, arguments: { to: 3, delayMs: 0 } }, undefined, {
    onprogress: (progress) => void seen.push(progress),
  });
  t.equal(text(result), 'counted to 3');
  t.same(
    seen.map((each) => [each.progress, each.total]),
    [
      [1, 3],
      [2, 3],
      [3, 3],
    ],
  );
});

t.test('the destructive notes_delete waits for a person in a governed project, then runs', async (t) => {
  const { slug, agent } = await demoProject(t);
  const note = await agent.callTool({ name: `${slug}__notes_create`, arguments: { title: 'to go' } });
  t.notOk(note.isError, 'a write that destroys nothing asks nobody');
  const noteId = (note.structuredContent as { id: string }).id;
  let approved: Promise<{ status: number }> | null = null;
  const result = await agent.callTool({ name: `${slug}__notes_delete`, arguments: { id: noteId } }, undefined, {
    onprogress: (progress) => {
      // The first "waiting" progress names the approval: a person decides it while the call waits.
      const approvalId = /approval ([0-9a-f-]{36})/.exec(progress.message ?? '')?.[1];
      if (approvalId && !approved) approved = call(app, 'POST', `/mcp/approvals/${approvalId}/approve`, {});
    },
  });
  t.ok(approved, 'the agent was told its call waits for an approval');
  t.equal((await approved!)?.status, 200);
  t.notOk(result.isError, text(result));
  t.equal(text(result), `note ${noteId} deleted`);
  const listed = await agent.callTool({ name: `${slug}__notes_list`, arguments: {} });
  t.notOk((listed.structuredContent as { notes: Json[] }).notes.some((each) => each.id === noteId));
});

t.test('with demoUpstream off (the default) the demo transport is refused, naming transport', async (t) => {
  const plain = await buildTestApp(t);
  const refused = await call(plain, 'POST', '/mcp/upstreams', { name: 'Demo tools', transport: 'demo' });
  t.match(refused, { status: 400, json: { error: { code: 'upstream_transport_invalid', param: 'transport' } } });
  const tried = await call(plain, 'POST', '/mcp/upstreams/test', { name: 'Demo tools', transport: 'demo' });
  t.match(tried, { status: 400, json: { error: { code: 'upstream_transport_invalid', param: 'transport' } } });
});

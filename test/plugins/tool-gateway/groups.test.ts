import { randomUUID } from 'node:crypto';
import t from 'tap';
import { buildTestApp, createKey, type TapLike } from '../../helpers/app.ts';
import { startFakeMcpServer, tool } from './fake-mcp-server.ts';

t.setTimeout(120_000);

const app = await buildTestApp(t, { config: { outbound: { allowPrivateNetwork: true } } });

type Json = Record<string, any>;

async function call(method: string, url: string, body?: unknown, token?: string) {
  const response = await app.call(method as 'GET', `/client${url}`, { ...(body !== undefined ? { body } : {}), token });
  return { status: response.statusCode, json: response.json() as Json, raw: response.body };
}

/** A fresh project with a key and an upstream (tools arriving switched on) listing `names`; answers their ids by name. */
async function project(t: TapLike, names = ['search', 'create_issue', 'close_issue'], slug = `s${randomUUID().slice(0, 8)}`) {
  const projectId = (await call('POST', '/projects', { name: `p-${slug}` })).json.id as string;
  const key = await createKey(app, { name: 'agent', projectId, scopes: ['mcp:read', 'mcp:write'] });
  const mcp = await startFakeMcpServer(names.map((name) => tool(name)));
  t.teardown(() => mcp.close());
  const upstream = await call('POST', '/mcp/upstreams', { name: 'Tracker', slug, url: `${mcp.url}/mcp`, newTools: 'enabled', projectId });
  if (upstream.status !== 201) throw new Error(upstream.raw);
  const listed = (await call('GET', `/mcp/tools?upstreamId=${upstream.json.id}&limit=200`)).json.data as Json[];
  const tools = Object.fromEntries(listed.map((each) => [each.name, each.id as string]));
  return { projectId, key, mcp, slug, upstreamId: upstream.json.id as string, tools };
}

async function group(projectId: string, toolIds: string[] = [], name = 'bundle') {
  const created = await call('POST', '/mcp/groups', { name, projectId });
  if (toolIds.length > 0) await call('PUT', `/mcp/groups/${created.json.id}/tools`, { toolIds });
  return created.json.id as string;
}

t.test('a group is created empty, renamed, listed with its tools and deleted', async (t) => {
  const p = await project(t);
  const created = await call('POST', '/mcp/groups', { name: 'Support', description: 'For the desk', projectId: p.projectId });
  t.equal(created.status, 201, created.raw);
  t.match(created.json, { object: 'mcp_group', name: 'Support', description: 'For the desk', projectId: p.projectId, toolIds: [] });
  const id = created.json.id;
  t.match((await call('PATCH', `/mcp/groups/${id}`, { name: 'Desk', description: null })).json, { name: 'Desk', description: null });
  await call('PUT', `/mcp/groups/${id}/tools`, { toolIds: [p.tools.search] });
  const listed = (await call('GET', `/mcp/groups?projectId=${p.projectId}`)).json.data as Json[];
  t.same(
    listed.map((each) => [each.id, each.toolIds]),
    [[id, [p.tools.search]]],
  );
  t.match((await call('DELETE', `/mcp/groups/${id}`)).json, { object: 'ack', ok: true, id });
  t.equal((await call('PATCH', `/mcp/groups/${id}`, { name: 'gone' })).json.error.code, 'mcp_group_not_found');
});

t.test("replacing a group's tools answers the group with its tools ordered by gateway name", async (t) => {
  const p = await project(t);
  const id = await group(p.projectId);
  const replaced = await call('PUT', `/mcp/groups/${id}/tools`, { toolIds: [p.tools.search, p.tools.close_issue, p.tools.search] });
  t.equal(replaced.status, 200, replaced.raw);
  t.same(
    replaced.json.tools.map((each: Json) => each.gatewayName),
    [`${p.slug}__close_issue`, `${p.slug}__search`],
  );
  t.same(replaced.json.toolIds, [p.tools.search, p.tools.close_issue].sort());
  t.same((await call('PUT', `/mcp/groups/${id}/tools`, { toolIds: [] })).json.toolIds, [], 'an empty list empties it');
});

t.test("a tool of another project is refused naming its index, and the group's tools stay as they were", async (t) => {
  const a = await project(t);
  const b = await project(t);
  const id = await group(a.projectId, [a.tools.search]);
  const refused = await call('PUT', `/mcp/groups/${id}/tools`, { toolIds: [a.tools.close_issue, b.tools.search] });
  t.equal(refused.status, 400);
  t.match(refused.json.error, { code: 'invalid_parameter', param: 'toolIds.1' });
  t.same((await call('GET', `/mcp/groups?projectId=${a.projectId}`)).json.data[0].toolIds, [a.tools.search]);
});

t.test('a refresh that no longer lists a tool removes it from every group', async (t) => {
  const p = await project(t);
  const id = await group(p.projectId, [p.tools.search, p.tools.close_issue]);
  p.mcp.tools = [tool('search'), tool('create_issue')];
  t.match((await call('POST', `/mcp/upstreams/${p.upstreamId}/refresh`)).json, { ok: true, removed: ['close_issue'] });
  t.same((await call('GET', `/mcp/groups?projectId=${p.projectId}`)).json.data.find((each: Json) => each.id === id).toolIds, [p.tools.search]);
});

t.test('a grant gives a group to a key of its project, is listed, changed and withdrawn', async (t) => {
  const p = await project(t);
  const groupId = await group(p.projectId, [p.tools.search]);
  const created = await call('POST', '/mcp/grants', { groupId, keyId: p.key.id, note: 'triage' });
  t.equal(created.status, 201, created.raw);
  t.match(created.json, { object: 'mcp_grant', groupId, keyId: p.key.id, projectId: p.projectId, note: 'triage', expiresAt: null, expired: false });
  const id = created.json.id;
  t.same(
    (await call('GET', `/mcp/grants?keyId=${p.key.id}`)).json.data.map((each: Json) => each.id),
    [id],
  );
  const expiry = '2020-01-01T00:00:00.000Z';
  t.match((await call('PATCH', `/mcp/grants/${id}`, { expiresAt: expiry, note: null })).json, { expiresAt: expiry, expired: true, note: null });
  t.match((await call('DELETE', `/mcp/grants/${id}`)).json, { ok: true, id });
  t.same((await call('GET', `/mcp/grants?keyId=${p.key.id}`)).json.data, []);
});

t.test('granting a group a key holds already is 409 grant_exists', async (t) => {
  const p = await project(t);
  const groupId = await group(p.projectId);
  t.equal((await call('POST', '/mcp/grants', { groupId, keyId: p.key.id })).status, 201);
  const again = await call('POST', '/mcp/grants', { groupId, keyId: p.key.id });
  t.equal(again.status, 409);
  t.equal(again.json.error.code, 'grant_exists');
});

t.test('a group is granted only to keys of its project, and a key cannot grant to itself', async (t) => {
  const a = await project(t);
  const b = await project(t);
  const groupId = await group(a.projectId);
  const other = await call('POST', '/mcp/grants', { groupId, keyId: b.key.id });
  t.equal(other.status, 400);
  t.match(other.json.error, { code: 'grant_other_project', param: 'keyId' });
  const itself = await call('POST', '/mcp/grants', { groupId, keyId: a.key.id }, a.key.key);
  t.equal(itself.status, 403);
  t.match(itself.json.error, { code: 'grant_to_itself', param: 'keyId' });
  const sibling = await createKey(app, { name: 'sibling', projectId: a.projectId });
  t.equal((await call('POST', '/mcp/grants', { groupId, keyId: sibling.id }, a.key.key)).status, 201, 'another key of its project it may');
});

t.test('a revoked key is not given tools: 409 key_revoked, and no grant is made', async (t) => {
  const p = await project(t);
  const groupId = await group(p.projectId);
  t.equal((await call('DELETE', `/keys/${p.key.id}`)).status, 200);
  const refused = await call('POST', '/mcp/grants', { groupId, keyId: p.key.id });
  t.equal(refused.status, 409);
  t.match(refused.json.error, { code: 'key_revoked', param: 'keyId' });
  t.same((await call('GET', `/mcp/grants?keyId=${p.key.id}`)).json.data, []);
});

t.test("another project's key meets groups, grants and keys of this project as absent", async (t) => {
  const a = await project(t);
  const b = await project(t);
  const groupId = await group(a.projectId);
  const grantId = (await call('POST', '/mcp/grants', { groupId, keyId: a.key.id })).json.id;
  const token = b.key.key;
  t.equal((await call('PATCH', `/mcp/groups/${groupId}`, { name: 'x' }, token)).json.error.code, 'mcp_group_not_found');
  t.equal((await call('PUT', `/mcp/groups/${groupId}/tools`, { toolIds: [] }, token)).json.error.code, 'mcp_group_not_found');
  t.equal((await call('DELETE', `/mcp/grants/${grantId}`, undefined, token)).json.error.code, 'mcp_grant_not_found');
  t.equal((await call('GET', `/mcp/keys/${a.key.id}/tools`, undefined, token)).json.error.code, 'key_not_found');
  t.same(
    (await call('GET', '/mcp/groups', undefined, token)).json.data.filter((each: Json) => each.id === groupId),
    [],
  );
  t.same(
    (await call('GET', '/mcp/grants', undefined, token)).json.data.filter((each: Json) => each.id === grantId),
    [],
  );
});

t.test('under governed, a key sees the union of its granted groups, switched-on tools only, ordered by name', async (t) => {
  const p = await project(t);
  const first = await group(p.projectId, [p.tools.search, p.tools.create_issue]);
  const second = await group(p.projectId, [p.tools.search, p.tools.close_issue]);
  await call('POST', '/mcp/grants', { groupId: first, keyId: p.key.id });
  await call('POST', '/mcp/grants', { groupId: second, keyId: p.key.id });
  await call('PATCH', `/mcp/tools/${p.tools.create_issue}`, { enabled: false });
  const seen = await call('GET', `/mcp/keys/${p.key.id}/tools`);
  t.equal(seen.status, 200, seen.raw);
  t.equal(seen.json.mode, 'governed');
  t.same(
    seen.json.data.map((each: Json) => [each.name, each.groupIds]),
    [
      [`${p.slug}__close_issue`, [second]],
      [`${p.slug}__search`, [first, second].sort()],
    ],
  );
});

t.test('an expired grant gives nothing', async (t) => {
  const p = await project(t);
  const groupId = await group(p.projectId, [p.tools.search]);
  await call('POST', '/mcp/grants', { groupId, keyId: p.key.id, expiresAt: '2020-01-01T00:00:00Z' });
  t.same((await call('GET', `/mcp/keys/${p.key.id}/tools`)).json.data, []);
});

t.test('under off a key sees nothing, under full every switched-on tool of the project without a grant', async (t) => {
  const p = await project(t);
  await call('PATCH', `/mcp/tools/${p.tools.close_issue}`, { enabled: false });
  await call('PUT', `/mcp/projects/${p.projectId}/switch`, { mode: 'full' });
  const full = (await call('GET', `/mcp/keys/${p.key.id}/tools`)).json;
  t.equal(full.mode, 'full');
  t.same(
    full.data.map((each: Json) => [each.name, each.groupIds]),
    [
      [`${p.slug}__create_issue`, []],
      [`${p.slug}__search`, []],
    ],
  );
  await call('POST', '/mcp/grants', { groupId: await group(p.projectId, [p.tools.search]), keyId: p.key.id });
  await call('PUT', `/mcp/projects/${p.projectId}/switch`, { mode: 'off' });
  t.match((await call('GET', `/mcp/keys/${p.key.id}/tools`)).json, { mode: 'off', data: [] });
});

t.test('an alias names the tool; an aliased tool keeps a name a server name collides with, the other takes a hash suffix', async (t) => {
  const p = await project(t, ['search', 'lookup']);
  await call('PATCH', `/mcp/tools/${p.tools.lookup}`, { alias: 'find' });
  const groupId = await group(p.projectId, [p.tools.search, p.tools.lookup]);
  await call('POST', '/mcp/grants', { groupId, keyId: p.key.id });
  // The server now lists a tool named as the alias: it is stored, and the gateway settles the clash.
  p.mcp.tools = [tool('search'), tool('lookup'), tool('find')];
  await call('POST', `/mcp/upstreams/${p.upstreamId}/refresh`);
  const find = ((await call('GET', `/mcp/tools?upstreamId=${p.upstreamId}`)).json.data as Json[]).find((each) => each.name === 'find')!;
  await call('PUT', `/mcp/groups/${groupId}/tools`, { toolIds: [p.tools.search, p.tools.lookup, find.id] });
  const names = ((await call('GET', `/mcp/keys/${p.key.id}/tools`)).json.data as Json[]).map((each) => [each.toolName, each.name]);
  const suffixed = names.find(([toolName]) => toolName === 'find')![1] as string;
  t.match(suffixed, new RegExp(`^${p.slug}__find_[0-9a-f]{8}$`));
  t.same(
    names.find(([toolName]) => toolName === 'lookup'),
    ['lookup', `${p.slug}__find`],
  );
  t.same(
    (await call('GET', `/mcp/keys/${p.key.id}/tools`)).json.data.map((each: Json) => each.name),
    names.map(([, name]) => name),
    'the same every time',
  );
});

t.test('bodies are strict: an unknown field is named', async (t) => {
  const p = await project(t);
  const groupId = await group(p.projectId);
  t.equal((await call('POST', '/mcp/groups', { name: 'x', projectId: p.projectId, tools: [] })).json.error.param, 'tools');
  t.equal((await call('PUT', `/mcp/groups/${groupId}/tools`, { toolIds: [], extra: 1 })).json.error.param, 'extra');
  t.equal((await call('POST', '/mcp/grants', { groupId, keyId: p.key.id, scope: 'all' })).json.error.param, 'scope');
  t.equal((await call('PUT', `/mcp/apps/${randomUUID()}/ai-tools`, { groupIds: [], groups: [] })).json.error.param, 'groups');
});

t.test("an app's chosen groups are stored and answered back, duplicates dropped; a group of another project is refused", async (t) => {
  const a = await project(t);
  const b = await project(t);
  const first = await group(a.projectId);
  const second = await group(a.projectId);
  const appId = randomUUID();
  const stored = await call('PUT', `/mcp/apps/${appId}/ai-tools`, { groupIds: [second, first, second] });
  t.equal(stored.status, 200, stored.raw);
  t.match(stored.json, { object: 'mcp_app_ai_tools', appId, groupIds: [second, first] });
  const mixed = await call('PUT', `/mcp/apps/${appId}/ai-tools`, { groupIds: [first, await group(b.projectId)] });
  t.match(mixed.json.error, { code: 'invalid_parameter', param: 'groupIds.1' });
  t.same((await call('PUT', `/mcp/apps/${appId}/ai-tools`, { groupIds: [first] })).json.groupIds, [first], 'replaced whole');
  t.equal((await call('PUT', `/mcp/apps/${appId}/ai-tools`, { groupIds: [first] }, b.key.key)).json.error.param, 'groupIds.0', "out of the caller's reach");
});

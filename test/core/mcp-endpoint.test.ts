import { BatchStore } from '../../plugins/batches/batch-store.ts';
import { createHash, randomUUID } from 'node:crypto';
import { z } from 'zod';
import t from 'tap';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { type AnyOperation, defineOperation, OperationRegistry, toolNameOf } from '../../core/operations/operations.ts';
import { definePlugin } from '../../core/kernel/plugin.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { manifest as defaultManifest } from '../../plugins/index.ts';
import { MeteringTokens } from '../../plugins/metering/index.ts';
import { fillPath, sampleBody, sampleQuery } from '../fixtures/operation-inputs.ts';
import { allPlugins, buildTestApp, createKey } from '../helpers/app.ts';
import { listeningBase, mcpClient, toolError } from '../helpers/mcp-client.ts';
import { git, storedApp, tinyApp } from '../plugins/apps/apps-fixtures.ts';
import { formBody } from '../helpers/multipart.ts';

t.setTimeout(300_000);

/** A plugin that declares operations and nothing else for MCP: they must become tools on their own. */
const notesPlugin = definePlugin({
  name: 'mcp-notes',
  description: 'Test plugin: operations only',
  operations: () => [
    defineOperation({
      name: 'notes.echo',
      method: 'GET',
      path: '/notes/echo',
      summary: 'Echo a word',
      description: 'Answers the word it was given.',
      scope: null,
      readOnly: true,
      query: z.object({ word: z.string().min(1) }),
      output: z.object({ echoed: z.string() }).meta({ id: 'McpTestEcho' }),
      handler: async ({ query }) => ({ echoed: query.word }),
    }),
    defineOperation({
      name: 'notes.secret',
      method: 'GET',
      path: '/notes/secret',
      summary: 'A secret for people only',
      scope: null,
      readOnly: true,
      mcp: false,
      output: z.object({ secret: z.string() }).meta({ id: 'McpTestSecret' }),
      handler: async () => ({ secret: 'for eyes only' }),
    }),
  ],
});

const logLines: string[] = [];
const test = await buildTestApp(t, {
  manifest: [...defaultManifest, notesPlugin],
  config: { metrics: { enabled: true }, server: { logLevel: 'info' } },
  logStream: { write: (line) => void logLines.push(line) },
  plugins: {
    ...allPlugins([...defaultManifest, notesPlugin]),
    inference: {
      providers: { mock: { type: 'mock' } },
      models: { 'mock-small': { routes: [{ provider: 'mock', model: 'mock-small' }], prices: { inputPerMTokUsd: 1, outputPerMTokUsd: 2 } } },
    },
  },
});
const base = await listeningBase(test);
const names = (tools: Tool[]) => tools.map((tool) => tool.name);
/** The read tools any API key of the account sees (scope null; not a person's own, which keys never see). */
const OPEN_READS = [
  'account_onboarding_get',
  'apps_analytics',
  'apps_get',
  'apps_progress',
  'apps_regions',
  'apps_usage',
  'apps_usage_series',
  'apps_preview',
  'apps_referenced_by',
  'apps_storage_list',
  'deployments_logs',
  'githost_app_analysis',
  'githost_app_insight',
  'githost_app_insight_estimate',
  'githost_app_roots',
  'githost_reachable',
  'services_branches',
  'githost_build_check',
  'services_ai_fixes_list',
  'services_build',
  'services_deployments',
  'services_env',
  'services_logs',
  'services_requests',
  'services_egress_alert',
  'services_migrate_get',
  'account_orgMap',
  'account_overview',
  'account_progress_list',
  'account_whoami',
  'githost_branches',
  'githost_repos',
  'githost_status',
  'models_list',
  'notes_echo',
  'operations_get',
  'organizations_list',
  'projects_get',
  'projects_list',
  'projects_members_list',
];
/** The write tools any API key of the account sees with mcp:write (scope null, neither owner-only nor a person's own). */
const OPEN_WRITES = ['account_progress_hide', 'organizations_setDefault'];
/**
 * The tool gateway's own tools, which need mcp:read (reads) or mcp:write (writes) as scopes of their own: a key
 * that may use /mcp at all sees its reads, and with mcp:write its writes (those reserved to people excepted).
 */
const toolGatewayTools = (write: boolean) =>
  test.app.svc.container
    .resolve(Tokens.Operations)
    .list()
    .filter((op) => (op.scope === 'mcp:read' && !write) || (op.scope === 'mcp:write' && write) || (op.scope === 'mcp:read' && write))
    .filter((op) => !op.roles && !op.ownerOnly && !op.personOnly && op.mcp !== false)
    .map((op) => toolNameOf(op.name));
const MCP_READS = toolGatewayTools(false);
const MCP_READS_AND_WRITES = toolGatewayTools(true);

t.test('a key sees exactly the tools its scopes allow, in name order', async (t) => {
  const readsKeys = await createKey(test, { name: 'mcp keys reader', scopes: ['mcp:read', 'keys:read'] });
  const tools = (await (await mcpClient(t, base, readsKeys.key)).listTools()).tools;
  t.same(names(tools), [...OPEN_READS, ...MCP_READS, 'keys_get', 'keys_list'].sort());

  const writesKeys = await createKey(test, { name: 'mcp keys writer', scopes: ['mcp:read', 'mcp:write', 'keys:read', 'keys:write'] });
  const writerTools = (await (await mcpClient(t, base, writesKeys.key)).listTools()).tools;
  t.same(names(writerTools), [...OPEN_READS, ...OPEN_WRITES, ...MCP_READS_AND_WRITES, 'keys_create', 'keys_delete', 'keys_get', 'keys_list', 'keys_recreate', 'keys_update'].sort());

  const usage = await createKey(test, { name: 'mcp usage reader', scopes: ['mcp:read', 'usage:read'] });
  const usageTools = names((await (await mcpClient(t, base, usage.key)).listTools()).tools);
  t.ok(usageTools.includes('usage_get') && usageTools.includes('guardrails_test'), 'usage:read tools are offered');
  t.notOk(
    usageTools.some((name) => name.startsWith('keys_')),
    'no keys tool without keys:read',
  );
});

t.test('a key without mcp:write sees no write tool, even holding the write scope', async (t) => {
  const key = await createKey(test, { name: 'mcp read only', scopes: ['mcp:read', 'keys:read', 'keys:write'] });
  const tools = (await (await mcpClient(t, base, key.key)).listTools()).tools;
  t.same(names(tools), [...OPEN_READS, ...MCP_READS, 'keys_get', 'keys_list'].sort());
  t.ok(tools.every((tool) => tool.annotations?.readOnlyHint === true));
});

t.test('a key without mcp:read cannot use /mcp at all: 403 missing_scope', async (t) => {
  const key = await createKey(test, { name: 'no mcp', scopes: ['keys:read'] });
  const response = await fetch(`${base}/mcp`, { method: 'POST', headers: jsonRpcHeaders(key.key), body: initialize() });
  t.equal(response.status, 403);
  t.equal(((await response.json()) as { error: { code: string } }).error.code, 'missing_scope');
});

t.test('tools carry the description, schemas and annotations the operation declares', async (t) => {
  const tools = (await (await mcpClient(t, base, test.ownerToken)).listTools()).tools;
  const byName = new Map(tools.map((tool) => [tool.name, tool]));
  const echo = byName.get('notes_echo')!;
  t.equal(echo.description, 'Echo a word\n\nAnswers the word it was given.');
  t.match(echo.inputSchema, { type: 'object', properties: { word: { type: 'string', minLength: 1 } }, required: ['word'], additionalProperties: false });
  t.match(echo.outputSchema, { type: 'object', properties: { echoed: { type: 'string' } } });
  t.match(byName.get('keys_list')!.annotations, { readOnlyHint: true, destructiveHint: false, idempotentHint: true });
  t.match(byName.get('keys_create')!.annotations, { readOnlyHint: false, destructiveHint: false, idempotentHint: false });
  t.match(byName.get('keys_delete')!.annotations, { readOnlyHint: false, destructiveHint: true, idempotentHint: true });
  // Path, query and body fields in one object.
  t.match(byName.get('keys_update')!.inputSchema, { properties: { id: {}, name: {}, scopes: {} }, required: ['id'] });
  t.match(byName.get('keys_delete')!.inputSchema, { properties: { id: {}, permanent: {} } });
  t.match(byName.get('guardrails_test')!.annotations, { readOnlyHint: true }, 'a POST that writes nothing is a read tool');
});

t.test("every read tool succeeds for an owner's session", async (t) => {
  const client = await mcpClient(t, base, test.ownerToken);
  const keyId = (await createKey(test, { name: 'read by mcp', scopes: ['inference'] })).id;
  const inference = await createKey(test, { name: 'mcp inference', scopes: ['inference'] });
  const call = await test.call('POST', '/v1/chat/completions', { token: inference.key, body: { model: 'mock-small', messages: [{ role: 'user', content: 'hi' }] } });
  t.equal(call.statusCode, 200);
  await test.app.svc.container.resolve(MeteringTokens.Writer).flush();
  const requestId = String(call.headers['x-request-id']);
  // An account's own long-running operation, as a deletion would leave one (without deleting this account).
  const operationId = randomUUID();
  await test.app.svc.container.resolve(Tokens.Database).query(
    `INSERT INTO long_running_operations (id, organization_id, kind, status, job_id, run_at, created_at, updated_at)
       VALUES ($1, $2, 'tests.work', 'queued', 1, now(), now(), now())`,
    [operationId, test.organizationId],
  );
  const form = await formBody({ subject: 'Read by MCP', message: 'with a file', attachments: { bytes: Buffer.from('notes'), filename: 'notes.txt' } });
  const opened = (await test.call('POST', '/client/support/requests', { body: form.body, headers: { 'content-type': form.contentType } })).json();
  // An .invalid name never resolves: saved, and never called.
  const webhook = await test.call('POST', '/client/webhooks', { body: { url: 'https://hooks.example.invalid/in', eventTypes: ['*'] } });
  const webhookId = (webhook.json() as { id: string }).id;
  const upstream = await test.call('POST', '/client/mcp/upstreams', { body: { name: 'read by MCP', url: 'https://mcp.example.invalid/mcp' } });
  const upstreamId = (upstream.json() as { id: string }).id;
  // An OAuth upstream nobody signed in to (never called), and a sign-in of it the owner started, stored as start stores one.
  const oauthUpstream = await test.call('POST', '/client/mcp/upstreams', { body: { name: 'OAuth read by MCP', url: 'https://mcp.example.invalid/mcp', auth: { type: 'oauth' } } });
  const oauthUpstreamId = (oauthUpstream.json() as { id: string }).id;
  const personId = ((await test.call('GET', '/client/whoami')).json() as { credential: { personId: string } }).credential.personId;
  const signInState = randomUUID();
  await test.app.svc.container.resolve(Tokens.Database).query(
    `INSERT INTO mcp_oauth_flows (id, state_hash, organization_id, upstream_id, started_by, redirect_uri, status, expires_at, created_at)
       VALUES ($1, $2, $3, $4, $5, 'https://gateway.example.com/client/mcp/oauth/callback', 'pending', now() + interval '10 minutes', now())`,
    [randomUUID(), createHash('sha256').update(signInState).digest('hex'), test.organizationId, oauthUpstreamId, `person:${personId}`],
  );
  const repo = await test.call('POST', '/client/githost/repos', { body: { name: 'read-by-mcp' } });
  t.equal(repo.statusCode, 201);
  // The build check reads a pushed branch; the app reads need an app's records.
  const pusher = await createKey(test, { name: 'mcp pusher', scopes: ['apps:deploy', 'apps:read'] });
  const work = await tinyApp(t);
  await git(t, work.dir, ['push', '--quiet', `${base}/git/${test.organizationId}/read-by-mcp.git`, 'main'], pusher.key);
  const app = await storedApp(test, 'read-by-mcp');
  // An ended /v1 batch, stored as the plugin stores one (this app serves no model that takes batches).
  const batchId = randomUUID();
  const batchAt = new Date();
  await new BatchStore(test.app.svc.container.resolve(Tokens.Database)).insert(
    test.app.svc.container.resolve(Tokens.Database),
    {
      id: batchId,
      organizationId: test.organizationId,
      projectId: test.defaultProjectId,
      keyId: randomUUID(),
      endpoint: '/v1/chat/completions',
      inputFileId: randomUUID(),
      completionWindow: '24h',
      metadata: null,
      holdId: null,
      total: 0,
      createdAt: batchAt,
      expiresAt: new Date(batchAt.getTime() + 86_400_000),
    },
    [],
  );
  await test.app.svc.container.resolve(Tokens.Database).query(`UPDATE batches SET status = 'completed', completed_at = now() WHERE id = $1`, [batchId]);
  const ids: Record<string, Record<string, string>> = {
    'keys.get': { id: keyId },
    'requests.get': { id: requestId },
    'operations.get': { id: operationId },
    'support.requests.get': { id: opened.id },
    'support.attachments.get': { id: opened.messages[0].attachments[0].id },
    'webhooks.get': { id: webhookId },
    'webhooks.deliveries.list': { id: webhookId },
    'mcp.upstreams.get': { id: upstreamId },
    'mcp.keys.tools': { id: keyId },
    'mcp.upstreams.oauth.get': { id: oauthUpstreamId },
    'batches.get': { id: batchId },
    'batches.output': { id: batchId },
    'apps.get': { id: app.appId },
    'apps.progress': { id: app.appId },
    'apps.analytics': { id: app.appId },
    'apps.usage': { id: app.appId },
    'apps.usage_series': { id: app.appId },
    'services.requests': { id: app.serviceId },
    'services.deployments': { id: app.serviceId },
    'services.logs': { id: app.serviceId },
    'services.build': { id: app.serviceId },
    'services.env': { id: app.serviceId },
    'deployments.logs': { id: app.deploymentId },
    'apps.preview': { id: app.appId },
    'apps.referenced_by': { id: app.appId },
    'services.branches': { id: app.serviceId },
    'apps.storage.list': { id: app.appId },
    'services.migrate.get': { id: app.serviceId },
    'services.ai_fixes.list': { id: app.serviceId },
    'services.egress_alert': { id: app.serviceId },
  };
  const operations = test.app.svc.container.resolve(Tokens.Operations).list();
  const reads = operations.filter((operation) => operation.readOnly && operation.mcp !== false);
  t.ok(reads.length >= 20, 'the read operations');
  for (const operation of reads) {
    const path = Object.fromEntries(Object.keys(operation.params?.shape ?? {}).map((name) => [name, ids[operation.name]?.[name] ?? test.defaultProjectId]));
    const query = Object.fromEntries(new URLSearchParams(sampleQuery(operation).slice(1)));
    const args = {
      ...path,
      ...query,
      ...(operation.name === 'notes.echo' ? { word: 'hello' } : {}),
      ...(operation.name === 'mcp.oauth.status' ? { state: signInState } : {}),
      ...(['githost.branches', 'githost.build_check', 'githost.app_roots', 'githost.app_analysis', 'githost.app_insight'].includes(operation.name) ? { repo: 'read-by-mcp' } : {}),
      ...sampleBody(operation),
    };
    const result = await client.callTool({ name: operation.name.replaceAll('.', '_'), arguments: args });
    t.notOk(result.isError, `${operation.name} ${fillPath(operation, path)}: ${JSON.stringify(result.content).slice(0, 300)}`);
    t.type(result.structuredContent, 'object', `${operation.name} answers structured content`);
  }
});

t.test("a tool's result is the HTTP answer, as structured content and as text", async (t) => {
  const client = await mcpClient(t, base, test.ownerToken);
  const result = await client.callTool({ name: 'projects_get', arguments: { id: test.defaultProjectId } });
  const http = (await test.call('GET', `/client/projects/${test.defaultProjectId}`)).json();
  t.same(result.structuredContent, http);
  t.same(JSON.parse((result.content as Array<{ text: string }>)[0]!.text), http);
});

t.test("a hidden tool's guessed name is refused with the operation's own refusal", async (t) => {
  const reader = await createKey(test, { name: 'mcp guesser', scopes: ['mcp:read', 'keys:read', 'keys:write'] });
  const client = await mcpClient(t, base, reader.key);
  const write = await client.callTool({ name: 'keys_create', arguments: { name: 'sneaky' } });
  t.match(toolError(write), { code: 'missing_scope', message: /mcp:write/ });
  const owners = await client.callTool({ name: 'audit_list', arguments: {} });
  t.match(toolError(owners), { code: 'owner_required' });
  const scoped = await client.callTool({ name: 'usage_get', arguments: {} });
  t.match(toolError(scoped), { code: 'missing_scope', message: /usage:read/ });
  const keys = await test.call('GET', '/client/keys?limit=100');
  t.notOk(
    (keys.json() as { data: Array<{ name: string }> }).data.some((key) => key.name === 'sneaky'),
    'nothing was created',
  );
});

t.test('an unknown tool and an operation kept off MCP are refused alike: tool_not_found', async (t) => {
  const client = await mcpClient(t, base, test.ownerToken);
  t.notOk(names((await client.listTools()).tools).includes('notes_secret'), 'mcp: false is not listed');
  t.match(toolError(await client.callTool({ name: 'notes_secret', arguments: {} })), { code: 'tool_not_found' });
  t.match(toolError(await client.callTool({ name: 'no_such_tool', arguments: {} })), { code: 'tool_not_found' });
  t.equal((await test.call('GET', '/client/notes/secret')).statusCode, 200, 'it stays on HTTP');
});

t.test('an operation a plugin adds is a tool with no other code', async (t) => {
  const client = await mcpClient(t, base, test.ownerToken);
  const result = await client.callTool({ name: 'notes_echo', arguments: { word: 'tool' } });
  t.same(result.structuredContent, { echoed: 'tool' });
});

t.test('an unknown field is an isError result naming it, in the body as in fields no location takes', async (t) => {
  const client = await mcpClient(t, base, test.ownerToken);
  t.match(toolError(await client.callTool({ name: 'keys_create', arguments: { name: 'x', colour: 'red' } })), { code: 'unknown_field', param: 'colour', message: /colour/ });
  t.match(toolError(await client.callTool({ name: 'keys_list', arguments: { colour: 'red' } })), { code: 'unknown_field', param: 'colour' });
  t.match(toolError(await client.callTool({ name: 'account_whoami', arguments: { colour: 'red' } })), { code: 'unknown_field', param: 'colour' });
});

t.test("refinements JSON Schema cannot state are still enforced by the operation's validation", async (t) => {
  const client = await mcpClient(t, base, test.ownerToken);
  const result = await client.callTool({ name: 'keys_list', arguments: { cursor: 'not a cursor' } });
  t.match(toolError(result), { code: /invalid_/ });
  const missing = await client.callTool({ name: 'notes_echo', arguments: {} });
  t.match(toolError(missing), { code: 'invalid_parameter', param: 'word' });
});

t.test('a failed operation is a tool result carrying the envelope, not a transport error', async (t) => {
  const client = await mcpClient(t, base, test.ownerToken);
  const result = await client.callTool({ name: 'keys_get', arguments: { id: '00000000-0000-4000-8000-000000000000' } });
  t.same(toolError(result), { message: 'No API key 00000000-0000-4000-8000-000000000000', type: 'not_found_error', code: 'key_not_found', param: 'id' });
});

t.test('a write through MCP is in the audit log exactly as the same write over HTTP', async (t) => {
  const agent = await createKey(test, { name: 'mcp auditor', scopes: ['mcp:read', 'mcp:write', 'keys:read', 'keys:write'] });
  const target = await createKey(test, { name: 'audited target', scopes: ['inference'] });
  const client = await mcpClient(t, base, agent.key);
  const viaMcp = await client.callTool({ name: 'keys_update', arguments: { id: target.id, name: 'renamed' } });
  t.notOk(viaMcp.isError, JSON.stringify(viaMcp.content));
  const viaHttp = await test.call('PATCH', `/client/keys/${target.id}`, { token: agent.key, body: { name: 'renamed' } });
  t.equal(viaHttp.statusCode, 200);
  const refused = await client.callTool({ name: 'keys_update', arguments: { id: '00000000-0000-4000-8000-000000000000', name: 'x' } });
  t.match(toolError(refused), { code: 'key_not_found' });
  await test.app.svc.workers.runUntilIdle();
  const log = (await test.call('GET', '/client/audit-log?limit=3&operation=keys.update')).json() as { data: Array<Record<string, unknown>> };
  const [failed, http, mcp] = log.data;
  const comparable = ({ id: _id, occurredAt: _at, requestId: _request, ...rest }: Record<string, unknown>) => rest;
  t.same(comparable(mcp!), comparable(http!), 'the MCP write and the HTTP write are recorded alike');
  t.match(mcp, { operation: 'keys.update', method: 'PATCH', path: '/keys/:id', targetId: target.id, credential: { kind: 'key', id: agent.id }, outcome: { status: 200, succeeded: true } });
  t.match(failed, { operation: 'keys.update', outcome: { status: 404, succeeded: false, code: 'key_not_found' } });
});

t.test('a read-only operation over POST writes no audit entry', async (t) => {
  const client = await mcpClient(t, base, test.ownerToken);
  t.notOk((await client.callTool({ name: 'guardrails_test', arguments: { text: 'hello' } })).isError);
  t.equal((await test.call('POST', '/client/guardrails/test', { body: { text: 'hello' } })).statusCode, 200);
  await test.app.svc.workers.runUntilIdle();
  const log = (await test.call('GET', '/client/audit-log?operation=guardrails.test')).json() as { data: unknown[] };
  t.same(log.data, []);
});

t.test('tool calls are counted by tool and outcome', async (t) => {
  const client = await mcpClient(t, base, test.ownerToken);
  await client.callTool({ name: 'account_whoami', arguments: {} });
  await client.callTool({ name: 'keys_get', arguments: { id: '00000000-0000-4000-8000-000000000000' } });
  const metrics = (await test.call('GET', '/metrics', { token: null })).body;
  t.match(metrics, /svc_mcp_tool_calls_total\{tool="account_whoami",outcome="ok"\} [1-9]/);
  t.match(metrics, /svc_mcp_tool_calls_total\{tool="keys_get",outcome="refused"\} [1-9]/);
});

t.test('each tool call is logged with credential, tool, status and duration, never its arguments', async (t) => {
  const agent = await createKey(test, { name: 'mcp logged', scopes: ['mcp:read', 'mcp:write', 'keys:read', 'keys:write'] });
  const client = await mcpClient(t, base, agent.key);
  const secretName = 'name-that-must-not-be-logged-7f3a';
  t.notOk((await client.callTool({ name: 'keys_create', arguments: { name: secretName, scopes: ['keys:read'] } })).isError);
  t.ok(toolError(await client.callTool({ name: 'audit_list', arguments: {} })));
  const calls = logLines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((entry) => entry.msg === 'MCP tool call');
  t.match(calls.at(-2), { mcp: { tool: 'keys_create', fields: ['name', 'scopes'] }, credential: { kind: 'key', id: agent.id }, status: 201, code: null, durationMs: Number });
  t.match(calls.at(-1), { mcp: { tool: 'audit_list' }, credential: { kind: 'key', id: agent.id }, status: 403, code: 'owner_required' });
  t.notOk(
    logLines.some((line) => line.includes(secretName)),
    'the arguments appear in no log line',
  );
});

t.test('the registry refuses operations that cannot be tools', async (t) => {
  // Adding never reads the stores: the registry of a fresh app is not needed.
  const registry = new OperationRegistry({ identity: test.app.svc.container.resolve(Tokens.Identity) });
  const op = (name: string, extra: Partial<AnyOperation> = {}): AnyOperation =>
    defineOperation({ name, method: 'GET', path: `/${name}`, summary: name, scope: null, readOnly: true, output: z.object({}), handler: async () => ({}), ...extra }) as AnyOperation;
  t.throws(() => registry.add(op('bad name')), /cannot be an MCP tool name/);
  t.throws(() => registry.add(op(`a.${'x'.repeat(63)}`)), /cannot be an MCP tool name/);
  registry.add(op('things.list'));
  t.throws(() => registry.add(op('things_list', { path: '/other' })), /would both be the MCP tool things_list/);
  t.throws(() => registry.add(op('things.get', { path: '/things/:id', params: z.object({ id: z.string() }), query: z.object({ id: z.string() }) })), /takes 'id' in two places/);
  t.throws(
    () => registry.add(op('things.put', { method: 'PUT', path: '/things', readOnly: false, query: z.object({ name: z.string() }), body: z.strictObject({ name: z.string() }) })),
    /takes 'name' in two places/,
  );
});

t.test('a missing, unknown or cookie-only credential is 401 with WWW-Authenticate: Bearer', async (t) => {
  const cases: Array<[string, Record<string, string>]> = [
    ['no credential', {}],
    ['an unknown key', { authorization: `Bearer svc_live_${'0'.repeat(40)}` }],
    ['a session cookie alone', { cookie: `svc_session=${test.ownerToken}` }],
  ];
  for (const [name, headers] of cases) {
    const response = await fetch(`${base}/mcp`, { method: 'POST', headers: { ...jsonRpcHeaders(null), ...headers }, body: initialize() });
    t.equal(response.status, 401, name);
    t.equal(response.headers.get('www-authenticate'), 'Bearer', name);
    t.match(await response.json(), { error: { type: 'authentication_error' } }, name);
  }
});

t.test('GET and DELETE on /mcp answer 405 (stateless: no stream, no session)', async (t) => {
  for (const method of ['GET', 'DELETE']) {
    const response = await fetch(`${base}/mcp`, { method, headers: { authorization: `Bearer ${test.ownerToken}`, accept: 'text/event-stream' } });
    t.equal(response.status, 405, method);
    t.equal(response.headers.get('allow'), 'POST', method);
  }
});

t.test("an Origin other than this site's is refused 403; this site's own is served", async (t) => {
  const foreign = await fetch(`${base}/mcp`, { method: 'POST', headers: { ...jsonRpcHeaders(test.ownerToken), origin: 'https://evil.example' }, body: initialize() });
  t.equal(foreign.status, 403);
  t.match(await foreign.json(), { error: { code: 'origin_not_allowed' } });
  const own = await fetch(`${base}/mcp`, { method: 'POST', headers: { ...jsonRpcHeaders(test.ownerToken), origin: base }, body: initialize() });
  t.equal(own.status, 200);
  t.match(await own.json(), { jsonrpc: '2.0', result: { serverInfo: { name: 'svc-management' }, capabilities: { tools: {} } } });
});

function jsonRpcHeaders(token: string | null): Record<string, string> {
  return { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(token ? { authorization: `Bearer ${token}` } : {}) };
}

function initialize(): string {
  return JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
}

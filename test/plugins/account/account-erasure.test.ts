import { Readable } from 'node:stream';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import t, { type Test } from 'tap';
import { createOrganizationWithOwner, issueSession } from '../../../core/identity/identity-admin.ts';
import { GitHostTokens } from '../../../plugins/githost/git-host.ts';
import { AppEnv } from '../../../plugins/apps/app-env.ts';
import { insertAppRequests } from '../../../plugins/apps/proxy/index.ts';
import { UsageSampleStore } from '../../../plugins/apps/traffic/usage-samples.ts';
import { appStoragePrefix } from '../../../plugins/apps/upkeep/storage-operations.ts';
import { UpkeepStore } from '../../../plugins/apps/upkeep/upkeep-store.ts';
import { storedApp } from '../apps/apps-fixtures.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { OAuthStore } from '../../../plugins/oauth/oauth-store.ts';
import { CallStore } from '../../../plugins/tool-gateway/call-store.ts';
import { ToolGatewayTokens } from '../../../plugins/tool-gateway/index.ts';
import { ToolStore } from '../../../plugins/tool-gateway/tool-store.ts';
import { UpstreamOAuthStore } from '../../../plugins/tool-gateway/upstream-oauth-store.ts';
import { startFakeCustomerEndpoint } from '../../fakes/fake-customer-endpoint.ts';
import { addPerson, createKey } from '../../helpers/app.ts';
import { testClock } from '../../helpers/jobs.ts';
import { createWebhook } from '../../helpers/webhooks.ts';
import { postForm } from '../support/support-helpers.ts';
import { type AccountApp, accountApp, databaseOf } from './account-app.ts';

/**
 * The account deletion, checked against the schema rather than against a list of tables: every
 * table with a column naming an organisation (`organization_id`, `default_organization_id`, …) is
 * read from information_schema, so a table added later without an eraser fails here.
 */
t.setTimeout(300_000);

type Json = Record<string, any>;

const DAY_MS = 86_400_000;
const png = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489', 'hex');

/**
 * What a deletion keeps of the organisation, table by table, as a condition on the rows that may
 * stay (plugins/account/README.md, "What is kept"). `$2` is the deletion's operation id.
 */
const KEPT: Record<string, string> = {
  // Accounting records the law keeps, and the balance they chain to.
  credit_ledger: 'true',
  credit_balances: 'true',
  // Which promotion codes paid credit in: the ledger's promotion lines point at them.
  promotion_redemptions: 'true',
  // The proof that the data was removed: when, and by whose request (ids only).
  account_deletions: 'true',
  // The deletion's own operation, which the owner's progress list pointed at.
  long_running_operations: 'id = $2',
  // The deletion announces itself; every earlier event of the organisation is gone.
  events: "type = 'account.deleted'",
};

/**
 * Tables this test does not fill for the organisation, and why. Every other table naming an
 * organisation must have had a row of it before the deletion, so the erasure is shown on data.
 */
const NOT_EXERCISED: Record<string, string> = {
  'budget_alerts.organization_id': 'an alert-only cap crossed (plugins/metering budget tests); erased by metering',
  'promotion_redemptions.organization_id': 'kept, like the ledger line it paid',
  'account_deletions.organization_id': 'written by the deletion itself',
  'onboarding_dismissals.organization_id': 'skipping the checklist; erased with the onboarding answers',
  'githost_installations.organization_id': 'the github git-host provider only (this test runs the local one); deleted by the git host eraser',
  'githost_authorizations.organization_id': 'the github git-host provider only; rows and tokens deleted by the git host erasers',
  'githost_oauth_states.organization_id': 'the github git-host provider only; deleted by the git host eraser',
};

interface OrganizationColumn {
  table: string;
  column: string;
}

async function organizationColumns(test: AccountApp): Promise<OrganizationColumn[]> {
  const { rows } = await databaseOf(test).query<{ table_name: string; column_name: string }>(
    `SELECT c.table_name, c.column_name FROM information_schema.columns c
     JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE'
     WHERE c.table_schema = current_schema() AND c.column_name LIKE '%organization_id'
     ORDER BY c.table_name, c.column_name`,
  );
  return rows.map((row) => ({ table: row.table_name, column: row.column_name }));
}

/** Rows naming the organisation, per `table.column`. */
async function rowsNaming(test: AccountApp, columns: OrganizationColumn[], organizationId: string): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const { table, column } of columns) {
    const { rows } = await databaseOf(test).query<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE ${column}::text = $1`, [organizationId]);
    counts[`${table}.${column}`] = Number(rows[0]!.n);
  }
  return counts;
}

interface Member {
  organizationId: string;
  token?: string | undefined;
  personId: string;
}

/**
 * What an organisation does with every feature: a webhook endpoint (created first, so the key's
 * creation is delivered to it), keys and calls, a top-up, a guardrail rule, onboarding answers, an
 * invitation, a support request with a file, a /v1 file and a batch of it, a connector's grant with its tokens; the
 * audit log records the writes.
 */
async function useEveryFeature(t: Test, test: AccountApp, who: Member, receiverUrl: string, tag: string) {
  const { token } = who;
  const webhook = await createWebhook(test, { url: `${receiverUrl}/${tag}`, eventTypes: ['*'] }, token);
  const { key, id: keyId } = await createKey(test, { name: `${tag} key` }, token);
  for (let i = 0; i < 2; i += 1) t.equal(await test.chat(key, `${tag} call ${i}`), 200);
  await test.flush();
  const calls = [
    test.call('POST', '/client/credits/topup', { token, body: { amountUsd: 10, reference: `${tag}-topup` } }),
    test.call('POST', '/client/guardrails/rules', { token, body: { name: 'no emails', detector: 'email', action: 'block' } }),
    test.call('POST', '/client/employees', { token, body: { email: `invited-${tag}@example.com`, role: 'member' } }),
  ];
  for (const response of await Promise.all(calls)) t.ok(response.statusCode < 300, `${tag}: ${response.statusCode} ${response.body}`);
  const details = await test.call('POST', '/client/onboarding/details', { token, body: { companyName: tag, useCase: 'agents' } });
  t.equal(details.statusCode, 200);
  const repo = await test.call('POST', '/client/githost/repos', { token, body: { name: `${tag}-app` } });
  t.equal(repo.statusCode, 201, repo.body);
  const policy = await test.call('POST', '/client/githost/member-connect', { token, body: { allowed: true } });
  t.equal(policy.statusCode, 200, policy.body);
  const support = await postForm(test, '/client/support/requests', { subject: `${tag} invoice`, message: 'Wrong company name', attachments: [{ bytes: png, filename: 'a.png' }] }, token);
  t.equal(support.statusCode, 201, support.body);
  const body = { model: 'mock-small', messages: [{ role: 'user', content: `${tag} batch line` }] };
  const batchInput = `${JSON.stringify({ custom_id: tag, method: 'POST', url: '/v1/chat/completions', body })}\n`;
  const file = await postForm(test, '/v1/files', { purpose: 'batch', file: { bytes: Buffer.from(batchInput), filename: 'in.jsonl' } }, key);
  t.equal(file.statusCode, 200, file.body);
  // Its worst case is held (spend_holds) until it runs: it never does here, the app runs no worker.
  const batch = await test.call('POST', '/v1/batches', { token: key, body: { input_file_id: file.json().id, endpoint: '/v1/chat/completions', completion_window: '24h' } });
  t.equal(batch.statusCode, 200, batch.body);

  const db = databaseOf(test);
  const oauth = new OAuthStore(db);
  const now = test.app.svc.container.resolve(Tokens.Clock)();
  const projectId = ((await test.call('GET', '/client/projects', { token })).json().data as Json[])[0]!.id as string;
  const clientId = `client-${tag}-${randomUUID()}`;
  await oauth.createClient({ id: clientId, clientName: `${tag} connector`, redirectUris: ['https://claude.ai/callback'], createdAt: now });
  const grantId = randomUUID();
  const hash = () => createHash('sha256').update(randomBytes(32)).digest('hex');
  const later = new Date(now.getTime() + 30 * DAY_MS);
  await oauth.createGrantWithCode(
    { id: grantId, clientId, personId: who.personId, organizationId: who.organizationId, projectId, scopes: ['usage:read'], resource: 'https://api/mcp' },
    { codeHash: hash(), redirectUri: 'https://claude.ai/callback', codeChallenge: 'challenge', expiresAt: later },
    now,
  );
  await oauth.storeTokens(grantId, { hash: hash(), expiresAt: later }, { hash: hash(), expiresAt: later });
  // An MCP upstream with a header secret (its name never resolves, so no tool is discovered: one is stored as discovery would), and the project's switch.
  const upstream = await test.call('POST', '/client/mcp/upstreams', {
    token,
    body: { name: `${tag} tools`, url: 'https://mcp.example.invalid/mcp', auth: { type: 'header', name: 'Authorization', value: `Bearer ${tag}` } },
  });
  t.equal(upstream.statusCode, 201, upstream.body);
  const upstreamId = upstream.json().id as string;
  const toolId = randomUUID();
  await new ToolStore(db).insert(
    db,
    {
      id: toolId,
      upstreamId,
      organizationId: who.organizationId,
      projectId,
      enabled: true,
      name: 'search',
      title: null,
      description: null,
      inputSchema: { type: 'object' },
      outputSchema: null,
      annotations: null,
    },
    now,
  );
  // A group holding the tool, granted to the key and chosen for an app.
  const group = await test.call('POST', '/client/mcp/groups', { token, body: { name: `${tag} bundle`, projectId } });
  t.equal(group.statusCode, 201, group.body);
  const groupId = group.json().id as string;
  t.equal((await test.call('PUT', `/client/mcp/groups/${groupId}/tools`, { token, body: { toolIds: [toolId] } })).statusCode, 200);
  const mcpGrant = await test.call('POST', '/client/mcp/grants', { token, body: { groupId, keyId } });
  t.equal(mcpGrant.statusCode, 201, mcpGrant.body);
  // An agent's call of the tool, stored as /mcp/gateway stores one.
  await new CallStore(db).insert({
    id: randomUUID(),
    organizationId: who.organizationId,
    projectId,
    keyId,
    groupId,
    upstreamId,
    upstreamSlug: upstream.json().slug as string,
    toolId,
    toolName: 'search',
    gatewayName: `${upstream.json().slug}__search`,
    status: 'ok',
    errorKind: null,
    durationMs: 12,
    requestBytes: 2,
    responseBytes: 40,
    approvalId: null,
    argumentsSha256: createHash('sha256').update('{}').digest('hex'),
    requestId: `req-${tag}`,
    createdAt: now,
  });
  t.equal((await test.call('PUT', `/client/mcp/apps/${randomUUID()}/ai-tools`, { token, body: { groupIds: [groupId] } })).statusCode, 200);
  // A call of the tool by the key waiting for a person's approval, asked of the gate as the call path asks.
  const approval = await test.app.svc.container
    .resolve(ToolGatewayTokens.Approvals)
    .decide(
      { organizationId: who.organizationId, projectId, keyId, toolId, upstreamId, gatewayName: `${tag}__search`, argumentsHash: 'a'.repeat(64), requestId: `req_${tag}` },
      { waitMs: 0, signal: new AbortController().signal },
    );
  t.equal(approval.decision, 'pending');
  t.equal((await test.call('PUT', `/client/mcp/projects/${projectId}/switch`, { token, body: { mode: 'off' } })).statusCode, 200);
  // An OAuth app, an upstream signing in with it, connected, and a sign-in pending (stored as start and callback store them).
  const oauthApp = await test.call('POST', '/client/mcp/oauth-apps', {
    token,
    body: { name: `${tag} app`, clientId: `${tag}-client`, clientSecret: `${tag}-secret`, authorizationServerUrl: 'https://auth.example.invalid', projectId },
  });
  t.equal(oauthApp.statusCode, 201, oauthApp.body);
  const oauthAppId = oauthApp.json().id as string;
  const oauthUpstream = await test.call('POST', '/client/mcp/upstreams', {
    token,
    body: { name: `${tag} oauth tools`, url: 'https://mcp.example.invalid/mcp', auth: { type: 'oauth', oauthAppId }, projectId },
  });
  t.equal(oauthUpstream.statusCode, 201, oauthUpstream.body);
  const oauthUpstreamId = oauthUpstream.json().id as string;
  const connections = new UpstreamOAuthStore(db);
  const vault = test.app.svc.container.resolve(Tokens.Secrets);
  const metadata = {
    issuer: 'https://auth.example.invalid',
    authorization_endpoint: 'https://auth.example.invalid/a',
    token_endpoint: 'https://auth.example.invalid/t',
    response_types_supported: ['code'],
  };
  const signInId = randomUUID();
  await db.transaction(async (tx) => {
    await connections.choose(
      tx,
      oauthUpstreamId,
      who.organizationId,
      { issuer: metadata.issuer, metadata, resource: null, oauthAppId, registeredClientId: null, registeredRedirectUri: null },
      now,
    );
    await connections.connect(tx, oauthUpstreamId, { expiresAt: later, scopes: null }, now);
    // Expiring after the deletion runs, so no prune takes it first.
    await connections.createFlow(tx, {
      id: signInId,
      stateHash: hash(),
      organizationId: who.organizationId,
      upstreamId: oauthUpstreamId,
      startedBy: 'person:x',
      redirectUri: 'https://gw/cb',
      expiresAt: later,
      createdAt: now,
    });
  });
  await vault.put({ kind: 'mcp_upstream', id: oauthUpstreamId }, 'oauth_access_token', `${tag}-access`);
  await vault.put({ kind: 'mcp_upstream', id: oauthUpstreamId }, 'oauth_refresh_token', `${tag}-refresh`);
  await vault.put({ kind: 'mcp_oauth_flow', id: signInId }, 'code_verifier', `${tag}-verifier`);
  // An app with its service, a deployment, a sealed variable and a request its address served (no build runs: the app runs no worker).
  const app = await storedApp(test, `${tag}-app`, { organizationId: who.organizationId, projectId });
  await db.transaction((tx) => new AppEnv(vault).write(tx, app.serviceId, { SECRET: `${tag}-secret` }));
  await insertAppRequests(db, [
    { id: `req_${randomUUID()}`, at: now, organizationId: who.organizationId, ...app, method: 'GET', path: '/', status: 200, durationMs: 1, bytesIn: 0, bytesOut: 2 },
  ]);
  // And a usage sample of its instance, as the sampler writes one.
  const sample = { instance: `${tag}-instance`, sampledAt: now, organizationId: who.organizationId, ...app, coversMs: 60_000, memoryBytes: 1, cpuMs: 1, cpuTotalMs: 1, processes: 1 };
  await new UsageSampleStore(db).insert([sample]);
  // Its storage (a file and its blob), its settings (release command, failure mail) and a proposed fix.
  const upkeep = new UpkeepStore(db);
  const stored = await test.app.svc.container.resolve(Tokens.Blobs).put(Readable.from([`${tag}-file`]), { prefix: appStoragePrefix(who.organizationId) });
  await db.transaction((tx) =>
    upkeep.putObject(
      tx,
      {
        id: randomUUID(),
        appId: app.appId,
        organizationId: who.organizationId,
        name: 'f.txt',
        blobKey: stored.key,
        size: stored.size,
        contentType: stored.contentType,
        sha256: stored.sha256,
      },
      now,
    ),
  );
  await upkeep.updateSettings(app.serviceId, who.organizationId, { releaseCommand: 'true', mailOnFailure: true }, now);
  const fix = { id: randomUUID(), serviceId: app.serviceId, organizationId: who.organizationId, deploymentId: app.deploymentId };
  await upkeep.addFix({ ...fix, model: 'mock-small', requestId: 'req_x', proposal: 'p', createdAt: now }, 20);
  // The log of a build still running, as its worker writes it (core/jobs/job-logs.ts).
  const jobLogs = test.app.svc.container.resolve(Tokens.JobLogs);
  const buildLog = jobLogs.writer(`apps.build:${app.deploymentId}`, who.organizationId);
  buildLog.append(`${tag} building`);
  await buildLog.close();
  // Its hosting records: an instance run, a charged day (plugins/apps/hosting-billing.ts).
  await db.query(
    `INSERT INTO app_instance_runs (id, organization_id, service_id, deployment_id, instance, memory_bytes, started_at, seen_at)
     VALUES ($1, $2, $3, $4, $5, 536870912, $6, $6)`,
    [randomUUID(), who.organizationId, app.serviceId, app.deploymentId, `${tag}-instance`, now],
  );
  await db.query('INSERT INTO app_hosting_days (organization_id, day, entries, hosting_micros, base_fee_micros, closed_at) VALUES ($1, $2, 1, 5000, 10000, $3)', [
    who.organizationId,
    '2026-03-01',
    now,
  ]);
  await test.runJobs();
  // After the jobs: the hosting job clears a notice once the balance is above zero, as this one is.
  await db.query('INSERT INTO app_balance_notices (organization_id, balance_micros, warned_at, grace_ends_at) VALUES ($1, 0, $2, $2)', [who.organizationId, now]);
  return { webhookId: webhook.id, supportRequestId: support.json().id as string, grantId, upstreamId, oauthAppId, oauthUpstreamId, signInId, serviceId: app.serviceId };
}

/** Rows of the tables that hang off the organisation's rows without naming it. */
async function dependentRows(test: AccountApp, made: Awaited<ReturnType<typeof useEveryFeature>>, organizationId: string) {
  const db = databaseOf(test);
  const count = async (sql: string, params: unknown[]) => Number((await db.query<{ n: string }>(sql, params)).rows[0]!.n);
  const blobs = test.app.svc.container.resolve(Tokens.Blobs);
  return {
    'webhook attempts': await count('SELECT count(*) AS n FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = $1', [made.webhookId]),
    'signing secrets': await count("SELECT count(*) AS n FROM secrets WHERE owner_kind = 'webhook' AND owner_id = $1", [made.webhookId]),
    'support messages': await count('SELECT count(*) AS n FROM support_messages WHERE request_id = $1', [made.supportRequestId]),
    'attachment files': (await blobs.list(`support/${organizationId}/`)).length,
    'file contents': (await blobs.list(`files/${organizationId}/`)).length,
    'app storage files': (await blobs.list(appStoragePrefix(organizationId))).length,
    'git repositories': (await test.app.svc.container.resolve(GitHostTokens.Host).listRepos(organizationId)).length,
    'connector tokens': await count('SELECT count(*) AS n FROM oauth_tokens WHERE grant_id = $1', [made.grantId]),
    'connector codes': await count('SELECT count(*) AS n FROM oauth_codes WHERE grant_id = $1', [made.grantId]),
    'upstream header values': await count("SELECT count(*) AS n FROM secrets WHERE owner_kind = 'mcp_upstream' AND owner_id = $1", [made.upstreamId]),
    'upstream oauth tokens': await count("SELECT count(*) AS n FROM secrets WHERE owner_kind = 'mcp_upstream' AND owner_id = $1", [made.oauthUpstreamId]),
    'oauth app secrets': await count("SELECT count(*) AS n FROM secrets WHERE owner_kind = 'mcp_oauth_app' AND owner_id = $1", [made.oauthAppId]),
    'sign-in verifiers': await count("SELECT count(*) AS n FROM secrets WHERE owner_kind = 'mcp_oauth_flow' AND owner_id = $1", [made.signInId]),
    'app env values': await count("SELECT count(*) AS n FROM secrets WHERE owner_kind = 'apps.service' AND owner_id = $1", [made.serviceId]),
  };
}

t.test("a deletion leaves no row naming the organisation but the kept records, and another organisation's rows as they were", async (t) => {
  const receiver = await startFakeCustomerEndpoint();
  t.teardown(() => receiver.close());
  const clock = testClock();
  const test = await accountApp(t, { clock, outbound: { allowPrivateNetwork: true } });
  const db = databaseOf(test);
  const identity = test.app.svc.container.resolve(Tokens.Identity);
  const orgId = test.organizationId;
  const member = await addPerson(test, { role: 'member', email: 'member-here@example.com' });
  const other = await createOrganizationWithOwner(db, test.app.svc.container.resolve(Tokens.IdentityFactory), {
    name: 'Elsewhere',
    ownerEmail: 'elsewhere@example.com',
    ownerName: 'Elsewhere owner',
  });
  const otherSession = await issueSession(identity, { personId: other.owner.id, ttlDays: 30, now: clock() });
  const otherId = other.organization.id;

  // A deletion asked for and cancelled: an operation of the organisation other than the one that runs.
  const confirm = { confirm: (await test.call('GET', '/client/whoami')).json().account.name as string };
  const cancelled = (await test.call('DELETE', '/client/account', { body: confirm })).json() as Json;
  t.equal((await test.call('POST', '/client/account/deletion/cancel')).statusCode, 200);

  const mine = await useEveryFeature(t, test, { organizationId: orgId, personId: member.personId }, receiver.url, 'here');
  const theirs = await useEveryFeature(t, test, { organizationId: otherId, token: otherSession.token, personId: other.owner.id }, receiver.url, 'elsewhere');
  t.ok(receiver.requests.length >= 2, 'both endpoints were delivered to');

  const columns = await organizationColumns(test);
  const before = await rowsNaming(test, columns, orgId);
  const unexercised = Object.entries(before).filter(([where, n]) => n === 0 && !(where in NOT_EXERCISED));
  t.same(unexercised, [], 'every table naming an organisation had a row of it (or says why not in NOT_EXERCISED)');
  const dependentBefore = await dependentRows(test, mine, orgId);
  t.notOk(Object.values(dependentBefore).includes(0), `the rows hanging off them exist too: ${JSON.stringify(dependentBefore)}`);

  const scheduled = (await test.call('DELETE', '/client/account', { body: confirm })).json() as Json;
  t.equal(scheduled.status, 'queued');
  clock.advance(14 * DAY_MS - 60_000);
  await test.runJobs();
  // Taken once the periodic prunes have run at the new time: the last minute runs none, so what differs is the deletion's.
  const otherBefore = await rowsNaming(test, columns, otherId);
  const otherDependentBefore = await dependentRows(test, theirs, otherId);

  clock.advance(60_000);
  await test.runJobs();
  const done = (await db.query('SELECT status, result FROM long_running_operations WHERE id = $1', [scheduled.id])).rows[0] as Json;
  t.equal(done.status, 'succeeded');
  t.match(done.result.erased, {
    invitations: 1,
    'support requests': 1,
    'webhook endpoints': 1,
    'connector grants': 1,
    // The header one and the OAuth one, with its app and pending sign-in.
    'mcp upstreams': 2,
    'mcp oauth apps': 1,
    'mcp oauth sign-ins': 1,
    'mcp tools': 1,
    'mcp project switches': 1,
    'mcp approvals': 1,
    // The grant and the app's choice; the group and its one member.
    'mcp grants': 2,
    'mcp groups': 2,
    // The batch's input and, once the jobs before the deletion ran it, its output file.
    files: 2,
    batches: 1,
    'git repositories': 1,
    apps: 1,
    'app request logs': 1,
    'running job logs': 1,
  });
  t.ok(done.result.erased['webhook deliveries'] >= 1, 'the deliveries were counted');
  t.equal((await db.query('SELECT 1 FROM long_running_operations WHERE id = $1', [cancelled.id])).rows.length, 0, 'the cancelled deletion went');

  for (const { table, column } of columns) {
    const kept = KEPT[table] ?? 'false';
    const { rows } = await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE ${column}::text = $1 AND NOT (${kept})`, kept.includes('$2') ? [orgId, scheduled.id] : [orgId]);
    t.equal(Number(rows[0]!.n), 0, `${table}.${column}: nothing of the organisation left${table in KEPT ? ' but what is kept' : ''}`);
  }
  t.same(await dependentRows(test, mine, orgId), Object.fromEntries(Object.keys(dependentBefore).map((what) => [what, 0])), 'nor anything hanging off them');
  t.equal((await db.query("SELECT id FROM events WHERE organization_id = $1 AND type = 'account.deleted'", [orgId])).rows.length, 1, 'account.deleted stays');
  t.ok(before['credit_ledger.organization_id']! > 0, 'the ledger is kept (account-deletion.test.ts checks it line for line)');

  t.same(await rowsNaming(test, columns, otherId), otherBefore, "another organisation's rows are untouched");
  t.same(await dependentRows(test, theirs, otherId), otherDependentBefore, 'and what hangs off them');
  t.notOk(Object.values(otherDependentBefore).includes(0), 'which it had of every kind');
  t.equal(await identity.people.get(member.personId), null, 'the member who belonged nowhere else is gone');
});

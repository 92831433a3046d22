import { randomUUID } from 'node:crypto';
import type { Page } from 'playwright-core';
import t, { type Test } from 'tap';
import { buildTestApp, createKey } from '../../helpers/app.ts';
import { closedPort } from '../../helpers/closed-port.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';
import { listeningBase, mcpClient } from '../../helpers/mcp-client.ts';
import { fastDeriveKey } from '../../helpers/people.ts';
import { startFakeMcpServer, tool } from '../tool-gateway/fake-mcp-server.ts';
import { consoleBrowser, personWithPassword, sameOriginOnly, seriousViolations, signInThroughThePage } from './browser-fixture.ts';
import { builtConsole, pluginsWithConsole } from './console-fixture.ts';

/**
 * The console's request logs and tool gateway pages in a real browser against the real service on
 * loopback: the log's filters and paging agree with the API row for row, and a tool call waiting for
 * approval completes when a person approves it on the page.
 */
t.setTimeout(300_000);

const { dir } = await builtConsole(t);
const test = await buildTestApp(t, {
  deriveKey: fastDeriveKey,
  // The fake MCP server listens on loopback; an agent's call waits long enough for the page to see it.
  config: { outbound: { allowPrivateNetwork: true } },
  plugins: {
    ...pluginsWithConsole(dir),
    'tool-gateway': { approvalWaitMs: 20_000 },
    inference: {
      providers: {
        mock: { type: 'mock' },
        // Nothing listens there: a call routed to it fails (502), a row of the errors band.
        dead: { type: 'openai', baseUrl: `http://127.0.0.1:${await closedPort()}/v1`, apiKey: 'sk-dead', allowPrivateNetwork: true },
      },
      models: {
        'mock-small': { routes: [{ provider: 'mock', model: 'mock-small' }], prices: TEST_PRICES },
        'mock-large': { routes: [{ provider: 'mock', model: 'mock-large' }], prices: TEST_PRICES },
        broken: { routes: [{ provider: 'dead', model: 'nothing' }], prices: TEST_PRICES },
      },
      failover: { initialBackoffMs: 5, maxBackoffMs: 20, deadlineMs: 2_000 },
    },
  },
});
const base = await listeningBase(test);
const browser = consoleBrowser(t, base);

type Json = Record<string, any>;

async function call(method: string, url: string, body?: unknown): Promise<{ status: number; json: Json; raw: string }> {
  const response = await test.call(method as 'GET', `/client${url}`, body === undefined ? {} : { body });
  return { status: response.statusCode, json: response.json() as Json, raw: response.body };
}

async function chat(key: string, model: string): Promise<number> {
  const response = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }] }),
  });
  await response.arrayBuffer();
  return response.status;
}

await personWithPassword(test, 'logs-owner@example.com', 'owner');
await personWithPassword(test, 'logs-member@example.com', 'member');

// The calls the log shows: two keys, two mock models, and failed calls for the errors band.
const alpha = await createKey(test, { name: 'alpha' });
const beta = await createKey(test, { name: 'beta' });
for (let i = 0; i < 10; i++) await chat(alpha.key, 'mock-small');
for (let i = 0; i < 4; i++) await chat(alpha.key, 'mock-large');
for (let i = 0; i < 6; i++) await chat(beta.key, 'mock-small');
for (let i = 0; i < 3; i++) await chat(beta.key, 'broken');

/** Every id the API answers for these filters, page after page. */
async function apiIds(query: Record<string, string>): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const params = new URLSearchParams({ ...query, limit: '200', ...(cursor ? { cursor } : {}) });
    const page = await call('GET', `/requests?${params}`);
    if (page.status !== 200) throw new Error(page.raw);
    ids.push(...(page.json.data as Json[]).map((row) => row.id as string));
    cursor = page.json.nextCursor;
  } while (cursor);
  return ids;
}

/** The rows the page shows after "More" is clicked until it is gone. */
async function shownIds(page: Page): Promise<string[]> {
  const table = page.getByTestId('request-table').or(page.getByText('No requests match.'));
  await table.first().waitFor();
  const more = page.getByRole('button', { name: 'More' });
  while (await more.isVisible()) {
    const before = await page.locator('tbody tr').count();
    await more.click();
    await page.waitForFunction((count) => (globalThis as any).document.querySelectorAll('tbody tr').length > count, before);
  }
  return page.locator('tbody tr').evaluateAll((rows) => rows.map((row) => (row as any).dataset.requestId as string));
}

async function applyFilters(page: Page, filters: { key?: string; model?: string; q?: string; band?: string }): Promise<void> {
  await page.getByLabel('Key').selectOption({ label: filters.key ?? 'every key' });
  await page.getByLabel('Model (exact)').fill(filters.model ?? '');
  await page.getByLabel('Search').fill(filters.q ?? '');
  await page.getByLabel('Only').selectOption(filters.band ?? '');
  await page.getByLabel('Rows per page').selectOption('10');
  const answered = page.waitForResponse((response) => new URL(response.url()).pathname === '/client/requests');
  await page.getByRole('button', { name: 'Apply filters' }).click();
  await answered;
}

async function signedIn(t: Test, email: string, path: string) {
  const watched = await browser.watchedContext(t);
  await watched.page.goto(`${base}${path}`);
  await signInThroughThePage(watched.page, email);
  return watched;
}

t.test('request log paging with More reaches the last row with none skipped or repeated', async (t) => {
  const watched = await signedIn(t, 'logs-owner@example.com', '/console/requests');
  const { page } = watched;
  await page.getByRole('heading', { name: 'Request logs', level: 1 }).waitFor();
  await applyFilters(page, {});
  const shown = await shownIds(page);
  const all = await apiIds({});
  t.ok(all.length > 20, `more rows than two pages of 10 (${all.length})`);
  t.equal(new Set(shown).size, shown.length, 'no row repeated');
  t.same(shown, all, 'every row, in the API’s order');
  sameOriginOnly(t, watched);
});

t.test('request log filters narrow the rows as the API does', async (t) => {
  const watched = await signedIn(t, 'logs-owner@example.com', '/console/requests');
  const { page } = watched;
  await page.getByRole('heading', { name: 'Request logs', level: 1 }).waitFor();
  const all = await apiIds({});
  const someId = all[Math.floor(all.length / 2)]!;
  const cases: Array<[string, Parameters<typeof applyFilters>[1], Record<string, string>]> = [
    ['key', { key: 'alpha' }, { keyId: alpha.id }],
    ['model', { model: 'mock-large' }, { model: 'mock-large' }],
    ['errors band', { band: 'errors' }, { band: 'errors' }],
    ['request id', { q: someId }, { q: someId }],
    ['key and model together', { key: 'beta', model: 'mock-small' }, { keyId: beta.id, model: 'mock-small' }],
  ];
  for (const [name, filters, query] of cases) {
    await applyFilters(page, filters);
    const expected = await apiIds(query);
    t.ok(expected.length > 0 && expected.length < all.length, `${name}: the API narrows (${expected.length} of ${all.length})`);
    t.same(await shownIds(page), expected, `${name}: the page shows the API’s rows`);
  }
  sameOriginOnly(t, watched);
});

t.test('a request’s detail shows its time in the viewer’s zone with UTC on hover, and bodies only where the API gives them', async (t) => {
  const watched = await signedIn(t, 'logs-owner@example.com', '/console/requests');
  const { page } = watched;
  const first = page.locator('tbody tr').first();
  await first.waitFor();
  const id = (await first.getAttribute('data-request-id'))!;
  const detail = await call('GET', `/requests/${encodeURIComponent(id)}`);
  t.equal(await first.locator('time').getAttribute('title'), new Date(detail.json.createdAt).toISOString(), 'UTC on hover in the list');
  await first.getByRole('link').click();
  await page.getByRole('heading', { name: `Request ${id}`, level: 1 }).waitFor();
  t.equal(await page.locator('main time').first().getAttribute('title'), new Date(detail.json.createdAt).toISOString(), 'UTC on hover in the detail');
  if (detail.json.bodiesHidden === null) {
    t.equal(JSON.parse((await page.getByRole('heading', { name: 'Request body' }).locator('xpath=following-sibling::pre[1]').textContent())!), detail.json.request);
  } else {
    t.ok(await page.getByTestId('bodies-hidden').isVisible(), `the reason the bodies are hidden (${detail.json.bodiesHidden})`);
    t.equal(await page.getByRole('heading', { name: 'Request body' }).count(), 0, 'and no body');
  }
  t.same(await seriousViolations(page), [], 'axe: request detail');
  await page.getByRole('link', { name: '← Request logs' }).click();
  await page.getByTestId('request-table').waitFor();
  t.same(await seriousViolations(page), [], 'axe: request logs');
  sameOriginOnly(t, watched);
});

/** A governed project whose agent key holds a group with `close_issue`, which always needs approval. */
async function agentProject(t: Test) {
  const slug = `s${randomUUID().slice(0, 8)}`;
  const projectId = (await call('POST', '/projects', { name: `p-${slug}` })).json.id as string;
  const key = await createKey(test, { name: `agent-${slug}`, projectId });
  const mcp = await startFakeMcpServer([tool('close_issue'), tool('open_issue')]);
  t.teardown(() => mcp.close());
  const upstream = await call('POST', '/mcp/upstreams', { name: 'Tracker', slug, url: `${mcp.url}/mcp`, newTools: 'enabled', projectId });
  if (upstream.status !== 201) throw new Error(upstream.raw);
  const tools = (await call('GET', `/mcp/tools?upstreamId=${upstream.json.id}`)).json.data as Json[];
  const toolId = (name: string) => tools.find((each) => each.name === name)!.id as string;
  const approval = await call('PATCH', `/mcp/tools/${toolId('close_issue')}`, { approval: 'always' });
  if (approval.status !== 200) throw new Error(approval.raw);
  const groupId = (await call('POST', '/mcp/groups', { name: `g-${slug}`, projectId })).json.id as string;
  await call('PUT', `/mcp/groups/${groupId}/tools`, { toolIds: [toolId('close_issue')] });
  const granted = await call('POST', '/mcp/grants', { groupId, keyId: key.id });
  if (granted.status !== 201) throw new Error(granted.raw);
  return { projectId, slug, key, mcp, upstreamId: upstream.json.id as string, closeIssue: toolId('close_issue'), openIssue: toolId('open_issue') };
}

t.test('approving a waiting call on the tool gateway page makes the agent’s call complete with the upstream’s result', async (t) => {
  const p = await agentProject(t);
  const watched = await signedIn(t, 'logs-owner@example.com', '/console/tools');
  const { page } = watched;
  await page.getByRole('heading', { name: 'Tool gateway', level: 1 }).waitFor();
  await page.getByTestId('no-waiting').or(page.getByTestId('waiting-table')).first().waitFor();

  const agent = await mcpClient(t, base, p.key.key, '/mcp/gateway');
  const result = agent.callTool({ name: `${p.slug}__close_issue`, arguments: { id: 7 } });
  const approve = page.getByRole('button', { name: `Approve ${p.slug}__close_issue` });
  // The page polls while visible: the call shows up without a reload.
  await approve.waitFor();
  t.same(p.mcp.calls, [], 'nothing ran before the approval');
  t.same(await seriousViolations(page), [], 'axe: tool gateway with a waiting call');
  await approve.click();
  await page.getByRole('status').getByText(`Approved: ${p.slug}__close_issue is approved`).waitFor();
  const done = await result;
  t.notOk(done.isError, 'the call completed');
  t.same(done.content, [{ type: 'text', text: JSON.stringify({ id: 7 }) }], 'with the upstream’s result');
  t.same(p.mcp.calls, [{ name: 'close_issue', arguments: { id: 7 } }], 'run once at the upstream');
  await approve.waitFor({ state: 'detached' });
  sameOriginOnly(t, watched);
});

t.test('the tool gateway page lists upstreams with health and switches a tool off through the API', async (t) => {
  const p = await agentProject(t);
  const watched = await signedIn(t, 'logs-owner@example.com', '/console/tools');
  const { page } = watched;
  const upstreamRow = page.getByTestId('upstream-table').locator('tr', { hasText: p.slug });
  await upstreamRow.waitFor();
  t.match(await upstreamRow.textContent(), /ok/, 'the upstream’s health');
  const toggle = page.locator(`tr[data-tool-id="${p.openIssue}"]`).getByRole('checkbox');
  t.ok(await toggle.isChecked(), 'the tool arrived switched on');
  const patched = page.waitForResponse((response) => response.request().method() === 'PATCH');
  await toggle.uncheck();
  t.equal((await patched).status(), 200);
  const listed = (await call('GET', `/mcp/tools?upstreamId=${p.upstreamId}`)).json.data as Json[];
  t.equal(listed.find((each) => each.id === p.openIssue)?.enabled, false, 'the API has it off');
  t.notOk(await toggle.isChecked(), 'and the page shows it off');
  sameOriginOnly(t, watched);
});

t.test('a member sees approve and deny disabled with the reason, and the API refuses them anyway', async (t) => {
  const p = await agentProject(t);
  // A developer of the agent's project: a member sees the approvals of the projects they work on.
  const joined = await call('POST', `/projects/${p.projectId}/members`, { email: 'logs-member@example.com', role: 'developer' });
  if (joined.status !== 201) throw new Error(joined.raw);
  const agent = await mcpClient(t, base, p.key.key, '/mcp/gateway');
  const result = agent.callTool({ name: `${p.slug}__close_issue`, arguments: { id: 9 } });
  const watched = await signedIn(t, 'logs-member@example.com', '/console/tools');
  const { page, context } = watched;
  await page.getByRole('heading', { name: 'Tool gateway', level: 1 }).waitFor();
  const approve = page.getByRole('button', { name: `Approve ${p.slug}__close_issue` });
  await approve.waitFor();
  t.ok(await approve.isDisabled(), 'approve disabled');
  t.ok(await page.getByRole('button', { name: `Deny ${p.slug}__close_issue` }).isDisabled(), 'deny disabled');
  t.ok(await page.getByText('Only an owner or admin approves or denies tool calls').isVisible(), 'the reason is shown');
  const approvalId = (await page.locator('tr[data-approval-id]', { hasText: p.slug }).getAttribute('data-approval-id'))!;
  const session = (await (await context.request.get(`${base}/client/auth/session`)).json()) as { csrfToken: string };
  const forced = await context.request.post(`${base}/client/mcp/approvals/${approvalId}/approve`, { headers: { 'x-csrf-token': session.csrfToken }, data: {} });
  t.equal(forced.status(), 403);
  t.equal(((await forced.json()) as Json).error.code, 'role_required');
  // The owner denies it, so the agent's call ends now rather than at the end of its wait.
  t.equal((await call('POST', `/mcp/approvals/${approvalId}/deny`, {})).status, 200);
  t.equal((await result).isError, true, 'the denied call ends in an error');
  t.same(p.mcp.calls, [], 'and never ran');
  sameOriginOnly(t, watched);
});

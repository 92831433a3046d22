import { randomUUID } from 'node:crypto';
import type { Page } from 'playwright-core';
import t, { type Test } from 'tap';
import { microsOf, usd } from '../../../console/format.ts';
import { MeteringTokens } from '../../../plugins/metering/index.ts';
import { buildTestApp, createKey } from '../../helpers/app.ts';
import { listeningBase } from '../../helpers/mcp-client.ts';
import { fastDeriveKey } from '../../helpers/people.ts';
import { startFakeMcpServer, tool } from '../tool-gateway/fake-mcp-server.ts';
import { consoleBrowser, personWithPassword, sameOriginOnly, seriousViolations, signInThroughThePage, type Watched } from './browser-fixture.ts';
import { builtConsole, pluginsWithConsole } from './console-fixture.ts';

/**
 * The console in a real browser against the real service on loopback: a key's spend, budget and
 * move; tool groups and grants; sign out everywhere and an expired session; the usage table against
 * the series and the ledger; and every page at 360 px, under reduced motion and a dark scheme.
 */
t.setTimeout(240_000);

// The service's clock, moved by the tests (calls spread over hours; a session outliving its TTL).
let offsetMs = 0;
const clock = () => new Date(Date.now() + offsetMs);
const HOUR = 3_600_000;

const { dir } = await builtConsole(t);
const test = await buildTestApp(t, {
  clock,
  deriveKey: fastDeriveKey,
  // The shortest session the config allows; the clock, not a wait, carries a session past it.
  config: { auth: { sessionTtlDays: 1 }, outbound: { allowPrivateNetwork: true } },
  plugins: {
    ...pluginsWithConsole(dir),
    inference: {
      providers: { mock: { type: 'mock' } },
      // Two models at different prices, so the cost of a bucket depends on which ran in it.
      models: {
        'mock-small': { routes: [{ provider: 'mock', model: 'mock-small' }], prices: { inputPerMTokUsd: 1, cachedInputPerMTokUsd: 0.5, outputPerMTokUsd: 2 } },
        'mock-large': { routes: [{ provider: 'mock', model: 'mock-large' }], prices: { inputPerMTokUsd: 7.3, cachedInputPerMTokUsd: 1, outputPerMTokUsd: 19.7 } },
      },
    },
  },
});
const base = await listeningBase(test);
const browser = consoleBrowser(t, base);
const writer = test.app.svc.container.resolve(MeteringTokens.Writer);

type Json = Record<string, any>;

async function call(method: string, url: string, body?: unknown, token?: string): Promise<{ status: number; json: Json; raw: string }> {
  const response = await test.call(method as 'GET', `/client${url}`, { ...(body === undefined ? {} : { body }), ...(token ? { token } : {}) });
  return { status: response.statusCode, json: response.json() as Json, raw: response.body };
}

async function chat(key: string, model: string, words = 3): Promise<void> {
  const response = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello '.repeat(words) }] }),
  });
  if (response.status !== 200) throw new Error(`chat answered ${response.status}: ${await response.text()}`);
}

async function project(name: string): Promise<string> {
  const created = await call('POST', '/projects', { name });
  if (created.status !== 201) throw new Error(created.raw);
  return created.json.id as string;
}

await personWithPassword(test, 'keys-owner@example.com', 'owner');
await personWithPassword(test, 'everywhere@example.com', 'owner');
await personWithPassword(test, 'expiring@example.com', 'owner');
await personWithPassword(test, 'tools-member@example.com', 'member');

async function signedIn(t: Test, email: string, path: string): Promise<Watched> {
  const watched = await browser.watchedContext(t);
  await watched.page.goto(`${base}${path}`);
  await signInThroughThePage(watched.page, email);
  return watched;
}

/** The text of the figure whose term is `term` (the `<dt>`/`<dd>` pairs of a `.figures` list). */
async function figure(page: Page, term: string): Promise<string> {
  return (
    (
      await page
        .locator('.figure', { has: page.locator('dt', { hasText: term }) })
        .locator('dd')
        .textContent()
    )?.trim() ?? ''
  );
}

t.test('a key’s detail shows its spend windows and budget state as GET /keys/{id} reports them', async (t) => {
  const key = await createKey(test, { name: 'spender', spendCap: { usd: 0.5, period: 'day', mode: 'blocking' } });
  for (let i = 0; i < 3; i++) await chat(key.key, 'mock-large', 40);
  await writer.flush();
  const detail = (await call('GET', `/keys/${key.id}`)).json;
  t.ok(detail.spend.totalUsd > 0, 'the key has spent something');
  t.equal(detail.budget.state, 'ok');

  const watched = await signedIn(t, 'keys-owner@example.com', `/console/keys/${key.id}`);
  const { page } = watched;
  await page.getByTestId('budget-state').waitFor();
  t.equal(await figure(page, 'Today (UTC)'), usd(detail.spend.todayUsd), 'today');
  t.equal(await figure(page, 'This week'), usd(detail.spend.weekUsd), 'this week');
  t.equal(await figure(page, 'This month'), usd(detail.spend.monthUsd), 'this month');
  t.equal(await figure(page, 'All time'), usd(detail.spend.totalUsd), 'all time');
  t.equal(await figure(page, 'State'), detail.budget.state, 'budget state');
  t.match(await figure(page, 'Cap per day'), usd(detail.budget.capUsd), 'the cap and its period');
  t.equal(await figure(page, 'Spent this day'), usd(detail.budget.spentUsd), 'spent in the cap’s period');
  t.equal(await figure(page, 'Remaining'), usd(detail.budget.remainingUsd), 'remaining');
  t.same(await seriousViolations(page), [], 'axe: key detail with its budget and the move form');
  sameOriginOnly(t, watched);
});

t.test('moving a key to another project on its page moves it; an API key cannot move a key', async (t) => {
  const destination = `Destination ${randomUUID().slice(0, 6)}`;
  const destinationId = await project(destination);
  const mover = await createKey(test, { name: 'mover' });
  const watched = await signedIn(t, 'keys-owner@example.com', `/console/keys/${mover.id}`);
  const { page } = watched;
  await page.getByRole('heading', { name: 'Move to another project' }).waitFor();
  await page.getByLabel('Project', { exact: true }).selectOption({ label: destination });
  await page.getByRole('button', { name: 'Move key' }).click();
  await page.getByRole('status').getByText(`Key moved to ${destination}`).waitFor();
  t.equal(await page.getByTestId('key-project').textContent(), destination, 'the page shows its new project');
  t.equal((await call('GET', `/keys/${mover.id}`)).json.projectId, destinationId, 'the API has it there');

  // The same move asked by an API key holding keys:write is refused: it is a person's act.
  const writerKey = await createKey(test, { name: 'key writer', scopes: ['keys:write'] });
  const stay = await createKey(test, { name: 'stay' });
  const refused = await call('PATCH', `/keys/${stay.id}`, { projectId: destinationId }, writerKey.key);
  t.equal(refused.status, 403);
  t.equal(refused.json.error.code, 'key_cannot_move_key');
  t.equal((await call('GET', `/keys/${stay.id}`)).json.projectId, test.defaultProjectId, 'and the key stays where it was');
  sameOriginOnly(t, watched);
});

/** A project with an upstream listing two tools and a key: what a group bundles and is granted to. */
async function toolProject(t: Test) {
  const slug = `s${randomUUID().slice(0, 8)}`;
  const name = `p-${slug}`;
  const projectId = await project(name);
  const key = await createKey(test, { name: `agent-${slug}`, projectId });
  const mcp = await startFakeMcpServer([tool('close_issue'), tool('open_issue')]);
  t.teardown(() => mcp.close());
  const upstream = await call('POST', '/mcp/upstreams', { name: 'Tracker', slug, url: `${mcp.url}/mcp`, newTools: 'enabled', projectId });
  if (upstream.status !== 201) throw new Error(upstream.raw);
  return { slug, name, projectId, key };
}

t.test('a group made on the tool gateway page, given tools and granted to a key, is what the key sees; withdrawn, it sees none', async (t) => {
  const p = await toolProject(t);
  const group = `g-${p.slug}`;
  const watched = await signedIn(t, 'keys-owner@example.com', '/console/tools');
  const { page } = watched;
  const notice = page.getByTestId('groups-notice');
  await page.getByRole('heading', { name: 'Create a group' }).waitFor();
  await page.getByLabel('Group name').fill(group);
  await page.getByLabel('Project', { exact: true }).selectOption({ label: p.name });
  await page.getByRole('button', { name: 'Create group' }).click();
  await notice.getByText('Group created').waitFor();

  await page.getByRole('button', { name: `Choose the tools of ${group}` }).click();
  await page.getByRole('checkbox', { name: `${p.slug}__open_issue`, exact: true }).check();
  await page.getByRole('button', { name: 'Save tools' }).click();
  await notice.getByText(`Tools of ${group} saved`).waitFor();
  const row = page.getByTestId('group-table').locator('tr', { hasText: group });
  t.equal(await row.locator('td.mono').textContent(), `${p.slug}__open_issue`, 'the group lists its tool');

  await page.getByLabel('Group', { exact: true }).selectOption({ label: `${group} (${p.name})` });
  await page.getByLabel('Key', { exact: true }).selectOption({ label: p.key.body.name as string });
  await page.getByRole('button', { name: 'Grant', exact: true }).click();
  await notice.getByText('Group granted').waitFor();
  const sees = async () => ((await call('GET', `/mcp/keys/${p.key.id}/tools`)).json.data as Json[]).map((each) => each.name as string);
  t.same(await sees(), [`${p.slug}__open_issue`], 'the key sees the group’s tool and no other');
  t.same(await seriousViolations(page), [], 'axe: tool gateway with a group and a grant');

  await page.getByRole('button', { name: `Withdraw ${group} from ${p.key.body.name}` }).click();
  await notice.getByText(`Withdrew ${group} from ${p.key.body.name}`).waitFor();
  t.same(await sees(), [], 'withdrawn, the key sees nothing');
  t.same((await call('GET', `/mcp/grants?keyId=${p.key.id}`)).json.data, [], 'and the API lists no grant');

  await page.getByRole('button', { name: `Delete group ${group}` }).click();
  await notice.getByText(`Group ${group} deleted`).waitFor();
  const groups = (await call('GET', `/mcp/groups?projectId=${p.projectId}`)).json.data as Json[];
  t.same(groups, [], 'the group is gone');
  sameOriginOnly(t, watched);
});

t.test('a member sees only the groups of their projects, and a viewer’s change is refused with the API’s reason', async (t) => {
  const mine = await toolProject(t);
  const other = await toolProject(t);
  const ours = (await call('POST', '/mcp/groups', { name: `g-${mine.slug}`, projectId: mine.projectId })).json;
  const theirs = (await call('POST', '/mcp/groups', { name: `g-${other.slug}`, projectId: other.projectId })).json;
  t.ok(ours.id && theirs.id, 'both groups exist');
  const joined = await call('POST', `/projects/${mine.projectId}/members`, { email: 'tools-member@example.com', role: 'viewer' });
  if (joined.status !== 201) throw new Error(joined.raw);

  const watched = await signedIn(t, 'tools-member@example.com', '/console/tools');
  const { page } = watched;
  const groups = page.getByTestId('group-table');
  await groups.waitFor();
  t.equal(await groups.locator(`tr[data-group-id="${ours.id}"]`).count(), 1, 'the group of their project is listed');
  t.equal(await groups.locator(`tr[data-group-id="${theirs.id}"]`).count(), 0, 'the other project’s is not');

  await page.getByLabel('Group name').fill('not allowed');
  await page.getByLabel('Project', { exact: true }).selectOption({ label: mine.name });
  const answered = page.waitForResponse((response) => response.request().method() === 'POST' && new URL(response.url()).pathname === '/client/mcp/groups');
  await page.getByRole('button', { name: 'Create group' }).click();
  const response = await answered;
  t.equal(response.status(), 403);
  const { error } = (await response.json()) as { error: { code: string; message: string } };
  t.equal(error.code, 'project_role_insufficient');
  await page.getByRole('alert').getByText(error.message).waitFor();
  t.same(
    ((await call('GET', `/mcp/groups?projectId=${mine.projectId}`)).json.data as Json[]).map((group) => group.name),
    [`g-${mine.slug}`],
    'nothing was made',
  );
  sameOriginOnly(t, watched);
});

t.test('sign out everywhere in one browser ends the same person’s session in another', async (t) => {
  const first = await signedIn(t, 'everywhere@example.com', '/console/');
  const second = await signedIn(t, 'everywhere@example.com', '/console/');
  await first.page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
  await second.page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();

  await first.page.getByRole('button', { name: 'Sign out everywhere' }).click();
  await first.page.getByRole('heading', { name: 'Sign in' }).waitFor();

  // The second browser still shows the console; its next call is refused and it lands on sign-in.
  await second.page.getByRole('link', { name: 'Keys', exact: true }).click();
  await second.page.getByRole('heading', { name: 'Sign in' }).waitFor();
  const url = new URL(second.page.url());
  t.equal(url.pathname, '/console/sign-in');
  t.equal(url.searchParams.get('next'), '/console/keys', 'with the page it was going to');
  t.equal((await second.context.request.get(`${base}/client/auth/session`)).status(), 401, 'its cookie opens nothing');
  sameOriginOnly(t, first);
  sameOriginOnly(t, second);
});

t.test('the usage table equals GET /client/usage/series, and its total equals the ledger’s AI charges to the micro-dollar', async (t) => {
  const alpha = await createKey(test, { name: 'usage alpha' });
  const beta = await createKey(test, { name: 'usage beta' });
  // Calls in three hours, two models with different prices.
  for (const [hoursAgo, key, model, times] of [
    [5, alpha, 'mock-small', 3],
    [2, beta, 'mock-large', 2],
    [2, alpha, 'mock-small', 1],
    [0, beta, 'mock-large', 4],
    [0, alpha, 'mock-small', 2],
  ] as const) {
    offsetMs = -hoursAgo * HOUR;
    for (let i = 0; i < times; i++) await chat(key.key, model, 5 + i * 7);
  }
  offsetMs = 0;
  await writer.flush();

  const watched = await signedIn(t, 'keys-owner@example.com', '/console/usage');
  const { page } = watched;
  await page.getByTestId('usage-table').waitFor();
  const asked = page.waitForResponse((response) => new URL(response.url()).pathname === '/client/usage/series');
  await page.getByLabel('Buckets').selectOption('hour');
  const query = new URL((await asked).url()).search;
  await page.locator('caption', { hasText: 'Usage per hour' }).waitFor();

  const number = (text: string | null) => Number((text ?? '').replace(/[$,]/g, ''));
  const shown = await page
    .getByTestId('usage-table')
    .locator('tbody tr')
    .evaluateAll((rows) => rows.map((row) => [(row.querySelector('time') as any).dateTime as string, ...[...row.querySelectorAll('td')].slice(1).map((cell) => cell.textContent)]));
  const series = (await call('GET', `/usage/series${query}`)).json;
  const expected = (series.buckets as Json[])
    .filter((bucket) => bucket.requests > 0)
    .map((bucket) => [bucket.start, bucket.requests, bucket.errors, bucket.tokens.input, bucket.tokens.output, microsOf(bucket.costUsd)]);
  t.ok(expected.length >= 3, `calls in at least three hourly buckets (${expected.length})`);
  t.same(
    shown.map(([start, requests, errors, input, output, cost]) => [
      new Date(start as string).toISOString(),
      number(requests),
      number(errors),
      number(input),
      number(output),
      Math.round(number(cost) * 1_000_000),
    ]),
    expected,
    'every bucket with calls, as the series has it, newest first',
  );

  const totalMicros = Math.round(number(await page.getByTestId('usage-totals').locator('td').last().textContent()) * 1_000_000);
  const lines: Json[] = [];
  for (let cursor: string | null = null; ; ) {
    const pageOf: Json = (await call('GET', `/credits/statement?lens=usage&limit=500${cursor ? `&cursor=${cursor}` : ''}`)).json;
    lines.push(...pageOf.data);
    cursor = pageOf.nextCursor;
    if (!cursor) break;
  }
  const ledgerMicros = -lines.reduce((sum, line) => sum + microsOf(line.amountUsd), 0);
  const summary = (await call('GET', '/credits/summary')).json;
  t.ok(totalMicros > 0, `the page's total is ${totalMicros} µ$`);
  t.equal(totalMicros, ledgerMicros, 'the total equals the sum of the statement’s AI usage lines');
  t.equal(String(totalMicros), summary.micros.ai, 'and the ledger summary’s AI charges, exactly');
  sameOriginOnly(t, watched);
});

t.test('choosing a project narrows the usage page as the API narrows it: the table by model and the comparison', async (t) => {
  const projectId = await project(`usage project ${randomUUID().slice(0, 6)}`);
  const key = await createKey(test, { name: 'usage project key', projectId });
  for (let i = 0; i < 3; i++) await chat(key.key, 'mock-large', 4 + i);
  await chat(key.key, 'mock-small', 2);
  await writer.flush();

  const watched = await signedIn(t, 'keys-owner@example.com', '/console/usage');
  const { page } = watched;
  await page.getByTestId('usage-models').waitFor();
  const asked = page.waitForResponse((response) => new URL(response.url()).pathname === '/client/usage');
  await page.getByLabel('Project').selectOption(projectId);
  const query = new URL((await asked).url()).searchParams;
  t.equal(query.get('projectId'), projectId, 'the page asks for the project');
  await page.locator('[data-testid="usage-models"] tbody tr[data-model="mock-small"]').waitFor();
  const number = (text: string | null) => Number((text ?? '').replace(/[$,+%]/g, ''));
  const shown = await page
    .getByTestId('usage-models')
    .locator('tbody tr')
    .evaluateAll((rows) => rows.map((row) => [row.getAttribute('data-model'), ...[...row.querySelectorAll('td')].map((cell) => cell.textContent)]));
  const report = (await call('GET', `/usage?${query}`)).json;
  t.same(
    shown.map(([model, requests, errors, input, output, cost]) => [model, number(requests), number(errors), number(input), number(output), Math.round(number(cost) * 1e6)]),
    (report.models as Json[]).map((m) => [m.model, m.requests, m.errors, m.tokens.input, m.tokens.output, microsOf(m.costUsd)]),
    "the project's models, as /client/usage reports them",
  );
  t.same(
    shown.map(([model, requests]) => [model, number(requests)]),
    [
      ['mock-large', 3],
      ['mock-small', 1],
    ],
    'only the calls of that project',
  );
  const comparison = (await call('GET', `/usage/comparison?from=${query.get('from')}&to=${query.get('to')}&projectId=${projectId}`)).json;
  const thisWindow = await page.getByTestId('usage-comparison').locator('tbody tr').first().locator('td').first().textContent();
  t.equal(number(thisWindow), comparison.current.totals.requests, "the comparison's requests this window");
  sameOriginOnly(t, watched);
});

/** Waits until no "Loading …" status is left on the page. */
async function settled(page: Page): Promise<void> {
  await page.locator('h1').first().waitFor();
  await page.waitForFunction(() => ![...(globalThis as any).document.querySelectorAll('[role="status"]')].some((element: any) => element.textContent.startsWith('Loading')));
}

/** How wide the document is: more than the viewport means a horizontal scroll. */
const overflow = (page: Page) => page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth as number);

t.test('at 360 px every page fits the width and the menu reaches every page', async (t) => {
  const watched = await browser.watchedContext(t);
  const { page } = watched;
  await page.setViewportSize({ width: 360, height: 740 });
  for (const path of ['/console/sign-in', '/console/set-password']) {
    await page.goto(`${base}${path}`);
    await page.locator('h1').waitFor();
    t.ok((await overflow(page)) <= 360, `${path}: no horizontal scroll (${await overflow(page)} px)`);
  }
  await page.goto(`${base}/console/`);
  await signInThroughThePage(page, 'keys-owner@example.com');
  await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();

  const menu = page.getByRole('button', { name: 'Menu' });
  const links = ['Overview', 'Keys', 'Usage', 'Request logs', 'Tool gateway'];
  t.notOk(await page.getByRole('link', { name: 'Keys', exact: true }).isVisible(), 'the pages fold behind the menu');
  for (const name of links) {
    await menu.click();
    t.equal(await menu.getAttribute('aria-expanded'), 'true');
    await page.getByRole('link', { name, exact: true }).click();
    await page.getByRole('heading', { name, level: 1 }).waitFor();
    await settled(page);
    t.equal(await menu.getAttribute('aria-expanded'), 'false', `${name}: the menu folds after navigating`);
    t.ok((await overflow(page)) <= 360, `${name}: no horizontal scroll (${await overflow(page)} px)`);
  }
  const keyId = ((await call('GET', '/keys?limit=1')).json.data as Json[])[0]!.id as string;
  const requestId = ((await call('GET', '/requests?limit=1')).json.data as Json[])[0]!.id as string;
  for (const path of [`/console/keys/${keyId}`, `/console/requests/${encodeURIComponent(requestId)}`, '/console/nowhere']) {
    await page.goto(`${base}${path}`);
    await settled(page);
    t.ok((await overflow(page)) <= 360, `${path}: no horizontal scroll (${await overflow(page)} px)`);
  }
  sameOriginOnly(t, watched);
});

t.test('under prefers-reduced-motion nothing transitions or animates; the dark scheme changes the colours', async (t) => {
  const watched = await signedIn(t, 'keys-owner@example.com', '/console/tools');
  const { page } = watched;
  await page.getByRole('heading', { name: 'Tool gateway', level: 1 }).waitFor();
  await settled(page);
  const moving = () =>
    page.evaluate(
      () =>
        [...(globalThis as any).document.querySelectorAll('*')]
          .map((element: any) => (globalThis as any).getComputedStyle(element))
          .filter((style: any) => style.transitionDuration.split(',').some((d: string) => Number.parseFloat(d) > 0) || style.animationName !== 'none').length,
    );
  await page.emulateMedia({ reducedMotion: 'no-preference' });
  t.ok((await moving()) > 0, 'without the preference, controls transition');
  await page.emulateMedia({ reducedMotion: 'reduce' });
  t.equal(await moving(), 0, 'with it, nothing does');

  const background = () => page.evaluate(() => (globalThis as any).getComputedStyle((globalThis as any).document.body).backgroundColor as string);
  await page.emulateMedia({ colorScheme: 'light' });
  const light = await background();
  await page.emulateMedia({ colorScheme: 'dark' });
  t.not(await background(), light, `the dark scheme has its own background (${light} in light)`);
  sameOriginOnly(t, watched);
});

// Last: it moves the service's clock a day on, past every session opened before it.
t.test('an expired session returns to sign-in and, signed in again, to the page it left', async (t) => {
  const watched = await signedIn(t, 'expiring@example.com', '/console/usage');
  const { page } = watched;
  await page.getByTestId('usage-table').waitFor();
  offsetMs = 24 * HOUR + 60_000;
  t.teardown(() => {
    offsetMs = 0;
  });
  const refused = page.waitForResponse((response) => new URL(response.url()).pathname === '/client/usage/series');
  await page.getByLabel('Buckets').selectOption('hour');
  t.equal((await refused).status(), 401, 'the page’s next call is refused');
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  const url = new URL(page.url());
  t.equal(url.searchParams.get('next'), '/console/usage', 'sign-in knows where to return');
  t.ok(await page.getByText('Your session ended; sign in to go back where you were.').isVisible(), 'and says why it is there');
  await signInThroughThePage(page, 'expiring@example.com');
  await page.getByRole('heading', { name: 'Usage', level: 1 }).waitFor();
  t.equal(new URL(page.url()).pathname, '/console/usage', 'back on the page it left');
  await page.getByTestId('usage-table').waitFor();
  sameOriginOnly(t, watched);
});

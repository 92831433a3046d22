import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import t from 'tap';
import { buildTestApp, createKey } from '../../helpers/app.ts';
import { listeningBase } from '../../helpers/mcp-client.ts';
import { fastDeriveKey } from '../../helpers/people.ts';
import { call, git, settledDeployment, tinyApp } from '../apps/apps-fixtures.ts';
import { consoleBrowser, personWithPassword, sameOriginOnly, seriousViolations } from './browser-fixture.ts';
import { signInThroughThePage } from './browser-fixture.ts';
import { builtConsole, pluginsWithConsole } from './console-fixture.ts';

/**
 * The env editor of the console's app page in a real browser against the real service and a running
 * app: values hidden until shown one at a time, add, change and delete seen through the API and by
 * the app itself, a racing change refused with a reload offer, a refusal beside its field, the
 * managed SVC_* variables read-only with the gateway key replaced after a confirmation, and what a
 * project's viewer (who may not read values) sees.
 */
t.setTimeout(600_000);

const buildDir = mkdtempSync(join(tmpdir(), 'svc-console-env-'));
chmodSync(buildDir, 0o700);
t.teardown(() => rmSync(buildDir, { recursive: true, force: true }));
const { dir } = await builtConsole(t);
const test = await buildTestApp(t, {
  deriveKey: fastDeriveKey,
  plugins: {
    ...pluginsWithConsole(dir),
    apps: {
      proxy: { port: 0 },
      runtime: { healthTimeoutMs: 15_000, stopGraceMs: 2_000 },
      build: { dir: buildDir, timeoutMs: 120_000 },
    },
  },
});
const base = await listeningBase(test);
const { watchedContext } = consoleBrowser(t, base);
const deployKey = (await createKey(test, { scopes: ['apps:deploy', 'apps:read'] })).key;

const OWNER = 'env-owner@example.com';
const VIEWER = 'env-viewer@example.com';
await personWithPassword(test, OWNER, 'owner');
await personWithPassword(test, VIEWER, 'member');
const membership = { body: { email: VIEWER, role: 'viewer' } };
const joined = await test.call('POST', `/client/projects/${test.defaultProjectId}/members`, membership);
if (joined.statusCode !== 201) throw new Error(`project membership failed: ${joined.body}`);

/** An app answering the GREETING it was started with, so a restart with a new value is seen from outside. */
const SERVER = [
  "const http = require('node:http');",
  "const server = http.createServer((req, res) => res.end(process.env.GREETING ?? 'unset'));",
  'server.listen(Number(process.env.PORT), "127.0.0.1");',
  "process.on('SIGTERM', () => server.close());",
  '',
].join('\n');

const repository = await test.call('POST', '/client/githost/repos', { body: { name: 'greeter' } });
if (repository.statusCode !== 201) throw new Error(`repository not created: ${repository.body}`);
const packageJson = '{"name":"greeter","scripts":{"start":"node server.js"}}\n';
const work = await tinyApp(t, { 'package.json': packageJson, 'server.js': SERVER });
await git(t, work.dir, ['push', '--quiet', `${base}/git/${test.organizationId}/greeter.git`, 'main'], deployKey);
const SECRETS = { DATABASE_PASSWORD: 'pw-3e8c1f', STRIPE_TOKEN: 'tok-91ab4d' };
const created = await test.call('POST', '/client/apps/githost', { body: { repo: 'greeter', env: SECRETS } });
if (created.statusCode !== 202) throw new Error(`deploy refused: ${created.body}`);
const appId: string = created.json().app.id;
const serviceId: string = created.json().service.id;
const proxyPort = Number(new URL(created.json().app.url).port);
const live = await settledDeployment(test, appId);
if (live.status !== 'live') throw new Error(`deploy failed: ${live.failureReason}`);

type Variable = { name: string; value: string | null; hint?: string | null; keyId?: string | null };

/** The service's variables as GET /services/{id}/env answers the test's owner, values included. */
async function envView(): Promise<{ vars: Variable[]; managed: Variable[] }> {
  return (await test.call('GET', `/client/services/${serviceId}/env`)).json();
}

/** The variables as the API holds them now, values included. */
async function stored(): Promise<Record<string, string | null>> {
  return Object.fromEntries((await envView()).vars.map((variable) => [variable.name, variable.value]));
}

/** A managed variable as the API lists it. */
async function managedVariable(name: string): Promise<Variable> {
  return (await envView()).managed.find((variable) => variable.name === name)!;
}

const greeting = async () => (await call(proxyPort, 'greeter.localhost')).body;

async function envPage(t: Parameters<typeof watchedContext>[0], email: string) {
  const watched = await watchedContext(t);
  await watched.page.goto(`${base}/console/apps/${appId}`);
  await signInThroughThePage(watched.page, email);
  await watched.page.getByTestId('env-table').waitFor();
  return watched;
}

/** Waits for the env section's notice saying `text`. */
const notice = (page: Page, text: string) => page.getByTestId('env-notice').filter({ hasText: text }).waitFor();

const envRow = (page: Page, name: string) => page.getByTestId('env-table').locator(`tr[data-env-name="${name}"]`);

/** The add form: a name, a value, then Add variable. */
async function add(page: Page, name: string, value: string) {
  const form = page.getByRole('form', { name: 'Add a variable' });
  await form.getByLabel('Name').fill(name);
  await form.getByLabel('Value').fill(value);
  await form.getByRole('button', { name: 'Add variable' }).click();
}

t.test('values are hidden until shown, one variable at a time', async (t) => {
  const watched = await envPage(t, OWNER);
  const { page } = watched;
  t.match(await envRow(page, 'DATABASE_PASSWORD').getByRole('cell').nth(1).textContent(), /^hidden/);
  t.notMatch(await page.content(), SECRETS.DATABASE_PASSWORD, 'no value is on the page');
  t.notMatch(await page.content(), SECRETS.STRIPE_TOKEN);

  await page.getByRole('button', { name: 'Show the value of DATABASE_PASSWORD' }).click();
  await envRow(page, 'DATABASE_PASSWORD').getByText(SECRETS.DATABASE_PASSWORD).waitFor();
  t.notMatch(await page.content(), SECRETS.STRIPE_TOKEN, 'the other value stays hidden');
  t.same(await seriousViolations(page), []);

  await page.getByRole('button', { name: 'Hide the value of DATABASE_PASSWORD' }).click();
  await envRow(page, 'DATABASE_PASSWORD').getByText('hidden').waitFor();
  t.notMatch(await page.content(), SECRETS.DATABASE_PASSWORD, 'hidden again');
  sameOriginOnly(t, watched);
});

t.test('a variable added, changed and deleted from the page is what the API holds and the app runs with', async (t) => {
  const watched = await envPage(t, OWNER);
  const { page } = watched;
  t.match(await page.getByTestId('env-restart-hint').textContent(), /restarts the running app once/);
  t.equal(await greeting(), 'unset');

  await add(page, 'GREETING', 'hello');
  await notice(page, 'GREETING saved: the app restarted once with the change');
  await envRow(page, 'GREETING').waitFor();
  t.match(await stored(), { ...SECRETS, GREETING: 'hello' });
  t.equal(await greeting(), 'hello', 'the app restarted with it');

  await page.getByRole('button', { name: 'Change GREETING' }).click();
  const change = page.getByRole('form', { name: 'Change GREETING' });
  t.equal(await change.getByLabel('Value').inputValue(), '', 'a hidden value is not filled in');
  await change.getByLabel('Value').fill('bonjour');
  await change.getByRole('button', { name: 'Save variable' }).click();
  await notice(page, 'GREETING saved');
  await change.waitFor({ state: 'detached' });
  t.match(await stored(), { GREETING: 'bonjour' });
  t.equal(await greeting(), 'bonjour');

  await page.getByRole('button', { name: 'Delete GREETING' }).click();
  await notice(page, 'GREETING deleted: the app restarted once with the change');
  await envRow(page, 'GREETING').waitFor({ state: 'detached' });
  t.same(await stored(), SECRETS);
  t.equal(await greeting(), 'unset');
  sameOriginOnly(t, watched);
});

t.test('a change landed after the page read the variables: refused, and the page offers to reload', async (t) => {
  const watched = await envPage(t, OWNER);
  const { page } = watched;
  const racingChange = { body: { vars: { FROM_ELSEWHERE: 'first' } } };
  const racing = await test.call('POST', `/client/services/${serviceId}/env`, racingChange);
  t.equal(racing.statusCode, 200, racing.body);

  await add(page, 'FROM_PAGE', 'second');
  const conflict = page.getByTestId('env-conflict');
  await conflict.waitFor();
  t.match(await conflict.textContent(), /changed elsewhere since this page read them\. Nothing was saved\./);
  t.notOk('FROM_PAGE' in (await stored()), 'nothing written');
  t.equal(await envRow(page, 'FROM_ELSEWHERE').count(), 0, 'the list is still the one read');

  await conflict.getByRole('button', { name: 'Reload variables' }).click();
  await envRow(page, 'FROM_ELSEWHERE').waitFor();
  await conflict.waitFor({ state: 'detached' });
  const form = page.getByRole('form', { name: 'Add a variable' });
  t.equal(await form.getByLabel('Name').inputValue(), 'FROM_PAGE', 'what was typed is kept to send again');
  await form.getByRole('button', { name: 'Add variable' }).click();
  await envRow(page, 'FROM_PAGE').waitFor();
  t.match(await stored(), { FROM_ELSEWHERE: 'first', FROM_PAGE: 'second' });
  sameOriginOnly(t, watched);
});

t.test('a refused name is shown beside the name field', async (t) => {
  const watched = await envPage(t, OWNER);
  const { page } = watched;
  const before = await stored();
  await add(page, 'PORT', '9999');
  const error = page.locator('#env-new-name-error');
  await error.waitFor();
  t.match(await error.textContent(), /PORT is set by the service/);
  t.equal(await page.getByLabel('Name').getAttribute('aria-describedby'), 'env-new-name-hint env-new-name-error');
  t.same(await stored(), before, 'nothing written');
  t.same(await seriousViolations(page), []);
  sameOriginOnly(t, watched);
});

t.test('the managed variables are listed read-only', async (t) => {
  const watched = await envPage(t, OWNER);
  const { page } = watched;
  const managed = page.getByTestId('managed-env-table');
  const row = (name: string) => managed.locator(`tr[data-env-name="${name}"]`);
  t.match(await row('SVC_API_KEY').textContent(), `The app’s own key ${(await managedVariable('SVC_API_KEY')).hint}`);
  t.match(await row('SVC_BASE_URL').textContent(), (await managedVariable('SVC_BASE_URL')).value!);
  t.match(await row('SVC_MCP_URL').textContent(), (await managedVariable('SVC_MCP_URL')).value!);
  t.equal(await managed.getByRole('button').count(), 0, 'no change, delete or show on them');
  t.equal(await managed.getByRole('textbox').count(), 0);
  const listedAsOwn = page.getByTestId('env-table').locator('tr[data-env-name^="SVC_"]');
  t.equal(await listedAsOwn.count(), 0, 'not among the app’s own');
  sameOriginOnly(t, watched);
});

t.test('replacing the gateway key asks first; then the app has a new key and the old one is revoked', async (t) => {
  const watched = await envPage(t, OWNER);
  const { page } = watched;
  const keyOf = () => managedVariable('SVC_API_KEY');
  const before = await keyOf();
  const asked: string[] = [];
  page.on('dialog', (dialog) => void asked.push(dialog.message()));
  await page.getByRole('button', { name: 'Replace gateway key' }).click();
  await page
    .getByTestId('env-notice')
    .filter({ hasText: /Gateway key replaced \(now .+\): the app restarted once with the change/ })
    .waitFor();
  t.match(asked, [/Replace the app’s gateway key \(SVC_API_KEY\)\? The app restarts once with the new key/]);
  const after = await keyOf();
  t.not(after.keyId, before.keyId, 'a new key');
  t.match(await page.getByTestId('managed-env-table').textContent(), after.hint);
  t.equal((await test.call('GET', `/client/keys/${before.keyId}`)).json().status, 'revoked', 'the old key is revoked');
  sameOriginOnly(t, watched);
});

t.test('a project viewer sees the names but no control to show a value', async (t) => {
  const watched = await envPage(t, VIEWER);
  const { page } = watched;
  await envRow(page, 'DATABASE_PASSWORD').waitFor();
  t.equal(await page.getByRole('button', { name: /^Show the value of / }).count(), 0);
  await page.getByText('Values are hidden: only who may change this app’s variables reads them.').waitFor();
  t.notMatch(await page.content(), SECRETS.DATABASE_PASSWORD);
  t.same(await seriousViolations(page), []);
  sameOriginOnly(t, watched);
});

t.test('with the service stopped, the page says a change applies at the next start', async (t) => {
  t.equal((await test.call('POST', `/client/services/${serviceId}/stop`)).statusCode, 200);
  const watched = await envPage(t, OWNER);
  const { page } = watched;
  t.match(await page.getByTestId('env-restart-hint').textContent(), /stopped: a change applies when it next starts/);
  await add(page, 'GREETING', 'later');
  await notice(page, 'GREETING saved: the service is stopped; the change applies when it starts');
  t.equal((await test.call('POST', `/client/services/${serviceId}/start`)).statusCode, 200);
  t.equal(await greeting(), 'later');
  sameOriginOnly(t, watched);
});

t.test('the env editor fits a 360 px screen', async (t) => {
  const watched = await envPage(t, OWNER);
  const { page } = watched;
  await page.setViewportSize({ width: 360, height: 740 });
  await page.getByTestId('managed-env-table').waitFor();
  const width = await page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth as number);
  t.ok(width <= 360, `the app's page with its variables: ${width} px`);
  sameOriginOnly(t, watched);
});

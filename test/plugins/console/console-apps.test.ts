import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import t from 'tap';
import { buildTestApp, createKey } from '../../helpers/app.ts';
import { listeningBase } from '../../helpers/mcp-client.ts';
import { fastDeriveKey } from '../../helpers/people.ts';
import { call, commitFiles, git, settledDeployment, tinyApp } from '../apps/apps-fixtures.ts';
import { consoleBrowser, personWithPassword, sameOriginOnly, seriousViolations, signInThroughThePage } from './browser-fixture.ts';
import { builtConsole, pluginsWithConsole } from './console-fixture.ts';

/**
 * The console's Apps pages in a real browser against the real service: a repository pushed with the
 * system's git, checked (how it builds, which variables are still unset) and deployed from the page;
 * the app's page with its deployments, their timings, the build log and what the app printed; stop,
 * start and rollback; and what a project's viewer sees.
 */
t.setTimeout(600_000);

const buildDir = mkdtempSync(join(tmpdir(), 'svc-console-apps-'));
chmodSync(buildDir, 0o700);
t.teardown(() => rmSync(buildDir, { recursive: true, force: true }));
const { dir } = await builtConsole(t);
const plugins = pluginsWithConsole(dir);
const test = await buildTestApp(t, {
  deriveKey: fastDeriveKey,
  plugins: {
    ...plugins,
    apps: { proxy: { port: 0 }, runtime: { healthTimeoutMs: 15_000, stopGraceMs: 2_000 }, build: { dir: buildDir, timeoutMs: 120_000 } },
  },
});
const base = await listeningBase(test);
const { watchedContext } = consoleBrowser(t, base);
const deployKey = (await createKey(test, { scopes: ['apps:deploy', 'apps:read'] })).key;
const pushUrl = `${base}/git/${test.organizationId}/storefront.git`;

const OWNER = 'apps-owner@example.com';
const VIEWER = 'apps-viewer@example.com';
await personWithPassword(test, OWNER, 'owner');
await personWithPassword(test, VIEWER, 'member');
const joined = await test.call('POST', `/client/projects/${test.defaultProjectId}/members`, { body: { email: VIEWER, role: 'viewer' } });
if (joined.statusCode !== 201) throw new Error(`project membership failed: ${joined.body}`);

/** A node server answering `text`, printing a line when it listens; the example env file asks for API_TOKEN. */
function source(text: string): Record<string, string> {
  return {
    'package.json': '{"name":"storefront","scripts":{"start":"node server.js"}}\n',
    '.env.example': 'API_TOKEN=\n',
    'server.js': [
      "const http = require('node:http');",
      `const server = http.createServer((req, res) => res.end(${JSON.stringify(text)}));`,
      `server.listen(Number(process.env.PORT), '127.0.0.1', () => console.log('storefront ${text} listening'));`,
      "process.on('SIGTERM', () => server.close());",
      '',
    ].join('\n'),
  };
}

const created = await test.call('POST', '/client/githost/repos', { body: { name: 'storefront' } });
if (created.statusCode !== 201) throw new Error(`repository not created: ${created.body}`);
const work = await tinyApp(t, source('v1'));
await git(t, work.dir, ['push', '--quiet', pushUrl, 'main'], deployKey);

let appId = '';
let proxyPort = 0;

async function signedIn(t: Parameters<typeof watchedContext>[0], path: string, email: string) {
  const watched = await watchedContext(t);
  await watched.page.goto(`${base}${path}`);
  await signInThroughThePage(watched.page, email);
  return watched;
}

function deploymentRows(page: Page) {
  return page.getByTestId('deployment-table').getByRole('row');
}

t.test('the apps page checks how a pushed repository builds, then deploys it', async (t) => {
  const watched = await signedIn(t, '/console/apps', OWNER);
  const { page } = watched;
  await page.getByRole('heading', { name: 'Apps', level: 1 }).waitFor();
  await page.getByText('No apps yet.').waitFor();
  t.equal(await page.getByLabel('Repository').inputValue(), 'storefront');
  await page.getByLabel('Branch').selectOption('main');

  await page.getByRole('button', { name: 'Check' }).click();
  const decision = page.getByTestId('build-decision');
  await decision.waitFor();
  t.match(await decision.textContent(), /node server\.js/, 'the start command read from package.json');
  t.equal(await page.getByTestId('missing-env').textContent(), 'API_TOKEN', 'the example env file’s variable is still unset');

  await page.getByLabel('Start command (optional)').fill('node');
  await page.getByRole('button', { name: 'Check' }).click();
  await page.locator('#deploy-start-error').waitFor();
  t.match(await page.locator('#deploy-start-error').textContent(), /node/, 'an unfinished start command is refused at its field');
  await page.getByLabel('Start command (optional)').fill('');

  await page.getByRole('button', { name: 'Deploy' }).click();
  await page.waitForURL(/\/console\/apps\/[0-9a-f-]{36}$/);
  appId = page.url().split('/').at(-1)!;
  const live = await settledDeployment(test, appId);
  t.equal(live.status, 'live', live.failureReason ?? '');
  await deploymentRows(page).filter({ hasText: 'live' }).waitFor();
  const url = await page.getByTestId('app-details').getByRole('link').textContent();
  proxyPort = Number(new URL(url!).port);
  t.same(await call(proxyPort, 'storefront.localhost').then((a) => [a.status, a.body]), [200, 'v1']);
  t.same(await seriousViolations(page), []);
  sameOriginOnly(t, watched);
});

t.test('the app’s page shows each phase’s time, the build log and what the app printed', async (t) => {
  const watched = await signedIn(t, `/console/apps/${appId}`, OWNER);
  const { page } = watched;
  const row = deploymentRows(page).filter({ hasText: 'live' });
  await row.waitFor();
  t.match(await row.textContent(), /create/);
  t.match(await row.textContent(), /\d+(\.\d)? (ms|s)/, 'phases are timed');
  await page.getByTestId('build-log').filter({ hasText: 'start node server.js' }).waitFor();
  await page.getByTestId('runtime-log').filter({ hasText: 'storefront v1 listening' }).waitFor();
  t.match(await page.getByTestId('build-decision').textContent(), /API_TOKEN/);
  t.same(await seriousViolations(page), []);
  sameOriginOnly(t, watched);
});

t.test('stop and start from the page change what the address answers', async (t) => {
  const watched = await signedIn(t, `/console/apps/${appId}`, OWNER);
  const { page } = watched;
  await page.getByRole('button', { name: 'Stop' }).click();
  await page.getByTestId('service-state').filter({ hasText: 'stopped' }).waitFor();
  t.equal((await call(proxyPort, 'storefront.localhost')).status, 503);
  await page.getByRole('button', { name: 'Start' }).click();
  await page.getByTestId('service-state').filter({ hasText: 'running' }).waitFor();
  t.same(await call(proxyPort, 'storefront.localhost').then((a) => [a.status, a.body]), [200, 'v1']);
  sameOriginOnly(t, watched);
});

t.test('a rollback from the page serves the earlier version again', async (t) => {
  const second = await commitFiles(t, work.dir, source('v2'), 'v2');
  await git(t, work.dir, ['push', '--quiet', pushUrl, 'main'], deployKey);
  const pushed = await settledDeployment(test, appId, (d) => d.commit === second);
  t.equal(pushed.status, 'live', pushed.failureReason ?? '');
  t.equal((await call(proxyPort, 'storefront.localhost')).body, 'v2');

  const watched = await signedIn(t, `/console/apps/${appId}`, OWNER);
  const { page } = watched;
  const first = deploymentRows(page)
    .filter({ hasText: 'retired' })
    .filter({ hasText: work.commit.slice(0, 8) });
  await first.getByRole('button', { name: /^Roll back to / }).click();
  await page.getByTestId('app-notice').filter({ hasText: 'Rolling back' }).waitFor();
  const rolledBack = await settledDeployment(test, appId, (d) => d.commit === work.commit);
  t.equal(rolledBack.status, 'live', rolledBack.failureReason ?? '');
  t.equal((await call(proxyPort, 'storefront.localhost')).body, 'v1');
  await deploymentRows(page).filter({ hasText: 'rollback' }).filter({ hasText: 'live' }).waitFor();
  const buildCell = deploymentRows(page).filter({ hasText: 'rollback' }).getByRole('cell').nth(5);
  t.equal(await buildCell.textContent(), '—', 'a rollback builds nothing');
  sameOriginOnly(t, watched);
});

t.test('a viewer of the project sees the app, and the API’s refusal when stopping it', async (t) => {
  const watched = await signedIn(t, `/console/apps/${appId}`, VIEWER);
  const { page } = watched;
  await page.getByTestId('service-state').filter({ hasText: 'running' }).waitFor();
  await page.getByRole('button', { name: 'Stop' }).click();
  await page.getByRole('alert').waitFor();
  t.equal(await page.getByTestId('service-state').textContent(), 'running');
  t.same(await call(proxyPort, 'storefront.localhost').then((a) => [a.status, a.body]), [200, 'v1'], 'the app still answers');
  t.same(await seriousViolations(page), []);
  sameOriginOnly(t, watched);
});

t.test('both apps pages fit a 360 px screen', async (t) => {
  const watched = await signedIn(t, '/console/apps', OWNER);
  const { page } = watched;
  await page.setViewportSize({ width: 360, height: 740 });
  const width = () => page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth as number);
  await page.getByTestId('app-table').waitFor();
  t.ok((await width()) <= 360, `the apps page: ${await width()} px`);
  await page.goto(`${base}/console/apps/${appId}`);
  await page.getByTestId('deployment-table').waitFor();
  t.ok((await width()) <= 360, `the app's page: ${await width()} px`);
  sameOriginOnly(t, watched);
});

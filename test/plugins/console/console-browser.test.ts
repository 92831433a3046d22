import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { buildTestApp } from '../../helpers/app.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';
import { listeningBase } from '../../helpers/mcp-client.ts';
import { fastDeriveKey, PASSWORD } from '../../helpers/people.ts';
import { consoleBrowser, personWithPassword, sameOriginOnly, seriousViolations, signInThroughThePage } from './browser-fixture.ts';
import { builtConsole, pluginsWithConsole } from './console-fixture.ts';

/**
 * The console in a real browser (playwright-core driving Debian's chromium, headless) against the
 * real service on loopback: sign-in, keys from creation to revocation, what the page keeps and
 * loads, what a member may do, and what axe finds.
 */
t.setTimeout(300_000);

const { dir } = await builtConsole(t);
const test = await buildTestApp(t, {
  deriveKey: fastDeriveKey,
  plugins: {
    ...pluginsWithConsole(dir),
    inference: { providers: { mock: { type: 'mock' } }, models: { 'mock-small': { routes: [{ provider: 'mock', model: 'mock-small' }], prices: TEST_PRICES } } },
  },
});
const base = await listeningBase(test);

const { watchedContext } = consoleBrowser(t, base);

async function chat(key: string): Promise<number> {
  const response = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'mock-small', messages: [{ role: 'user', content: 'hello' }] }),
  });
  await response.arrayBuffer();
  return response.status;
}

await personWithPassword(test, 'console-owner@example.com', 'owner');
await personWithPassword(test, 'console-member@example.com', 'member');
// A developer of the default project: a member's keys live in the projects they work on.
const joined = await test.call('POST', `/client/projects/${test.defaultProjectId}/members`, { body: { email: 'console-member@example.com', role: 'developer' } });
if (joined.statusCode !== 201) throw new Error(`project membership failed: ${joined.body}`);

t.test('sign in, create a key, call with it, revoke it in the console, and the same call gets 401', async (t) => {
  const watched = await watchedContext(t);
  const { page, context } = watched;
  await page.goto(`${base}/console/keys`);
  await signInThroughThePage(page, 'console-owner@example.com');
  await page.getByRole('heading', { name: 'Keys', level: 1 }).waitFor();
  t.equal(new URL(page.url()).pathname, '/console/keys', 'back on the page it left for sign-in');

  await page.getByLabel('Name', { exact: true }).fill('console key');
  await page.getByRole('button', { name: 'Create key' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.waitFor();
  const plaintext = await dialog.getByLabel('API key').inputValue();
  t.match(plaintext, /^svc_live_/);
  t.equal(await chat(plaintext), 200, 'the new key makes a call');

  await dialog.getByRole('button', { name: 'Done' }).click();
  await dialog.waitFor({ state: 'detached' });
  t.notMatch(await page.content(), plaintext, 'the plaintext is gone from the page');
  const stored = await page.evaluate(() => JSON.stringify([{ ...(globalThis as any).localStorage }, { ...(globalThis as any).sessionStorage }]));
  t.notMatch(stored, plaintext, 'and was never put in storage');
  t.notMatch(stored, 'svc_', 'nor any other token');
  t.same(
    (await context.cookies()).map((cookie) => cookie.value).filter((value) => value.includes(plaintext)),
    [],
  );

  await page.getByRole('link', { name: 'console key' }).click();
  await page.getByRole('heading', { name: 'console key', level: 1 }).waitFor();
  await page.getByRole('button', { name: 'Revoke' }).click();
  await page.getByRole('status').getByText('Key revoked').waitFor();
  t.equal(await page.locator('main .status').first().textContent(), 'revoked', 'the page shows the key revoked');
  t.equal(await chat(plaintext), 401, 'the revoked key is refused');
  sameOriginOnly(t, watched);
});

t.test('a key named like markup shows as text and runs nothing', async (t) => {
  const name = '<img src=x onerror=alert(1)>';
  const created = await test.call('POST', '/client/keys', { body: { name } });
  t.equal(created.statusCode, 201);
  const watched = await watchedContext(t);
  const { page, alerts } = watched;
  const response = await page.goto(`${base}/console/keys`);
  t.match(response?.headers()['content-security-policy'], /script-src 'self'/);
  await signInThroughThePage(page, 'console-owner@example.com');
  await page.getByRole('link', { name }).waitFor();
  t.equal(await page.locator('img[src="x"]').count(), 0, 'no image element was made of it');
  t.same(alerts, [], 'no script ran');
  const inline = await page.evaluate(() => [...(globalThis as any).document.scripts].filter((script: { src: string }) => !script.src).length);
  t.equal(inline, 0, 'the page has no inline script');
  sameOriginOnly(t, watched);
});

t.test('a member sees the owner-only limits disabled with the reason, and the API refuses them when forced', async (t) => {
  const watched = await watchedContext(t);
  const { page, context } = watched;
  await page.goto(`${base}/console/keys`);
  await signInThroughThePage(page, 'console-member@example.com');
  await page.getByRole('heading', { name: 'Keys', level: 1 }).waitFor();
  t.ok(await page.getByLabel('Spend cap (USD)').isDisabled(), 'spend cap disabled');
  t.ok(await page.getByLabel('Expires (your time zone)').isDisabled(), 'expiry disabled');
  t.ok(await page.getByLabel('Requests per minute').isDisabled(), 'rate limits disabled');
  t.ok(await page.getByText('Only an owner sets spend caps, expiry and rate limits').isVisible(), 'the reason is shown');
  t.ok(await page.getByLabel('Name', { exact: true }).isEnabled(), 'what a member may do stays enabled');

  const session = (await (await context.request.get(`${base}/client/auth/session`)).json()) as { csrfToken: string };
  const forced = await context.request.post(`${base}/client/keys`, {
    headers: { 'x-csrf-token': session.csrfToken },
    data: { name: 'forced', spendCap: { usd: 5 } },
  });
  t.equal(forced.status(), 403);
  t.equal(((await forced.json()) as { error: { code: string } }).error.code, 'owner_required');
  sameOriginOnly(t, watched);
});

t.test('a page on another origin posting to /client/keys with the cookie gets 403 csrf_failed', async (t) => {
  const { page } = await watchedContext(t);
  await page.goto(`${base}/console/`);
  await signInThroughThePage(page, 'console-owner@example.com');
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
  // Same site (loopback), another origin (port): the Lax session cookie goes along, as it would from a sibling subdomain.
  const other = createServer((_request, response) => response.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>elsewhere</title>'));
  await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => other.close(resolve)));
  const otherOrigin = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
  const attacker = await page.context().browser()!.newContext();
  t.teardown(() => attacker.close());
  await attacker.addCookies(await page.context().cookies());
  const evil = await attacker.newPage();
  await evil.goto(otherOrigin);
  // A form the other page submits (text/plain, so its body reads as JSON): the answer is a page the test can read.
  const navigated = evil.waitForResponse(`${base}/client/keys`);
  await evil.evaluate((target) => {
    const document = (globalThis as any).document;
    const form = document.createElement('form');
    Object.assign(form, { method: 'POST', action: target, enctype: 'text/plain' });
    const field = document.createElement('input');
    Object.assign(field, { name: '{"name":"from elsewhere","x":"', value: '"}' });
    form.append(field);
    document.body.append(form);
    form.submit();
  }, `${base}/client/keys`);
  const response = await navigated;
  t.equal(response.status(), 403);
  t.match(await response.text(), /"code":"csrf_failed"/);
  const keys = await test.call('GET', '/client/keys?limit=200');
  t.notOk(
    keys.json().data.some((key: { name: string }) => key.name === 'from elsewhere'),
    'no key was made',
  );
});

t.test('axe finds no serious or critical violation on the console’s pages', async (t) => {
  const watched = await watchedContext(t);
  const { page } = watched;
  await page.goto(`${base}/console/`);
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  t.same(await seriousViolations(page), [], 'sign-in');
  await signInThroughThePage(page, 'console-owner@example.com');
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
  await page.getByTestId('overview-figures').waitFor();
  t.same(await seriousViolations(page), [], 'overview');
  await page.getByRole('link', { name: 'Keys' }).click();
  await page.getByRole('heading', { name: 'Keys', level: 1 }).waitFor();
  await page.locator('table').first().waitFor();
  t.same(await seriousViolations(page), [], 'keys');
  await page.locator('tbody a').first().click();
  await page.getByRole('heading', { name: 'Spend' }).waitFor();
  t.same(await seriousViolations(page), [], 'key detail');
  await page.getByRole('link', { name: 'Usage' }).click();
  await page.getByTestId('usage-table').waitFor();
  t.same(await seriousViolations(page), [], 'usage');
  sameOriginOnly(t, watched);
});

t.test('the first start’s link sets the owner’s password and leads to a signed-in console', async (t) => {
  const token = test.app.svc.bootstrap?.setPasswordToken;
  t.match(token, /^svc_pwd_/);
  const watched = await watchedContext(t);
  const { page } = watched;
  await page.goto(`${base}/console/set-password#token=${token}`);
  await page.getByLabel('New password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Set password and sign in' }).click();
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
  t.equal(new URL(page.url()).hash, '', 'the spent token is gone from the address');
  t.ok(await page.getByText(`${test.config.bootstrap.ownerEmail} · owner`).isVisible(), 'signed in as the bootstrap owner');
  sameOriginOnly(t, watched);
});

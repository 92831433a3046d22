import type { BrowserContext, Page } from 'playwright-core';
import t from 'tap';
import { buildTestApp } from '../../helpers/app.ts';
import { acceptPage, invitationMail } from '../../helpers/invitations.ts';
import { listeningBase } from '../../helpers/mcp-client.ts';
import { fastDeriveKey, PASSWORD } from '../../helpers/people.ts';
import { createWebhook, deliverDue, TEST_TIMEOUT_MS, verifyDelivery } from '../../helpers/webhooks.ts';
import { startFakeCustomerEndpoint, type FakeCustomerEndpoint } from '../../fakes/fake-customer-endpoint.ts';
import { consoleBrowser, personWithPassword, sameOriginOnly, seriousViolations, signInThroughThePage } from './browser-fixture.ts';
import { builtConsole, pluginsWithConsole } from './console-fixture.ts';

/**
 * The console's People and Webhooks pages in a real browser against the real service on loopback:
 * an invitation from the page to a second browser that accepts it, role change and removal; what a
 * member may not do; a webhook's signing secret shown once; test events, deliveries and resends
 * seen by a real receiver.
 */
t.setTimeout(180_000);

const { dir } = await builtConsole(t);
const test = await buildTestApp(t, {
  deriveKey: fastDeriveKey,
  // The receivers listen on loopback: the operator's switch lets customer URLs reach it (test/helpers/webhooks.ts).
  config: { outbound: { allowPrivateNetwork: true } },
  plugins: { ...pluginsWithConsole(dir), webhooks: { timeoutMs: TEST_TIMEOUT_MS } },
});
const base = await listeningBase(test);
const { watchedContext } = consoleBrowser(t, base);

const OWNER = 'people-owner@example.com';
const MEMBER = 'people-member@example.com';
await personWithPassword(test, OWNER, 'owner');
await personWithPassword(test, MEMBER, 'member');
// A viewer of the default project: a member sees that project's webhook endpoints, and may change none.
const joined = await test.call('POST', `/client/projects/${test.defaultProjectId}/members`, { body: { email: MEMBER, role: 'viewer' } });
if (joined.statusCode !== 201) throw new Error(`project membership failed: ${joined.body}`);

async function receiver(): Promise<FakeCustomerEndpoint> {
  const endpoint = await startFakeCustomerEndpoint();
  t.teardown(() => endpoint.close());
  return endpoint;
}

async function signedIn(t: Parameters<typeof watchedContext>[0], path: string, email: string) {
  const watched = await watchedContext(t);
  await watched.page.goto(`${base}${path}`);
  await signInThroughThePage(watched.page, email);
  return watched;
}

/** A write with the browser's own cookie and CSRF token, as a script on the console's page could send it. */
async function forced(context: BrowserContext, method: 'POST' | 'PATCH' | 'DELETE', path: string, data?: unknown) {
  const { csrfToken } = (await (await context.request.get(`${base}/client/auth/session`)).json()) as { csrfToken: string };
  const response = await context.request.fetch(`${base}${path}`, { method, headers: { 'x-csrf-token': csrfToken }, ...(data === undefined ? {} : { data }) });
  return { status: response.status(), code: ((await response.json()) as { error?: { code: string } }).error?.code };
}

/** What the page's storage holds, and every cookie value: a secret shown once must be in none of them. */
async function kept(page: Page): Promise<string> {
  const storage = await page.evaluate(() => JSON.stringify([{ ...(globalThis as any).localStorage }, { ...(globalThis as any).sessionStorage }]));
  const cookies = (await page.context().cookies()).map((cookie) => cookie.value).join(' ');
  return `${storage} ${cookies}`;
}

/** Reads the secret from the shown-once dialog, closes it, and checks it is gone from the page. */
async function secretOnce(t: Parameters<typeof watchedContext>[0], page: Page): Promise<string> {
  const dialog = page.getByRole('dialog');
  await dialog.waitFor();
  const secret = await dialog.getByLabel('Signing secret').inputValue();
  t.match(secret, /^whsec_[A-Za-z0-9+/=]+$/);
  await dialog.getByRole('button', { name: 'Done' }).click();
  await dialog.waitFor({ state: 'detached' });
  t.notMatch(await page.content(), secret, 'the secret is gone from the page once the dialog closes');
  t.notMatch(await kept(page), secret, 'and was never put in storage or a cookie');
  return secret;
}

function deliveryRow(page: Page, text: string | RegExp) {
  return page.getByTestId('deliveries').getByRole('row').filter({ hasText: text });
}

t.test('an owner invites from the People page, the invitee accepts in another browser, then gets another role and is removed', async (t) => {
  const email = 'invitee@example.com';
  const owner = await signedIn(t, '/console/people', OWNER);
  const { page } = owner;
  await page.getByRole('heading', { name: 'People', level: 1 }).waitFor();
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Role', { exact: true }).selectOption('member');
  await page.getByRole('button', { name: 'Send invitation' }).click();
  await page.getByRole('status').getByText(`Invitation sent to ${email}`).waitFor();
  await page.getByRole('row').filter({ hasText: email }).getByText('pending').waitFor();

  // The invitee opens the link the service mailed, in a browser of their own.
  const mail = await invitationMail(test, email);
  t.equal(mail.link.origin, base, 'the link names the address the console called');
  const invitee = await watchedContext(t);
  await invitee.page.goto(mail.link.href);
  await invitee.page.getByLabel('Name').fill('Invited Person');
  await invitee.page.getByLabel('Password').fill(PASSWORD);
  await invitee.page.getByRole('button', { name: 'Create account and join' }).click();
  await invitee.page.getByRole('heading', { name: 'Welcome to My organisation' }).waitFor();
  await invitee.page.goto(`${base}/console/`);
  await invitee.page.getByText(`${email} · member`).waitFor();

  await page.reload();
  await page.getByRole('row').filter({ hasText: email }).getByText('accepted').waitFor();
  await page.getByLabel(`Role of ${email}`, { exact: true }).selectOption('admin');
  await page.getByRole('button', { name: `Save the role of ${email}` }).click();
  await page.getByRole('status').getByText(`${email} is now admin`).waitFor();
  const whoami = await invitee.context.request.get(`${base}/client/whoami`);
  t.match(await whoami.json(), { credential: { email, role: 'admin' } }, 'the invitee acts as admin from their next request');

  await page.getByRole('button', { name: `Remove ${email}` }).click();
  await page.getByRole('status').getByText(`${email} was removed`).waitFor();
  // The list is read again after the status is shown: its row goes once that answer is drawn.
  await page.getByLabel(`Role of ${email}`, { exact: true }).waitFor({ state: 'detached' });
  t.equal(await page.getByLabel(`Role of ${email}`, { exact: true }).count(), 0, 'no longer listed');
  // The invitee's open console: its next call is refused, and it asks them to sign in.
  await invitee.page.getByRole('link', { name: 'Keys' }).click();
  await invitee.page.getByRole('heading', { name: 'Sign in' }).waitFor();
  const after = await invitee.context.request.get(`${base}/client/whoami`);
  t.equal(after.status(), 401);
  t.equal(((await after.json()) as { error: { code: string } }).error.code, 'no_organization', 'they belong to no organisation now');
  sameOriginOnly(t, owner);
  sameOriginOnly(t, invitee);
});

t.test('resending an invitation from the page mails a new link and the old one stops; revoking it closes the link', async (t) => {
  const email = 'resent@example.com';
  t.equal((await test.call('POST', '/client/employees', { body: { email } })).statusCode, 201);
  const first = (await invitationMail(test, email)).token;
  const owner = await signedIn(t, '/console/people', OWNER);
  const { page } = owner;
  await page.getByRole('button', { name: `Resend the invitation to ${email}` }).click();
  await page.getByRole('status').getByText(`The invitation to ${email} was sent again`).waitFor();
  const second = (await invitationMail(test, email)).token;
  t.not(second, first, 'a new link');
  t.equal((await acceptPage(test, first)).statusCode, 404, 'the old link names nothing');
  t.equal((await acceptPage(test, second)).statusCode, 200, 'the new one opens');

  await page.getByRole('button', { name: `Revoke the invitation to ${email}` }).click();
  await page.getByRole('status').getByText(`The invitation to ${email} was revoked`).waitFor();
  await page.getByRole('row').filter({ hasText: email }).getByText('revoked').waitFor();
  t.ok(await page.getByRole('button', { name: `Resend the invitation to ${email}` }).isDisabled(), 'a revoked invitation is not resent');
  t.equal((await acceptPage(test, second)).statusCode, 410, 'the link says it was revoked');
  sameOriginOnly(t, owner);
});

t.test('a member sees people and webhook writes disabled with the reason, and the API refuses them when forced', async (t) => {
  const hook = await createWebhook(test, { url: `${(await receiver()).url}/member-sees`, projectId: test.defaultProjectId });
  const member = await signedIn(t, '/console/people', MEMBER);
  const { page, context } = member;
  await page.getByRole('heading', { name: 'People', level: 1 }).waitFor();
  t.equal(await page.getByLabel(`Role of ${OWNER}`, { exact: true }).inputValue(), 'owner', 'each person’s role is the one chosen');
  t.ok(await page.getByLabel(`Role of ${OWNER}`, { exact: true }).isDisabled(), 'role change disabled');
  t.ok(await page.getByRole('button', { name: `Remove ${OWNER}` }).isDisabled(), 'removal disabled');
  t.ok(await page.getByLabel('Email').isDisabled(), 'inviting disabled');
  t.ok(await page.getByText('Only an owner or admin manages people and invitations').first().isVisible(), 'the reason is shown');
  const people = (await (await context.request.get(`${base}/client/employees?limit=200`)).json()) as { data: Array<{ id: string; email: string }> };
  const ownerId = people.data.find((person) => person.email === OWNER)!.id;
  t.same(await forced(context, 'POST', '/client/employees', { email: 'by-member@example.com' }), { status: 403, code: 'role_required' });
  t.same(await forced(context, 'DELETE', `/client/employees/${ownerId}`), { status: 403, code: 'role_required' });

  await page.getByRole('link', { name: 'Webhooks' }).click();
  await page.getByRole('heading', { name: 'Webhooks', level: 1 }).waitFor();
  t.ok(await page.getByLabel('URL').isDisabled(), 'adding an endpoint disabled');
  t.ok(await page.getByText('Your role (member) does not hold webhooks:write').isVisible(), 'the reason is shown');
  await page.getByRole('link', { name: /member-sees/ }).click();
  await page.getByRole('heading', { name: /member-sees/, level: 1 }).waitFor();
  for (const name of ['Send a test event', 'Switch off', 'Delete endpoint', 'Rotate secret']) {
    t.ok(await page.getByRole('button', { name }).isDisabled(), `${name} disabled`);
  }
  t.same(await forced(context, 'POST', '/client/webhooks', { url: 'https://hooks.example.com/x', eventTypes: ['*'], projectId: test.defaultProjectId }), {
    status: 403,
    code: 'missing_scope',
  });
  t.same(await forced(context, 'POST', `/client/webhooks/${hook.id}/secret/rotate`, {}), { status: 403, code: 'missing_scope' });
  sameOriginOnly(t, member);
});

t.test('a webhook’s signing secret is shown once at creation and once at each rotation, and it is the one that signs', async (t) => {
  const endpoint = await receiver();
  const owner = await signedIn(t, '/console/webhooks', OWNER);
  const { page } = owner;
  await page.getByRole('heading', { name: 'Webhooks', level: 1 }).waitFor();
  await page.getByLabel('URL').fill(`${endpoint.url}/secret-once`);
  await page.getByLabel('Every event type, those added later included').check();
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  const first = await secretOnce(t, page);

  await page.getByRole('link', { name: /secret-once/ }).click();
  await page.getByRole('heading', { name: /secret-once/, level: 1 }).waitFor();
  await page.getByRole('button', { name: 'Rotate secret' }).click();
  const second = await secretOnce(t, page);
  t.not(second, first, 'a new secret');
  await page.getByRole('status').getByText('Secret rotated; the previous one no longer signs').waitFor();

  await page.getByRole('button', { name: 'Send a test event' }).click();
  const request = await endpoint.arrived(1);
  t.match(verifyDelivery(second, request), { type: 'webhook.test' }, 'the test event verifies with the secret shown');
  t.throws(() => verifyDelivery(first, request), 'and not with the one before it');
  sameOriginOnly(t, owner);
});

t.test('a test event sent from the endpoint’s page appears among its deliveries with its status', async (t) => {
  const endpoint = await receiver();
  endpoint.handle((_req, res) => res.writeHead(204).end());
  const hook = await createWebhook(test, { url: `${endpoint.url}/test-event` });
  const owner = await signedIn(t, `/console/webhooks/${hook.id}`, OWNER);
  const { page } = owner;
  await page.getByText('No deliveries yet.').waitFor();
  await page.getByRole('button', { name: 'Send a test event' }).click();
  await page
    .getByRole('status')
    .getByText(/^Test event delivered: 204 in \d+ ms$/)
    .waitFor();
  const row = deliveryRow(page, 'webhook.test');
  await row.getByText('succeeded', { exact: true }).waitFor();
  t.match(await row.textContent(), /204 in \d+ ms/, 'the row shows the answer');
  t.equal(endpoint.requests.length, 1, 'the receiver got one request');
  sameOriginOnly(t, owner);
});

t.test('resending a failed delivery from the page sends it again and the row shows the new attempt', async (t) => {
  const endpoint = await receiver();
  endpoint.handle((_req, res) => res.writeHead(500).end('down'));
  const hook = await createWebhook(test, { url: `${endpoint.url}/resend` });
  const owner = await signedIn(t, `/console/webhooks/${hook.id}`, OWNER);
  const { page } = owner;
  await page.getByRole('button', { name: 'Send a test event' }).click();
  await page
    .getByRole('status')
    .getByText(/^Test event failed: 500/)
    .waitFor();
  const row = deliveryRow(page, 'webhook.test');
  await row.getByText('failed', { exact: true }).waitFor();

  endpoint.handle((_req, res) => res.writeHead(200).end('ok'));
  await row.getByRole('button', { name: /^Resend/ }).click();
  await deliverDue(test);
  // The page asks again while it is visible: the row turns without a reload.
  await row.getByText('succeeded', { exact: true }).waitFor();
  t.match(await row.textContent(), /200 in \d+ ms/, 'the answer to the new attempt');
  t.equal(await row.locator('td').nth(2).textContent(), '2', 'two attempts, the resend numbered after the first');
  const [firstTry, resent] = [endpoint.requests[0]!, await endpoint.arrived(2)];
  t.equal(resent.headers['webhook-id'], firstTry.headers['webhook-id'], 'the same message id');
  t.equal(resent.body, firstTry.body, 'and the same body');
  sameOriginOnly(t, owner);
});

t.test('axe finds no serious or critical violation on the People and Webhooks pages, and they fit 360 px', async (t) => {
  const endpoint = await receiver();
  const hook = await createWebhook(test, { url: `${endpoint.url}/axe` });
  t.equal((await test.call('POST', `/client/webhooks/${hook.id}/test`)).statusCode, 200);
  const watched = await signedIn(t, '/console/people', OWNER);
  const { page } = watched;
  await page.setViewportSize({ width: 360, height: 740 });
  const fits = () => page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth as number);
  await page.getByRole('heading', { name: 'Invite a person' }).waitFor();
  await page.locator('table').nth(1).waitFor();
  t.same(await seriousViolations(page), [], 'people');
  t.ok((await fits()) <= 360, 'people fits 360 px');
  // At this width the pages are folded behind the header's Menu button.
  await page.getByRole('button', { name: 'Menu' }).click();
  await page.getByRole('link', { name: 'Webhooks' }).click();
  await page.getByRole('link', { name: /\/axe$/ }).waitFor();
  await page.locator('input[value="key.created"]').waitFor();
  t.same(await seriousViolations(page), [], 'webhooks');
  t.ok((await fits()) <= 360, 'webhooks fits 360 px');
  await page.getByRole('link', { name: /\/axe$/ }).click();
  await deliveryRow(page, 'webhook.test').waitFor();
  t.same(await seriousViolations(page), [], 'webhook detail');
  t.ok((await fits()) <= 360, 'webhook detail fits 360 px');
  await page.getByRole('button', { name: 'Rotate secret' }).click();
  await page.getByRole('dialog').waitFor();
  t.same(await seriousViolations(page), [], 'the shown-once dialog');
  sameOriginOnly(t, watched);
});

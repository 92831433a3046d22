import type { Browser, BrowserContext } from 'playwright-core';
import { launchChromium } from '../../../tools/chromium.ts';
import t from 'tap';
import { createOrganizationWithOwner, issueSession } from '../../../core/identity/identity-admin.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { buildTestApp } from '../../helpers/app.ts';
import { invitationMail } from '../../helpers/invitations.ts';
import { listeningBase } from '../../helpers/mcp-client.ts';
import { fastDeriveKey, PASSWORD, signIn } from '../../helpers/people.ts';

/**
 * Invitations end to end in a real browser (playwright-core driving Debian's chromium, headless):
 * the owner invites over HTTP, the mail lands in the outbox, the person opens its link, and the
 * session the page opens works with the role the invitation gave.
 */
t.setTimeout(240_000);

const test = await buildTestApp(t, { deriveKey: fastDeriveKey });
const base = await listeningBase(test);
const container = test.app.svc.container;
const identity = container.resolve(Tokens.Identity);

let browser: Browser | null = null;
t.teardown(() => browser?.close());
async function freshContext(): Promise<BrowserContext> {
  browser ??= await launchChromium();
  const context = await browser.newContext();
  t.teardown(() => context.close());
  return context;
}

/** POST /client/employees over HTTP, as the owner: so the link in the mail names this listening server. */
async function inviteOverHttp(body: Record<string, unknown>): Promise<{ id: string }> {
  const response = await fetch(`${base}/client/employees`, {
    method: 'POST',
    headers: { authorization: `Bearer ${test.ownerToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (response.status !== 201) throw new Error(`invitation failed: ${response.status} ${await response.text()}`);
  return (await response.json()) as { id: string };
}

/** A management call with the browser's own cookies, carrying its session's CSRF token as a console would. */
async function asTheBrowser(context: BrowserContext, method: 'GET' | 'POST', path: string, data?: unknown) {
  const session = await context.request.get(`${base}/client/auth/session`);
  const { csrfToken } = (await session.json()) as { csrfToken: string };
  return context.request.fetch(`${base}${path}`, { method, headers: { 'x-csrf-token': csrfToken }, ...(data === undefined ? {} : { data }) });
}

for (const role of ['member', 'admin'] as const) {
  t.test(`a new person invited as ${role} accepts in the browser, and their session works with that role`, async (t) => {
    const email = `browser-${role}@example.com`;
    await inviteOverHttp({ email, role });
    const mail = await invitationMail(test, email);
    t.equal(mail.link.origin, base, 'the link names the address the owner called');

    const context = await freshContext();
    const page = await context.newPage();
    const opened = await page.goto(mail.link.href);
    t.equal(opened?.status(), 200);
    t.match(opened?.headers()['content-security-policy'], /default-src 'none'/);
    await page.getByRole('heading', { name: 'Join My organisation' }).waitFor();
    await page.getByLabel('Name').fill(`Browser ${role}`);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account and join' }).click();
    await page.getByRole('heading', { name: 'Welcome to My organisation' }).waitFor();
    t.ok(await page.getByText(`You are ${role} of My organisation`).isVisible(), 'the landing page names the role');

    const whoami = await context.request.get(`${base}/client/whoami`);
    t.match(await whoami.json(), { account: { id: test.organizationId }, credential: { type: 'session', email, role } });
    const people = await asTheBrowser(context, 'GET', '/client/employees');
    t.equal(people.status(), 200, 'every member reads the people list');
    const invite = await asTheBrowser(context, 'POST', '/client/employees', { email: `invited-by-${role}@example.com` });
    if (role === 'member') {
      t.equal(invite.status(), 403, 'a member cannot invite');
      t.equal(((await invite.json()) as { error: { code: string } }).error.code, 'role_required');
    } else {
      t.equal(invite.status(), 201, 'an admin can');
    }
    t.equal(await page.goto(mail.link.href).then((again) => again?.status()), 410, 'the link works once');
  });
}

t.test('a person of another organisation accepts by signing in, and keeps their password and their sessions', async (t) => {
  const email = 'grace@elsewhere.example';
  const storesFor = container.resolve(Tokens.IdentityFactory);
  const elsewhere = await createOrganizationWithOwner(container.resolve(Tokens.Database), storesFor, { name: 'Elsewhere', ownerEmail: email, ownerName: 'Grace' });
  await identity.people.setPasswordHash(elsewhere.owner.id, await container.resolve(Tokens.SignIn).firstPasswordHash(PASSWORD, email));
  const storedHash = await identity.people.passwordHashOf(elsewhere.owner.id);
  const signedIn = await signIn(test, email);
  const cookie = String(signedIn.headers['set-cookie']).split(';')[0]!;
  const { token: bearer } = await issueSession(identity, { personId: elsewhere.owner.id, ttlDays: 1, now: new Date() });

  await inviteOverHttp({ email, role: 'admin' });
  const context = await freshContext();
  const page = await context.newPage();
  await page.goto((await invitationMail(test, email)).link.href);
  await page.getByText('You already have an account: sign in to accept').waitFor();
  t.equal(await page.getByLabel('Name').count(), 0, 'no name to choose: the account exists');
  t.equal(await page.getByLabel('Email').inputValue(), email, "the invitation's email, fixed");
  await page.getByLabel('Password').fill('not the password at all');
  await page.getByRole('button', { name: 'Sign in and join' }).click();
  await page.getByText('Wrong email or password').waitFor();
  t.equal(await identity.memberships.get(test.organizationId, elsewhere.owner.id), null, 'a wrong password joins nothing');
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in and join' }).click();
  await page.getByRole('heading', { name: 'Welcome to My organisation' }).waitFor();
  t.ok(await page.getByText('Your sessions act in Elsewhere, as before').isVisible());

  t.match(await identity.memberships.get(test.organizationId, elsewhere.owner.id), { role: 'admin' }, 'the membership is added');
  t.equal(await identity.people.passwordHashOf(elsewhere.owner.id), storedHash, 'the password is not reset');
  t.equal((await signIn(test, email)).statusCode, 200, 'the old password still signs in');
  for (const [what, headers] of [
    ['the earlier browser session', { cookie }],
    ['the earlier Bearer session', { authorization: `Bearer ${bearer}` }],
  ] as const) {
    const whoami = await test.call('GET', '/client/whoami', { token: null, headers });
    t.equal(whoami.statusCode, 200, `${what} still works`);
    t.equal(whoami.json().account.id, elsewhere.organization.id, `${what} still acts in their organisation`);
  }
  const organizations = (await test.call('GET', '/client/organizations', { token: bearer })).json().data as Array<{ id: string; role: string }>;
  t.same(
    organizations.map((o) => [o.id, o.role]).sort(),
    [
      [elsewhere.organization.id, 'owner'],
      [test.organizationId, 'admin'],
    ].sort(),
  );
  t.equal((await test.call('POST', '/client/organizations/default', { token: bearer, body: { organizationId: test.organizationId } })).statusCode, 200);
  t.match((await test.call('GET', '/client/whoami', { token: bearer })).json(), { account: { id: test.organizationId }, credential: { role: 'admin' } });
  t.equal((await test.call('GET', '/client/employees/invites', { token: bearer })).statusCode, 200, 'as an admin here');
});

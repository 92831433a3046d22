import t from 'tap';
import { SCOPES } from '../../../core/identity/scopes.ts';
import { addPersonTo, createOrganizationWithOwner, issueSession } from '../../../core/identity/identity-admin.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { addPerson, buildTestApp, createKey, type TestApp } from '../../helpers/app.ts';
import { acceptPage, invitationMail, invitedToken, inviteByApi, sessionCookieFrom, submitAcceptForm } from '../../helpers/invitations.ts';
import { fastDeriveKey, PASSWORD, signIn } from '../../helpers/people.ts';

/**
 * The organisation's people over the management API (`/client/employees…`) and the accept page
 * (`/invitations/accept`), through app.inject. A real browser accepting, and removal across
 * replicas, have their own files.
 */
let now = Date.parse('2026-12-01T10:00:00Z');
const test = await buildTestApp(t, { clock: () => new Date(now), deriveKey: fastDeriveKey });
const identity = test.app.svc.container.resolve(Tokens.Identity);
const db = test.app.svc.container.resolve(Tokens.Database);

let emails = 0;
const freshEmail = (what: string) => `${what}-${++emails}@example.com`;
const code = (response: { json(): unknown }) => (response.json() as { error?: { code?: string } }).error?.code;

async function events(type: string): Promise<Array<{ subject: string; data: Record<string, unknown>; actor: { kind: string; id: string } | null }>> {
  const { rows } = await db.query<{ subject: string; data: unknown; actor: unknown }>('SELECT subject, data, actor FROM events WHERE type = $1 ORDER BY occurred_at', [type]);
  const json = (value: unknown) => (typeof value === 'string' ? JSON.parse(value) : value);
  return rows.map((row) => ({ subject: row.subject, data: json(row.data), actor: json(row.actor) }));
}

/** A person added to an organisation directly, with a Bearer session valid on the test's clock. */
async function personAs(role: 'owner' | 'admin' | 'member', on: TestApp = test): Promise<{ personId: string; token: string }> {
  const stores = on.app.svc.container.resolve(Tokens.Identity);
  const person = await addPersonTo(stores, { organizationId: on.organizationId, email: freshEmail(role), name: role, role });
  const { token } = await issueSession(stores, { personId: person.id, ttlDays: 1, now: new Date(now) });
  return { personId: person.id, token };
}

/** A person invited through the API who accepted as a new person: their person id and browser session cookie. */
async function joined(role: 'owner' | 'admin' | 'member', by: TestApp = test): Promise<{ personId: string; cookie: string; email: string; bearer: string }> {
  const email = freshEmail(role);
  const { token } = await invitedToken(by, { email, role });
  const accepted = await submitAcceptForm(by, token, { name: `New ${role}`, password: PASSWORD });
  if (accepted.statusCode !== 303) throw new Error(`acceptance failed: ${accepted.statusCode} ${accepted.body.slice(0, 300)}`);
  const person = (await identity.people.getByEmail(email))!;
  const { token: bearer } = await issueSession(identity, { personId: person.id, ttlDays: 1, now: new Date(now) });
  return { personId: person.id, cookie: sessionCookieFrom(accepted), email, bearer };
}

t.test('an owner invites by email: the answer is a pending invitation, and no one is added until it is accepted', async (t) => {
  const email = freshEmail('invitee');
  const response = await inviteByApi(test, { email, role: 'admin', projects: [{ projectId: test.defaultProjectId, role: 'developer' }] });
  t.equal(response.statusCode, 201, response.body);
  t.match(response.json(), {
    object: 'invitation',
    email,
    role: 'admin',
    projects: [{ projectId: test.defaultProjectId, role: 'developer' }],
    status: 'pending',
    invitedBy: { email: 'owner@example.com' },
    expiresAt: new Date(now + 168 * 3_600_000).toISOString(),
    acceptedAt: null,
  });
  t.equal(await identity.people.getByEmail(email), null, 'no person yet');
  const people = (await test.call('GET', '/client/employees')).json().data as Array<{ email: string }>;
  t.notOk(
    people.some((p) => p.email === email),
    'not listed among the people',
  );
});

t.test('the invitation is mailed with a link to the accept page; its token is in the mail only, stored hashed', async (t) => {
  const email = freshEmail('mailed');
  const response = await inviteByApi(test, { email });
  const mail = await invitationMail(test, email);
  t.equal(mail.link.origin + mail.link.pathname, 'http://localhost/invitations/accept', "the request's origin, with no publicUrl");
  t.match(mail.subject, /invited to join My organisation/);
  t.match(mail.text, /as member/);
  t.notOk(response.body.includes(mail.token), 'the answer does not carry the token');
  const { rows } = await db.query<{ token_hash: string }>('SELECT token_hash FROM invitations WHERE id = $1', [response.json().id]);
  t.not(rows[0]?.token_hash, mail.token);
  t.equal(rows[0]?.token_hash.length, 64);
});

t.test('links point at server.publicUrl when one is configured', async (t) => {
  const hosted = await buildTestApp(t, { config: { server: { publicUrl: 'https://gateway.example' } }, deriveKey: fastDeriveKey });
  await inviteByApi(hosted, { email: 'hosted@example.com' });
  t.equal((await invitationMail(hosted, 'hosted@example.com')).link.origin, 'https://gateway.example');
});

t.test('inviting emits member.invited with the invitation, and nothing else happens to the organisation', async (t) => {
  const email = freshEmail('evented');
  const { id } = (await inviteByApi(test, { email, role: 'member' })).json();
  const [event] = (await events('member.invited')).filter((e) => e.subject === id);
  t.match(event, { data: { invitationId: id, email, role: 'member', projects: [], invitedBy: String }, actor: { kind: 'person' } });
});

t.test('an invitation for an email that is already a member is 409 already_member; a second while one is pending is 409 already_invited', async (t) => {
  const member = await joined('member');
  const again = await inviteByApi(test, { email: member.email.toUpperCase() });
  t.equal(again.statusCode, 409);
  t.equal(code(again), 'already_member');
  const email = freshEmail('twice');
  t.equal((await inviteByApi(test, { email })).statusCode, 201);
  const twice = await inviteByApi(test, { email });
  t.equal(twice.statusCode, 409);
  t.match(twice.json().error, { code: 'already_invited', param: 'email' });
});

t.test("a project an invitation names must be the organisation's: 404 project_not_found naming it", async (t) => {
  const response = await inviteByApi(test, { email: freshEmail('projects'), projects: [{ projectId: '00000000-0000-4000-8000-000000000000', role: 'viewer' }] });
  t.equal(response.statusCode, 404);
  t.match(response.json().error, { code: 'project_not_found', param: 'projects.0.projectId' });
});

t.test('a new person accepts: the person, the membership and project roles are created then, a browser session opens, member.joined is emitted', async (t) => {
  const project = (await test.call('POST', '/client/projects', { body: { name: 'Joined project' } })).json();
  const email = freshEmail('newcomer');
  const { token, invitationId } = await invitedToken(test, { email, role: 'member', projects: [{ projectId: project.id, role: 'viewer' }] });
  const page = await acceptPage(test, token);
  t.equal(page.statusCode, 200);
  t.match(page.headers['content-security-policy'], /default-src 'none'/);
  t.match(page.body, /Join My organisation/);
  t.match(page.body, /name="name"/, 'a new person chooses a name');
  const accepted = await submitAcceptForm(test, token, { name: 'Ada Newcomer', password: PASSWORD });
  t.equal(accepted.statusCode, 303, accepted.body);
  t.equal(accepted.headers.location, `/invitations/welcome?organization=${test.organizationId}`);
  const cookie = sessionCookieFrom(accepted);
  const person = (await identity.people.getByEmail(email))!;
  t.match(person, { name: 'Ada Newcomer', defaultOrganizationId: test.organizationId });
  t.match(await identity.memberships.get(test.organizationId, person.id), { role: 'member', status: 'active' });
  t.match(await identity.projectMembers.get(project.id, person.id), { role: 'viewer' });
  const whoami = await test.call('GET', '/client/whoami', { token: null, headers: { cookie } });
  t.match(whoami.json(), { account: { id: test.organizationId }, credential: { type: 'session', email, role: 'member' } });
  const welcome = await test.app.inject({ method: 'GET', url: accepted.headers.location as string, headers: { cookie } });
  t.match(welcome.body, /Signed in as newcomer-\d+@example\.com\. You are member of My organisation/);
  t.equal((await signIn(test, email)).statusCode, 200, 'the password chosen signs in');
  const [event] = (await events('member.joined')).filter((e) => e.data.invitationId === invitationId);
  t.match(event, {
    subject: person.id,
    data: { personId: person.id, email, name: 'Ada Newcomer', role: 'member', projects: [{ projectId: project.id, role: 'viewer' }] },
    actor: { kind: 'person', id: person.id },
  });
  const listed = (await test.call('GET', '/client/employees/invites?status=accepted')).json().data as Array<{ id: string; acceptedAt: string | null }>;
  t.ok(listed.find((i) => i.id === invitationId)?.acceptedAt, 'listed as accepted');
});

t.test('the accept page refuses a password the rules refuse, and a missing name, and the link stays open', async (t) => {
  const email = freshEmail('rules');
  const { token } = await invitedToken(test, { email });
  const short = await submitAcceptForm(test, token, { name: 'Short', password: 'too short' });
  t.equal(short.statusCode, 400);
  t.match(short.body, /at least 12 characters/);
  const nameless = await submitAcceptForm(test, token, { name: '  ', password: PASSWORD });
  t.equal(nameless.statusCode, 400);
  t.equal(await identity.people.getByEmail(email), null);
  t.equal((await submitAcceptForm(test, token, { name: 'Fine', password: PASSWORD })).statusCode, 303);
});

t.test('a form without its CSRF token, or from another site, is refused and changes nothing', async (t) => {
  const email = freshEmail('forged');
  const { token } = await invitedToken(test, { email });
  const forged = await test.app.inject({
    method: 'POST',
    url: '/invitations/accept',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example' },
    payload: new URLSearchParams({ token, name: 'Forged', password: PASSWORD, csrf_token: 'x'.repeat(43) }).toString(),
  });
  t.equal(forged.statusCode, 403);
  t.equal(await identity.people.getByEmail(email), null);
});

t.test('a used, revoked, expired or unknown link is refused on the page and on the form, and nothing happens', async (t) => {
  const used = await invitedToken(test, { email: freshEmail('used') });
  t.equal((await submitAcceptForm(test, used.token, { name: 'Used', password: PASSWORD })).statusCode, 303);
  const revoked = await invitedToken(test, { email: freshEmail('revoked') });
  t.equal((await test.call('DELETE', `/client/employees/invites/${revoked.invitationId}`)).statusCode, 200);
  const expiredEmail = freshEmail('expired');
  const expired = await invitedToken(test, { email: expiredEmail });
  now += 169 * 3_600_000;
  try {
    for (const [what, token, status, text] of [
      ['used', used.token, 410, /already accepted/],
      ['revoked', revoked.token, 410, /revoked/],
      ['expired', expired.token, 410, /expired/],
      ['unknown', `svc_inv_${'A'.repeat(43)}`, 404, /not valid/],
      ['malformed', 'nonsense', 404, /not valid/],
    ] as const) {
      const page = await acceptPage(test, token);
      t.equal(page.statusCode, status, `${what}: the page`);
      t.match(page.body, text, what);
      t.notMatch(page.body, /<form/, `${what}: no form`);
    }
    // The form, posted with a good CSRF token (from an open invitation's page) and a closed link.
    const open = await acceptPage(test, (await invitedToken(test, { email: freshEmail('open') })).token);
    const csrf = /name="csrf_token" value="([^"]+)"/.exec(open.body)![1]!;
    const cookie = String(open.headers['set-cookie']).split(';')[0]!;
    for (const [what, token] of [
      ['revoked', revoked.token],
      ['expired', expired.token],
    ] as const) {
      const posted = await test.app.inject({
        method: 'POST',
        url: '/invitations/accept',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
        payload: new URLSearchParams({ csrf_token: csrf, token, name: 'Late', password: PASSWORD }).toString(),
      });
      t.equal(posted.statusCode, 410, `${what}: the form`);
      t.notOk(posted.headers['set-cookie'], `${what}: no session`);
    }
    t.equal(await identity.people.getByEmail(expiredEmail), null);
  } finally {
    now -= 169 * 3_600_000;
  }
});

t.test('a link used by a form posted after it was spent answers the page of a spent link', async (t) => {
  const { token } = await invitedToken(test, { email: freshEmail('raced') });
  const page = await acceptPage(test, token);
  const csrf = /name="csrf_token" value="([^"]+)"/.exec(page.body)![1]!;
  const cookie = String(page.headers['set-cookie']).split(';')[0]!;
  const post = () =>
    test.app.inject({
      method: 'POST',
      url: '/invitations/accept',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
      payload: new URLSearchParams({ csrf_token: csrf, token, name: 'Raced', password: PASSWORD }).toString(),
    });
  t.equal((await post()).statusCode, 303);
  const second = await post();
  t.equal(second.statusCode, 410);
  t.notOk(second.headers['set-cookie'], 'no session for the second');
});

t.test('pending invitations are listed, newest first, filtered by status; an admin lists them, a member may not', async (t) => {
  const first = (await inviteByApi(test, { email: freshEmail('listed') })).json();
  now += 1000;
  const second = (await inviteByApi(test, { email: freshEmail('listed') })).json();
  const pending = (await test.call('GET', '/client/employees/invites?status=pending&limit=200')).json().data as Array<{ id: string; status: string }>;
  t.ok(
    pending.every((i) => i.status === 'pending'),
    'only pending ones',
  );
  t.same(
    pending.filter((i) => i.id === first.id || i.id === second.id).map((i) => i.id),
    [second.id, first.id],
  );
  const admin = await personAs('admin');
  t.equal((await test.call('GET', '/client/employees/invites', { token: admin.token })).statusCode, 200);
  const member = await personAs('member');
  const refused = await test.call('GET', '/client/employees/invites', { token: member.token });
  t.equal(refused.statusCode, 403);
  t.equal(code(refused), 'role_required');
});

t.test('resending mails a new link with a new expiry; the old link stops working', async (t) => {
  const email = freshEmail('resent');
  const { invitationId, token: old } = await invitedToken(test, { email });
  now += 3_600_000;
  try {
    const resent = await test.call('POST', `/client/employees/invites/${invitationId}/resend`);
    t.equal(resent.statusCode, 200, resent.body);
    t.match(resent.json(), { status: 'pending', sentAt: new Date(now).toISOString(), expiresAt: new Date(now + 168 * 3_600_000).toISOString() });
    const { token: fresh } = await invitationMail(test, email);
    t.not(fresh, old);
    t.equal((await acceptPage(test, old)).statusCode, 404, 'the old link names nothing');
    t.equal((await acceptPage(test, fresh)).statusCode, 200);
  } finally {
    now -= 3_600_000;
  }
});

t.test('an expired invitation reads as expired; resending makes it pending again', async (t) => {
  const email = freshEmail('lapsed');
  const { invitationId } = await invitedToken(test, { email });
  now += 169 * 3_600_000;
  try {
    const expired = (await test.call('GET', '/client/employees/invites?status=expired&limit=200')).json().data as Array<{ id: string }>;
    t.ok(
      expired.some((i) => i.id === invitationId),
      'listed as expired',
    );
    const resent = await test.call('POST', `/client/employees/invites/${invitationId}/resend`);
    t.equal(resent.json().status, 'pending');
    t.equal((await acceptPage(test, (await invitationMail(test, email)).token)).statusCode, 200);
  } finally {
    now -= 169 * 3_600_000;
  }
});

t.test('a new invitation to an email whose invitation expired replaces it', async (t) => {
  const email = freshEmail('replaced');
  const { invitationId } = await invitedToken(test, { email });
  now += 169 * 3_600_000;
  try {
    t.equal((await inviteByApi(test, { email })).statusCode, 201);
    const resend = await test.call('POST', `/client/employees/invites/${invitationId}/resend`);
    t.equal(resend.statusCode, 409);
    t.equal(code(resend), 'invitation_not_pending');
  } finally {
    now -= 169 * 3_600_000;
  }
});

t.test('revoking kills the link and keeps the invitation listed; again answers it unchanged; an accepted one is 409', async (t) => {
  const { invitationId, token } = await invitedToken(test, { email: freshEmail('revoke') });
  const revoked = await test.call('DELETE', `/client/employees/invites/${invitationId}`);
  t.match(revoked.json(), { id: invitationId, status: 'revoked', revokedAt: new Date(now).toISOString() });
  t.equal((await test.call('DELETE', `/client/employees/invites/${invitationId}`)).json().status, 'revoked');
  t.equal((await acceptPage(test, token)).statusCode, 410);
  const accepted = await invitedToken(test, { email: freshEmail('revoke-late') });
  await submitAcceptForm(test, accepted.token, { name: 'Late', password: PASSWORD });
  const late = await test.call('DELETE', `/client/employees/invites/${accepted.invitationId}`);
  t.equal(late.statusCode, 409);
  t.equal(code(late), 'invitation_not_pending');
  t.equal(code(await test.call('DELETE', '/client/employees/invites/00000000-0000-4000-8000-000000000000')), 'invitation_not_found');
});

t.test('a member reads the people list but cannot invite, change roles or remove people (403 role_required)', async (t) => {
  const member = await joined('member');
  const listed = await test.call('GET', '/client/employees', { token: member.bearer });
  t.equal(listed.statusCode, 200);
  t.ok((listed.json().data as Array<{ id: string }>).some((p) => p.id === member.personId));
  for (const [method, url, body] of [
    ['POST', '/client/employees', { email: freshEmail('by-member') }],
    ['PATCH', `/client/employees/${member.personId}`, { role: 'admin' }],
    ['DELETE', `/client/employees/${member.personId}`, undefined],
  ] as const) {
    const response = await test.call(method, url, { token: member.bearer, ...(body ? { body } : {}) });
    t.equal(response.statusCode, 403, `${method} ${url}`);
    t.equal(code(response), 'role_required');
  }
});

t.test('an API key, even holding every scope, neither lists nor manages people', async (t) => {
  const key = (await createKey(test, { name: 'people key', scopes: [...SCOPES] })).key;
  for (const [method, url] of [
    ['GET', '/client/employees'],
    ['GET', '/client/employees/invites'],
    ['POST', '/client/employees'],
  ] as const) {
    const response = await test.call(method, url, { token: key, ...(method === 'POST' ? { body: { email: freshEmail('by-key') } } : {}) });
    t.equal(response.statusCode, 403, `${method} ${url}`);
    t.equal(code(response), 'role_required');
  }
});

t.test('an admin invites members and admins, not owners; only an owner gives or takes the owner role', async (t) => {
  const admin = await joined('admin');
  t.equal((await inviteByApi(test, { email: freshEmail('by-admin'), role: 'admin' }, admin.bearer)).statusCode, 201);
  const owner = await inviteByApi(test, { email: freshEmail('owner-by-admin'), role: 'owner' }, admin.bearer);
  t.equal(owner.statusCode, 403);
  t.match(owner.json().error, { code: 'owner_required', param: 'role' });
  const member = await joined('member');
  const promote = await test.call('PATCH', `/client/employees/${member.personId}`, { token: admin.bearer, body: { role: 'owner' } });
  t.equal(code(promote), 'owner_required');
  t.equal((await test.call('PATCH', `/client/employees/${member.personId}`, { token: admin.bearer, body: { role: 'admin' } })).json().role, 'admin');
  const coOwner = await joined('owner');
  t.equal(code(await test.call('PATCH', `/client/employees/${coOwner.personId}`, { token: admin.bearer, body: { role: 'member' } })), 'owner_required');
  t.equal(code(await test.call('DELETE', `/client/employees/${coOwner.personId}`, { token: admin.bearer })), 'owner_required');
  const ownerInvite = (await inviteByApi(test, { email: freshEmail('owner-invite'), role: 'owner' })).json();
  t.equal(code(await test.call('DELETE', `/client/employees/invites/${ownerInvite.id}`, { token: admin.bearer })), 'owner_required');
  t.equal(code(await test.call('POST', `/client/employees/invites/${ownerInvite.id}/resend`, { token: admin.bearer })), 'owner_required');
  t.equal((await test.call('DELETE', `/client/employees/${coOwner.personId}`)).statusCode, 200, 'an owner removes an owner');
});

t.test('a role change holds from the next request, emits member.role_changed, and the same role again says nothing', async (t) => {
  const member = await joined('member');
  t.equal((await test.call('GET', '/client/whoami', { token: member.bearer })).json().credential.role, 'member', 'cached as member');
  const changed = await test.call('PATCH', `/client/employees/${member.personId}`, { body: { role: 'admin' } });
  t.match(changed.json(), { object: 'employee', id: member.personId, role: 'admin', email: member.email });
  t.equal((await test.call('GET', '/client/whoami', { token: member.bearer })).json().credential.role, 'admin');
  t.equal((await test.call('PATCH', `/client/employees/${member.personId}`, { body: { role: 'admin' } })).statusCode, 200);
  const changes = (await events('member.role_changed')).filter((e) => e.subject === member.personId);
  t.same(
    changes.map((e) => [e.data.previousRole, e.data.role]),
    [['member', 'admin']],
  );
});

t.test('the last owner can be neither demoted nor removed (409 last_owner); with a second owner both can', async (t) => {
  const separate = await buildTestApp(t, { deriveKey: fastDeriveKey });
  const ownerId = (await separate.call('GET', '/client/whoami')).json().credential.personId;
  const demote = await separate.call('PATCH', `/client/employees/${ownerId}`, { body: { role: 'admin' } });
  t.equal(demote.statusCode, 409);
  t.match(demote.json().error, { code: 'last_owner', type: 'conflict_error' });
  t.equal(code(await separate.call('DELETE', `/client/employees/${ownerId}`)), 'last_owner');
  const second = await addPerson(separate, { role: 'owner' });
  t.equal((await separate.call('PATCH', `/client/employees/${ownerId}`, { token: second.token, body: { role: 'admin' } })).statusCode, 200);
  t.equal(code(await separate.call('DELETE', `/client/employees/${second.personId}`, { token: second.token })), 'last_owner', 'now the second is the last');
});

t.test('removal ends the membership and the project roles here, emits member.removed with them, and the person may be invited again', async (t) => {
  const member = await joined('member');
  await identity.projectMembers.upsert({ projectId: test.defaultProjectId, personId: member.personId, role: 'developer' });
  const removed = await test.call('DELETE', `/client/employees/${member.personId}`);
  t.same(removed.json(), { object: 'ack', ok: true, id: member.personId });
  t.equal(await identity.memberships.get(test.organizationId, member.personId), null);
  t.equal(await identity.projectMembers.get(test.defaultProjectId, member.personId), null);
  const [event] = (await events('member.removed')).filter((e) => e.subject === member.personId);
  t.match(event?.data, { personId: member.personId, email: member.email, role: 'member', projects: [{ projectId: test.defaultProjectId, role: 'developer' }] });
  t.equal(code(await test.call('DELETE', `/client/employees/${member.personId}`)), 'employee_not_found');
  t.ok(await identity.people.get(member.personId), 'the account stays');
  t.equal((await inviteByApi(test, { email: member.email })).statusCode, 201, 'invited again');
});

t.test("a removed person's sessions stop acting in the organisation at once, while their other organisation still works", async (t) => {
  const member = await joined('member');
  const other = await createOrganizationWithOwner(db, test.app.svc.container.resolve(Tokens.IdentityFactory), {
    name: 'Elsewhere',
    ownerEmail: freshEmail('elsewhere-owner'),
    ownerName: 'E',
  });
  await identity.memberships.add({ organizationId: other.organization.id, personId: member.personId, role: 'admin' });
  t.equal((await test.call('GET', '/client/whoami', { token: member.bearer })).json().account.id, test.organizationId, 'acting here, cached');
  t.equal((await test.call('DELETE', `/client/employees/${member.personId}`)).statusCode, 200);
  const after = await test.call('GET', '/client/whoami', { token: member.bearer });
  t.match(after.json(), { account: { id: other.organization.id }, credential: { role: 'admin' } }, 'the same session now acts in their other organisation');
  const listed = (await test.call('GET', '/client/employees', { token: member.bearer })).json().data as Array<{ id: string }>;
  t.notOk(
    listed.some((p) => p.id === test.app.svc.bootstrap!.personId),
    "this organisation's people are out of reach",
  );
  t.equal((await test.call('GET', '/client/whoami', { token: null, headers: { cookie: member.cookie } })).json().account.id, other.organization.id, 'the browser session too');
});

t.test('a person in no other organisation is refused once removed (401 no_organization)', async (t) => {
  const member = await joined('member');
  await test.call('DELETE', `/client/employees/${member.personId}`);
  const after = await test.call('GET', '/client/whoami', { token: member.bearer });
  t.equal(after.statusCode, 401);
  t.equal(code(after), 'no_organization');
});

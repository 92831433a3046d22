import t from 'tap';
import type { AppConfigInput } from '../../config/schema.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { fastDeriveKey, invite, PASSWORD, signedInPerson, signIn } from '../helpers/people.ts';

/**
 * One app for the tests that need no settings of their own (each builds in seconds on PGlite).
 * They all set passwords from one address, more often than set-password's limit per address allows,
 * and hash with a fast stand-in for scrypt (the log test below and password-hashing.test.ts use scrypt).
 */
let sharedApp: Promise<TestApp> | null = null;
const shared = () => (sharedApp ??= buildTestApp(t, { config: { auth: { setPasswordAttemptsPerIp: 1000 } }, deriveKey: fastDeriveKey }));

const withCookie = (cookie: string, headers: Record<string, string> = {}) => ({ token: null, headers: { cookie, ...headers } });

t.test('a person mailed a set-password token sets a password and signs in with a session cookie', async (t) => {
  const test = await shared();
  const token = await invite(test, 'ada@example.com');
  const set = await test.call('POST', '/client/auth/set-password', { token: null, body: { token, password: PASSWORD } });
  t.equal(set.statusCode, 200, set.body);
  const response = await signIn(test, 'Ada@Example.com');
  t.equal(response.statusCode, 200, response.body);
  const body = response.json();
  t.equal(body.person.email, 'ada@example.com');
  t.match(body.csrfToken, /^[A-Za-z0-9_-]{43}$/);
  const cookie = String(response.headers['set-cookie']);
  t.match(cookie, /^svc_session=svc_sess_[A-Za-z0-9]{43}; /);
  t.match(cookie, /; Path=\//);
  t.match(cookie, /; HttpOnly/);
  t.match(cookie, /; SameSite=Lax/);
  t.match(cookie, new RegExp(`; Max-Age=${test.config.auth.sessionTtlDays * 86_400}`));
  t.notMatch(cookie, /Secure/, 'a request to localhost without a publicUrl gets no Secure flag');
});

t.test('the session cookie is Secure when the public URL is https', async (t) => {
  const test = await buildTestApp(t, { config: { server: { publicUrl: 'https://gateway.example' } } });
  const { setCookie } = await signedInPerson(test, 'sec@example.com');
  t.match(setCookie, /; Secure/);
});

t.test('a set-password token works once and passwords follow the rules', async (t) => {
  const test = await shared();
  const token = await invite(test, 'rules@example.com');
  const setPassword = (password: string) => test.call('POST', '/client/auth/set-password', { token: null, body: { token, password } });
  t.equal((await setPassword('short pass')).json().error.code, 'password_too_short');
  t.equal((await setPassword('x'.repeat(257))).json().error.code, 'password_too_long');
  t.equal((await setPassword('RULES@example.com')).json().error.code, 'password_is_email');
  t.equal((await setPassword(PASSWORD)).statusCode, 200, 'a refused password leaves the token usable');
  const again = await setPassword('another long password');
  t.equal(again.statusCode, 400);
  t.equal(again.json().error.code, 'invalid_token');
});

t.test('the cookie session works on /client/whoami and other reads', async (t) => {
  const test = await shared();
  const { cookie, csrf } = await signedInPerson(test, 'reader@example.com');
  const whoami = await test.call('GET', '/client/whoami', withCookie(cookie));
  t.equal(whoami.statusCode, 200, whoami.body);
  t.equal(whoami.json().credential.email, 'reader@example.com');
  const projects = await test.call('GET', '/client/projects', withCookie(cookie));
  t.equal(projects.statusCode, 200, projects.body);
  const session = await test.call('GET', '/client/auth/session', withCookie(cookie));
  t.equal(session.statusCode, 200, session.body);
  t.equal(session.json().csrfToken, csrf, 'the session hands out the same CSRF token as sign-in');
});

t.test('a cookie-authenticated write needs the x-csrf-token header', async (t) => {
  const test = await shared();
  const { cookie, csrf } = await signedInPerson(test, 'writer@example.com');
  const body = { organizationId: test.organizationId };
  const without = await test.call('POST', '/client/organizations/default', { ...withCookie(cookie), body });
  t.equal(without.statusCode, 403);
  t.equal(without.json().error.code, 'csrf_failed');
  const wrong = await test.call('POST', '/client/organizations/default', { ...withCookie(cookie, { 'x-csrf-token': 'not-the-token' }), body });
  t.equal(wrong.json().error.code, 'csrf_failed');
  const right = await test.call('POST', '/client/organizations/default', { ...withCookie(cookie, { 'x-csrf-token': csrf }), body });
  t.equal(right.statusCode, 200, right.body);
});

t.test('a cross-origin write with the cookie is refused even with the CSRF token', async (t) => {
  const test = await shared();
  const { cookie, csrf } = await signedInPerson(test, 'cross@example.com');
  const body = { organizationId: test.organizationId };
  const foreign = await test.call('POST', '/client/organizations/default', { ...withCookie(cookie, { 'x-csrf-token': csrf, origin: 'https://evil.example' }), body });
  t.equal(foreign.statusCode, 403);
  t.equal(foreign.json().error.code, 'csrf_failed');
  const fetched = await test.call('POST', '/client/organizations/default', { ...withCookie(cookie, { 'x-csrf-token': csrf, 'sec-fetch-site': 'cross-site' }), body });
  t.equal(fetched.json().error.code, 'csrf_failed');
  const own = await test.call('POST', '/client/organizations/default', { ...withCookie(cookie, { 'x-csrf-token': csrf, origin: 'http://localhost:80' }), body });
  t.equal(own.statusCode, 200, own.body);
});

t.test('Bearer-authenticated writes are not subject to the CSRF check', async (t) => {
  const test = await shared();
  const response = await test.call('POST', '/client/organizations/default', { body: { organizationId: test.organizationId }, headers: { origin: 'https://evil.example' } });
  t.equal(response.statusCode, 200, response.body);
});

t.test('the session cookie does not work on /v1', async (t) => {
  const test = await shared();
  const { cookie } = await signedInPerson(test, 'v1@example.com');
  const response = await test.call('GET', '/v1/models', withCookie(cookie));
  t.equal(response.statusCode, 401);
  t.equal(response.json().error.code, 'api_key_required');
});

t.test('a wrong password and an unknown email get the same 401', async (t) => {
  const test = await shared();
  await signedInPerson(test, 'known@example.com');
  const wrong = await signIn(test, 'known@example.com', 'wrong password here');
  const unknown = await signIn(test, 'nobody@example.com', 'wrong password here');
  const invitedOnly = await (async () => {
    await invite(test, 'pending@example.com');
    return signIn(test, 'pending@example.com', 'wrong password here');
  })();
  for (const response of [wrong, unknown, invitedOnly]) {
    t.equal(response.statusCode, 401);
    t.same(response.json(), wrong.json());
    t.notOk(response.headers['set-cookie']);
  }
});

t.test('sign-in attempts are limited per client address and email, and per address', async (t) => {
  const config: AppConfigInput = { auth: { signInAttemptsPerAddressAndEmail: 3, signInAttemptsPerIp: 4 } };
  const test = await buildTestApp(t, { config, deriveKey: fastDeriveKey });
  await signedInPerson(test, 'target@example.com'); // one attempt (the successful sign-in)
  const statuses = [];
  for (let i = 0; i < 3; i++) statuses.push((await signIn(test, 'target@example.com', 'guessing wrongly')).statusCode);
  t.same(statuses, [401, 401, 429], 'the fourth attempt on one email from one address is refused');
  const limited = await signIn(test, 'target@example.com');
  t.equal(limited.statusCode, 429, 'even with the right password');
  t.equal(limited.json().error.code, 'too_many_sign_in_attempts');
  t.match(limited.headers['retry-after'], /^\d+$/);
  // The address has spent 3 of its 4 (refused attempts take nothing): one more email, then refused.
  t.equal((await signIn(test, 'other@example.com', 'guessing wrongly')).statusCode, 401);
  t.equal((await signIn(test, 'third@example.com', 'guessing wrongly')).statusCode, 429);
});

t.test('sign-out ends the session and clears the cookie', async (t) => {
  const test = await shared();
  const { cookie, csrf } = await signedInPerson(test, 'leaver@example.com');
  const out = await test.call('POST', '/client/auth/sign-out', withCookie(cookie, { 'x-csrf-token': csrf }));
  t.equal(out.statusCode, 200, out.body);
  t.match(String(out.headers['set-cookie']), /^svc_session=; .*Max-Age=0/);
  const after = await test.call('GET', '/client/whoami', withCookie(cookie));
  t.equal(after.statusCode, 401);
  t.equal(after.json().error.code, 'session_revoked');
});

t.test('sign-out everywhere ends every session of the person, Bearer ones too', async (t) => {
  const test = await shared();
  const first = await signedInPerson(test, 'many@example.com');
  const second = await signIn(test, 'many@example.com');
  const secondCookie = String(second.headers['set-cookie']).split(';')[0]!;
  const out = await test.call('POST', '/client/auth/sign-out-everywhere', withCookie(first.cookie, { 'x-csrf-token': first.csrf }));
  t.equal(out.statusCode, 200, out.body);
  t.equal(out.json().sessionsEnded, 2);
  t.equal((await test.call('GET', '/client/whoami', withCookie(secondCookie))).json().error.code, 'session_revoked');
  t.equal((await test.call('GET', '/client/whoami')).statusCode, 200, "another person's session is untouched");
});

t.test('a Bearer session token is not accepted as a cookie', async (t) => {
  const test = await shared();
  const response = await test.call('GET', '/client/whoami', withCookie(`svc_session=${test.ownerToken}`));
  t.equal(response.statusCode, 401);
  t.equal(response.json().error.code, 'invalid_session');
});

t.test('passwords appear neither in the process log nor in clear in the database', async (t) => {
  const lines: string[] = [];
  const test = await buildTestApp(t, { config: { server: { logLevel: 'trace' } }, logStream: { write: (line) => void lines.push(line) } });
  await signedInPerson(test, 'secretive@example.com');
  await signIn(test, 'secretive@example.com', 'a wrong password we typed');
  await test.call('POST', '/client/auth/sign-in', { token: null, body: '{"email": "x@example.com", "password": "broken json', headers: { 'content-type': 'application/json' } });
  const log = lines.join('');
  t.ok(lines.length > 0, 'the log was captured');
  t.notMatch(log, PASSWORD);
  t.notMatch(log, 'a wrong password we typed');
  const db = test.app.svc.container.resolve(Tokens.Database);
  const { rows } = await db.query<{ password_hash: string }>('SELECT password_hash FROM people WHERE email = $1', ['secretive@example.com']);
  t.match(rows[0]!.password_hash, /^scrypt\$N=32768,r=8,p=3\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
  const { rows: all } = await db.query('SELECT p.*, s.* FROM people p LEFT JOIN sessions s ON s.person_id = p.id');
  t.notMatch(JSON.stringify(all), PASSWORD);
});

t.test('a sign-in another site submits is refused', async (t) => {
  const test = await shared();
  await signedInPerson(test, 'lured@example.com');
  const response = await signIn(test, 'lured@example.com', PASSWORD, { origin: 'https://evil.example' });
  t.equal(response.statusCode, 403);
  t.equal(response.json().error.code, 'csrf_failed');
  t.notOk(response.headers['set-cookie']);
});

t.test("a first password ends none of the person's sessions: the first start's owner token keeps working", async (t) => {
  const test = await buildTestApp(t, { deriveKey: fastDeriveKey });
  const token = test.app.svc.bootstrap?.setPasswordToken;
  if (!token) throw new Error('the first start made no set-password token');
  const set = await test.call('POST', '/client/auth/set-password', { token: null, body: { token, password: PASSWORD } });
  t.equal(set.statusCode, 200, set.body);
  t.equal((await test.call('GET', '/client/whoami')).statusCode, 200, 'the owner token still works');
  t.equal((await signIn(test, test.config.bootstrap.ownerEmail)).statusCode, 200);
});

t.test('setting a password with a new token ends the earlier sessions', async (t) => {
  const test = await shared();
  const { cookie } = await signedInPerson(test, 'reset@example.com');
  const token = await invite(test, 'reset@example.com');
  const set = await test.call('POST', '/client/auth/set-password', { token: null, body: { token, password: 'a brand new long password' } });
  t.equal(set.statusCode, 200, set.body);
  t.equal((await test.call('GET', '/client/whoami', withCookie(cookie))).json().error.code, 'session_revoked');
  t.equal((await signIn(test, 'reset@example.com', 'a brand new long password')).statusCode, 200);
});

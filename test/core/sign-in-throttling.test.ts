import t, { type Test } from 'tap';
import type { AppConfigInput } from '../../config/schema.ts';
import { PASSWORD_TOKEN_PREFIX } from '../../core/identity-admin.ts';
import { PasswordHasher } from '../../core/passwords.ts';
import { generateToken } from '../../core/secrets.ts';
import { Tokens } from '../../core/tokens.ts';
import { buildTestApp, realServersConfig, type TestApp } from '../helpers/app.ts';
import { fastDeriveKey, invite, PASSWORD } from '../helpers/people.ts';

/** Hashing is not the subject here: a fast stand-in keeps a hundred attempts quick (password-hashing.test.ts has scrypt). */
const build = (t: Test, config: AppConfigInput) => buildTestApp(t, { config, deriveKey: fastDeriveKey });

/** Runs a behaviour on the embedded backends, and on PostgreSQL + Redis when the test servers are set. */
function onEachBackend(name: string, run: (t: Test, config: AppConfigInput) => Promise<void>): void {
  t.test(`${name} (PGlite, in-memory counters)`, (t) => run(t, {}));
  const servers = realServersConfig() !== null;
  t.test(`${name} (PostgreSQL, Redis)`, { skip: servers ? false : 'skipped PostgreSQL + Redis: needs TEST_PG_URL and TEST_REDIS_URL' }, async (t) => {
    const real = realServersConfig()!;
    t.teardown(() => real.dropSchema());
    await run(t, { storage: real.storage });
  });
}

const signInFrom = (test: TestApp, remoteAddress: string, email: string, password = PASSWORD) =>
  test.app.inject({ method: 'POST', url: '/client/auth/sign-in', remoteAddress, payload: { email, password } });

const setPasswordFrom = (test: TestApp, remoteAddress: string, token: string, password = PASSWORD) =>
  test.app.inject({ method: 'POST', url: '/client/auth/set-password', remoteAddress, payload: { token, password } });

/** Invites the person and sets their password from `address`, then signs in there once (which makes it theirs). */
async function personAt(test: TestApp, address: string, email: string): Promise<void> {
  const set = await setPasswordFrom(test, address, await invite(test, email));
  if (set.statusCode !== 200) throw new Error(`set-password failed: ${set.body}`);
  const signedIn = await signInFrom(test, address, email);
  if (signedIn.statusCode !== 200) throw new Error(`sign-in failed: ${signedIn.body}`);
}

onEachBackend("a stranger's hundred wrong passwords do not stop the person signing in from their own address", async (t, config) => {
  const test = await build(t, config);
  await personAt(test, '10.0.0.1', 'victim@example.com');
  const statuses: number[] = [];
  for (let i = 0; i < 100; i++) statuses.push((await signInFrom(test, '203.0.113.9', 'victim@example.com', `guess number ${i} wrong`)).statusCode);
  t.same(statuses.slice(0, 10), Array(10).fill(401), 'the stranger gets ten tries at this email from their address');
  t.same(statuses.slice(10), Array(90).fill(429), 'then the stranger is throttled');
  const own = await signInFrom(test, '10.0.0.1', 'victim@example.com');
  t.equal(own.statusCode, 200, own.body);
});

onEachBackend('guesses spread over many addresses are capped per email, but not at the addresses the person signed in from', async (t, config) => {
  const test = await build(t, { ...config, auth: { signInAttemptsPerEmail: 5 } });
  await personAt(test, '10.0.0.1', 'spread@example.com');
  const statuses: number[] = [];
  for (let i = 1; i <= 6; i++) statuses.push((await signInFrom(test, `198.51.100.${i}`, 'spread@example.com', 'a wrong guess here')).statusCode);
  // The person's own first sign-in, from an address new then, took one of the five.
  t.same(statuses, [401, 401, 401, 401, 429, 429], 'four more from new addresses, then the email is closed to new addresses');
  const elsewhere = await signInFrom(test, '10.0.0.2', 'spread@example.com');
  t.equal(elsewhere.statusCode, 429, 'an address the person never used is throttled like any other');
  t.equal(elsewhere.json().error.code, 'too_many_sign_in_attempts');
  t.match(elsewhere.headers['retry-after'], /^\d+$/);
  const own = await signInFrom(test, '10.0.0.1', 'spread@example.com');
  t.equal(own.statusCode, 200, own.body);
  const afterwards = await signInFrom(test, '10.0.0.2', 'spread@example.com');
  t.equal(afterwards.statusCode, 200, "the person's own sign-in refilled the email's allowance");
});

onEachBackend('sign-in attempts from one address are limited across emails', async (t, config) => {
  const test = await build(t, { ...config, auth: { signInAttemptsPerIp: 3 } });
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) statuses.push((await signInFrom(test, '192.0.2.7', `sprayed${i}@example.com`, 'a common password')).statusCode);
  t.same(statuses, [401, 401, 401, 429]);
});

onEachBackend('150 wrong set-password tokens from one address are answered 429 after the first ten', async (t, config) => {
  const test = await build(t, config);
  const answers: Array<{ status: number; code: string; retryAfter: unknown }> = [];
  for (let i = 0; i < 150; i++) {
    const response = await setPasswordFrom(test, '203.0.113.50', generateToken(PASSWORD_TOKEN_PREFIX));
    answers.push({ status: response.statusCode, code: response.json().error?.code, retryAfter: response.headers['retry-after'] });
  }
  t.same(new Set(answers.slice(0, 10).map((a) => a.code)), new Set(['invalid_token']));
  const refused = answers.slice(10);
  t.same(new Set(refused.map((a) => `${a.status} ${a.code}`)), new Set(['429 too_many_set_password_attempts']));
  t.ok(
    refused.every((a) => typeof a.retryAfter === 'string' && /^\d+$/.test(a.retryAfter)),
    'each refusal says when to retry',
  );
  const token = await invite(test, 'fresh@example.com');
  t.equal((await setPasswordFrom(test, '10.0.0.3', token)).statusCode, 200, 'another address is not affected');
});

onEachBackend('one set-password token is throttled whatever address it comes from', async (t, config) => {
  const test = await build(t, { ...config, auth: { setPasswordAttemptsPerToken: 3 } });
  const token = await invite(test, 'fumbler@example.com');
  const codes: string[] = [];
  for (let i = 1; i <= 4; i++) codes.push((await setPasswordFrom(test, `198.51.100.${i}`, token, 'too short')).json().error.code);
  t.same(codes, ['password_too_short', 'password_too_short', 'password_too_short', 'too_many_set_password_attempts']);
});

onEachBackend('a password hash made with older parameters is verified with them and upgraded at the next sign-in', async (t, config) => {
  const test = await build(t, config);
  await personAt(test, '10.0.0.1', 'old@example.com');
  const identity = test.app.svc.container.resolve(Tokens.Identity);
  const person = (await identity.people.getByEmail('old@example.com'))!;
  const before = new PasswordHasher({ concurrency: 1, maxWaiting: 0, cost: { N: 2 ** 15, r: 8, p: 1 }, derive: fastDeriveKey });
  const oldHash = await before.hash(PASSWORD);
  await identity.people.setPasswordHash(person.id, oldHash);

  t.equal((await signInFrom(test, '10.0.0.1', 'old@example.com', 'not the password at all')).statusCode, 401);
  t.equal(await identity.people.passwordHashOf(person.id), oldHash, 'a wrong password changes nothing');
  const signedIn = await signInFrom(test, '10.0.0.1', 'old@example.com');
  t.equal(signedIn.statusCode, 200, signedIn.body);
  const upgraded = await identity.people.passwordHashOf(person.id);
  t.match(upgraded, /^scrypt\$N=32768,r=8,p=3\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
  t.equal((await signInFrom(test, '10.0.0.1', 'old@example.com')).statusCode, 200, 'the upgraded hash verifies the same password');
});

import { createHash } from 'node:crypto';
import { SqlMailOutbox } from '../../adapters/sql/mail-outbox.ts';
import { addPersonTo, mailSetPasswordToken } from '../../core/identity/identity-admin.ts';
import type { DeriveKey } from '../../core/identity/passwords.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import type { Test } from 'tap';
import type { AppConfigInput } from '../../config/schema.ts';
import { realServersConfig, type TestApp } from './app.ts';

export const PASSWORD = 'correct horse battery staple';

/**
 * A stand-in for scrypt (buildTestApp's `deriveKey`) where hashing is not what a test is about: a
 * SHA-256 of the salt, the parameters and the password, so hashes still differ by all three, in
 * microseconds instead of a tenth of a second on a loaded machine.
 */
export const fastDeriveKey: DeriveKey = async (password, salt, cost) => createHash('sha256').update(salt).update(`${cost.N},${cost.r},${cost.p}\n`).update(password).digest();

/**
 * Adds a person to the test organisation and mails them a set-password token, the way an operator's
 * `npm run cli -- people add` then `people reset-password` do, and reads the token from their mail.
 */
export async function invite(test: TestApp, email: string, role: 'owner' | 'admin' | 'member' = 'owner'): Promise<string> {
  const { container } = test.app.svc;
  const db = container.resolve(Tokens.Database);
  const storesFor = container.resolve(Tokens.IdentityFactory);
  await addPersonTo(storesFor(db), { organizationId: test.organizationId, email, name: email, role });
  await mailSetPasswordToken(db, storesFor, container.resolve(Tokens.Mailer), { email, baseUrl: 'https://gateway.example', ttlHours: 24, now: new Date() });
  const [mail] = await new SqlMailOutbox(db, test.config.mail.from).read({ to: email });
  const token = /svc_pwd_[A-Za-z0-9]{43}/.exec(mail?.text ?? '')?.[0];
  if (!token) throw new Error(`no set-password token in the mail to ${email}`);
  return token;
}

export async function signIn(test: TestApp, email: string, password = PASSWORD, headers: Record<string, string> = {}) {
  return test.call('POST', '/client/auth/sign-in', { token: null, body: { email, password }, headers });
}

/** Invites, sets the password and signs in: the cookie header and the CSRF token. */
export async function signedInPerson(test: TestApp, email: string): Promise<{ cookie: string; csrf: string; setCookie: string }> {
  const token = await invite(test, email);
  const set = await test.call('POST', '/client/auth/set-password', { token: null, body: { token, password: PASSWORD } });
  if (set.statusCode !== 200) throw new Error(`set-password failed: ${set.body}`);
  const response = await signIn(test, email);
  if (response.statusCode !== 200) throw new Error(`sign-in failed: ${response.body}`);
  const setCookie = String(response.headers['set-cookie']);
  return { cookie: setCookie.split(';')[0]!, csrf: response.json().csrfToken, setCookie };
}

/**
 * Runs a behaviour on the embedded backends (PGlite, in-memory counters), and on PostgreSQL + Redis
 * when TEST_PG_URL and TEST_REDIS_URL are set; without them that run is skipped, saying so.
 */
export function onEachBackend(t: Test, name: string, run: (t: Test, config: AppConfigInput) => Promise<void>): void {
  t.test(`${name} (PGlite, in-memory counters)`, (t) => run(t, {}));
  const skip = realServersConfig() === null ? 'skipped PostgreSQL + Redis: needs TEST_PG_URL and TEST_REDIS_URL' : false;
  t.test(`${name} (PostgreSQL, Redis)`, { skip }, async (t) => {
    const real = realServersConfig()!;
    t.teardown(() => real.dropSchema());
    await run(t, { storage: real.storage });
  });
}

export const signInFrom = (test: TestApp, remoteAddress: string, email: string, password = PASSWORD) =>
  test.app.inject({ method: 'POST', url: '/client/auth/sign-in', remoteAddress, payload: { email, password } });

export const setPasswordFrom = (test: TestApp, remoteAddress: string, token: string, password = PASSWORD) =>
  test.app.inject({ method: 'POST', url: '/client/auth/set-password', remoteAddress, payload: { token, password } });

/** Invites the person and sets their password from `address`, then signs in there once (which makes the address theirs). */
export async function personAt(test: TestApp, address: string, email: string): Promise<void> {
  const set = await setPasswordFrom(test, address, await invite(test, email));
  if (set.statusCode !== 200) throw new Error(`set-password failed: ${set.body}`);
  const signedIn = await signInFrom(test, address, email);
  if (signedIn.statusCode !== 200) throw new Error(`sign-in failed: ${signedIn.body}`);
}

import { SqlMailOutbox } from '../../adapters/sql/mail-outbox.ts';
import { invitePerson } from '../../core/identity-admin.ts';
import { Tokens } from '../../core/tokens.ts';
import type { TestApp } from './app.ts';

export const PASSWORD = 'correct horse battery staple';

/** Invites a person the way `npm run cli -- people invite` does and reads the token from their mail. */
export async function invite(test: TestApp, email: string, role: 'owner' | 'admin' | 'member' = 'owner'): Promise<string> {
  const { container } = test.app.svc;
  const db = container.resolve(Tokens.Database);
  await invitePerson(db, container.resolve(Tokens.IdentityFactory), container.resolve(Tokens.Mailer), {
    organizationId: test.organizationId,
    email,
    role,
    baseUrl: 'https://gateway.example',
    ttlHours: 72,
    now: new Date(),
  });
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

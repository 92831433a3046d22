import type { LightMyRequestResponse } from 'fastify';
import { SqlMailOutbox } from '../../adapters/sql/mail-outbox.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import type { TestApp } from './app.ts';

export type Role = 'owner' | 'admin' | 'member';

/** POST /client/employees as `token` (the owner by default): the response. */
export function inviteByApi(test: TestApp, body: Record<string, unknown>, token?: string): Promise<LightMyRequestResponse> {
  return test.call('POST', '/client/employees', { body, ...(token === undefined ? {} : { token }) });
}

/** The newest invitation mail to `email` in the outbox (read once: its link's token is shown by that read only). */
export async function invitationMail(test: TestApp, email: string): Promise<{ subject: string; text: string; link: URL; token: string }> {
  const outbox = new SqlMailOutbox(test.app.svc.container.resolve(Tokens.Database), test.config.mail.from);
  const [mail] = await outbox.read({ to: email, limit: 1 });
  const link = /https?:\/\/\S+\/invitations\/accept\?token=svc_inv_[A-Za-z0-9]{43}/.exec(mail?.text ?? '')?.[0];
  if (!mail || !link) throw new Error(`no invitation link in the newest mail to ${email}`);
  const url = new URL(link);
  return { subject: mail.subject, text: mail.text, link: url, token: url.searchParams.get('token')! };
}

/** Invites through the API and reads the link's token from the mail. */
export async function invitedToken(test: TestApp, body: { email: string; role?: Role; projects?: unknown[] }, token?: string): Promise<{ invitationId: string; token: string }> {
  const response = await inviteByApi(test, body, token);
  if (response.statusCode !== 201) throw new Error(`invitation failed: ${response.statusCode} ${response.body}`);
  return { invitationId: response.json().id, token: (await invitationMail(test, body.email)).token };
}

/** The accept page for a link. */
export function acceptPage(test: TestApp, token: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return test.app.inject({ method: 'GET', url: `/invitations/accept?token=${encodeURIComponent(token)}`, headers });
}

/**
 * Submits the accept page's form as a browser would: opens the page (for its CSRF cookie and field),
 * then posts `fields` with them. Answers the POST.
 */
export async function submitAcceptForm(test: TestApp, token: string, fields: Record<string, string>): Promise<LightMyRequestResponse> {
  const page = await acceptPage(test, token);
  const csrf = /name="csrf_token" value="([^"]+)"/.exec(page.body)?.[1];
  const cookie = String(page.headers['set-cookie'] ?? '').split(';')[0];
  if (!csrf || !cookie) throw new Error(`the accept page has no form: ${page.statusCode} ${page.body.slice(0, 300)}`);
  return test.app.inject({
    method: 'POST',
    url: '/invitations/accept',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
    payload: new URLSearchParams({ csrf_token: csrf, token, ...fields }).toString(),
  });
}

/** The `svc_session=…` pair a response set, for a Cookie header. */
export function sessionCookieFrom(response: LightMyRequestResponse): string {
  const set = [response.headers['set-cookie'] ?? []].flat().find((cookie) => String(cookie).startsWith('svc_session='));
  if (!set) throw new Error(`no session cookie: ${response.statusCode} ${response.body.slice(0, 300)}`);
  return String(set).split(';')[0]!;
}

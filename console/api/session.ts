import { signal } from '@preact/signals';
import { failureOf } from './errors.ts';

/**
 * The signed-in person as the console knows them. The CSRF token lives here, in memory only:
 * after a reload it is asked for again (`GET /client/auth/session`), never kept in storage.
 */
export interface Session {
  readonly csrfToken: string;
  readonly personId: string;
  readonly email: string;
  readonly role: 'owner' | 'admin' | 'member';
  readonly organizationId: string;
  readonly organizationName: string;
  readonly scopes: ReadonlySet<string>;
}

export const session = signal<Session | null>(null);

/** Set when a call answers 401: the page the person was on, to come back to after signing in again. */
export const expiredAt = signal<string | null>(null);

const JSON_HEADERS = { 'content-type': 'application/json' };

async function readJson(response: Response): Promise<unknown> {
  const text = await response.text();
  return text === '' ? null : JSON.parse(text);
}

/**
 * The session routes (/client/auth/…) are not operations of the OpenAPI document (they set the
 * cookie), so they are called here by hand; everything else goes through the typed client.
 */
async function authCall(method: 'GET' | 'POST', path: string, body?: unknown, csrfToken?: string): Promise<unknown> {
  const headers: Record<string, string> = body === undefined ? {} : { ...JSON_HEADERS };
  if (csrfToken) headers['x-csrf-token'] = csrfToken;
  const response = await fetch(`/client/auth/${path}`, { method, headers, credentials: 'same-origin', ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const parsed = await readJson(response);
  if (!response.ok) throw failureOf(response.status, parsed);
  return parsed;
}

interface Whoami {
  account: { id: string; name: string };
  credential: { type: string; role?: 'owner' | 'admin' | 'member'; personId?: string; email?: string };
  scopes: string[];
}

async function describe(csrfToken: string, asked: Promise<Response> = fetch('/client/whoami', { credentials: 'same-origin' })): Promise<Session> {
  const response = await asked;
  const whoami = (await readJson(response)) as Whoami;
  if (!response.ok) throw failureOf(response.status, whoami);
  const { credential } = whoami;
  if (credential.type !== 'session' || !credential.role || !credential.personId || !credential.email) throw new Error('This console works with a person’s sign-in only');
  return {
    csrfToken,
    personId: credential.personId,
    email: credential.email,
    role: credential.role,
    organizationId: whoami.account.id,
    organizationName: whoami.account.name,
    scopes: new Set(whoami.scopes),
  };
}

/** After a reload: the cookie's session, if there is one. */
export async function resumeSession(): Promise<Session | null> {
  // Both at once: the first page waits for the person as well as the token (one round trip, not two).
  const whoami = fetch('/client/whoami', { credentials: 'same-origin' });
  const response = await fetch('/client/auth/session', { credentials: 'same-origin' });
  if (response.status === 401) {
    await whoami.catch(() => undefined);
    return null;
  }
  const body = (await readJson(response)) as { csrfToken?: string };
  if (!response.ok || typeof body?.csrfToken !== 'string') throw failureOf(response.status, body);
  return (session.value = await describe(body.csrfToken, whoami));
}

export async function signIn(email: string, password: string): Promise<Session> {
  const body = (await authCall('POST', 'sign-in', { email, password })) as { csrfToken: string };
  expiredAt.value = null;
  return (session.value = await describe(body.csrfToken));
}

export async function setPassword(token: string, password: string): Promise<{ email: string }> {
  const body = (await authCall('POST', 'set-password', { token, password })) as { person: { email: string } };
  return body.person;
}

export async function signOut(everywhere: boolean): Promise<void> {
  const current = session.value;
  if (current) await authCall('POST', everywhere ? 'sign-out-everywhere' : 'sign-out', undefined, current.csrfToken);
  session.value = null;
}

/** A call answered 401: the session ended (expired, or signed out elsewhere). */
export function sessionEnded(): void {
  if (session.value === null) return;
  expiredAt.value = location.pathname + location.search;
  session.value = null;
}

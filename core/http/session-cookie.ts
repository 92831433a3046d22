import type { FastifyRequest } from 'fastify';
import type { Authenticator } from '../identity/authenticator.ts';
import type { SessionCredential } from '../identity/credential.ts';
import { ApiError } from '../kernel/errors.ts';

export const SESSION_COOKIE = 'svc_session';

/**
 * The svc_session cookie's value, or null. Only this one cookie is looked for; a header naming it
 * twice (a cookie set for a parent domain beside ours) is refused as absent rather than guessed at.
 */
export function sessionCookieOf(header: string | undefined): string | null {
  if (!header?.includes(SESSION_COOKIE)) return null;
  let found: string | null = null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== SESSION_COOKIE) continue;
    if (found !== null) return null;
    found = part.slice(eq + 1).trim();
  }
  return found || null;
}

/**
 * Secure unless the service is known to be reached over plain http: server.publicUrl says http://,
 * or, without a publicUrl, the request came to localhost (browsers treat http://localhost as
 * secure anyway, and a Secure cookie would not be sent there by every client).
 */
export function cookieIsSecure(request: FastifyRequest, publicUrl: string | undefined): boolean {
  if (publicUrl) return new URL(publicUrl).protocol === 'https:';
  const host = request.hostname.replace(/^\[|\]$/g, '');
  return !(host === 'localhost' || host.endsWith('.localhost') || host === '127.0.0.1' || host === '::1');
}

export function sessionCookie(value: string, options: { secure: boolean; maxAgeSeconds: number }): string {
  return [`${SESSION_COOKIE}=${value}`, 'Path=/', 'HttpOnly', 'SameSite=Lax', `Max-Age=${options.maxAgeSeconds}`, ...(options.secure ? ['Secure'] : [])].join('; ');
}

export function clearedSessionCookie(secure: boolean): string {
  return sessionCookie('', { secure, maxAgeSeconds: 0 });
}

/**
 * The person's browser session (the cookie) on this request's host, or null when there is none or it
 * ended: what server-rendered pages (the consent page, the invitation page) ask before showing a form.
 */
export async function browserSessionOf(authenticator: Authenticator, request: FastifyRequest): Promise<SessionCredential | null> {
  const cookie = sessionCookieOf(request.headers.cookie);
  if (!cookie) return null;
  try {
    return await authenticator.authenticateCookie(cookie);
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return null;
    throw error;
  }
}

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppConfig } from '../../config/schema.ts';
import type { SessionCredential } from '../identity/credential.ts';
import { ApiError } from '../kernel/errors.ts';
import { csrfTokenFor, type PeopleSignIn, type SignedIn } from '../identity/people-sign-in.ts';
import { crossSiteRefusal } from './csrf.ts';
import { clearedSessionCookie, cookieIsSecure, sessionCookie, sessionCookieOf } from './session-cookie.ts';
import { publicOriginOf } from './request-origin.ts';

/**
 * People's sign-in routes under /client/auth. Raw routes rather than operations: they set and
 * clear the session cookie, and sign-in and set-password are public. Sign-in answers the same 401
 * for an unknown email and a wrong password.
 */
export function mountAuthRoutes(app: FastifyInstance, signIn: PeopleSignIn, config: AppConfig): void {
  const ownOrigin = publicOriginOf(config.server.publicUrl);
  const secure = (request: FastifyRequest) => cookieIsSecure(request, config.server.publicUrl);
  const open = { config: { auth: false as const, surface: 'client' as const } };
  const signedIn = { config: { auth: { scope: null }, surface: 'client' as const } };

  app.post('/client/auth/sign-in', open, async (request, reply) => {
    // A sign-in another site submits would sign the browser into the attacker's account.
    const refusal = crossSiteRefusal(request, ownOrigin);
    if (refusal) throw refusal;
    const body = objectBody(request.body);
    const result = await signIn.signIn({ email: stringField(body, 'email', 320), password: stringField(body, 'password', 4096), ip: request.ip });
    void reply.header('set-cookie', sessionCookie(result.sessionToken, { secure: secure(request), maxAgeSeconds: config.auth.sessionTtlDays * 86_400 }));
    void reply.header('cache-control', 'no-store');
    request.log.info({ personId: result.person.id }, 'person signed in');
    return sessionView(result);
  });

  app.post('/client/auth/set-password', open, async (request) => {
    const body = objectBody(request.body);
    const person = await signIn.setPassword({ token: stringField(body, 'token', 200), password: stringField(body, 'password', 4096), ip: request.ip });
    return { object: 'ack', ok: true, person: { id: person.id, email: person.email } };
  });

  app.get('/client/auth/session', signedIn, async (request, reply) => {
    const credential = browserSession(request);
    void reply.header('cache-control', 'no-store');
    return {
      object: 'session',
      person: { id: credential.personId, email: credential.email },
      organizationId: credential.organizationId,
      role: credential.role,
      csrfToken: csrfTokenFor(sessionCookieOf(request.headers.cookie)!),
    };
  });

  app.post('/client/auth/sign-out', signedIn, async (request, reply) => {
    await signIn.signOut(sessionOf(request).sessionId);
    return signedOut(request, reply, 1);
  });

  app.post('/client/auth/sign-out-everywhere', signedIn, async (request, reply) => {
    return signedOut(request, reply, await signIn.signOutEverywhere(sessionOf(request).personId));
  });

  function signedOut(request: FastifyRequest, reply: FastifyReply, sessionsEnded: number) {
    void reply.header('set-cookie', clearedSessionCookie(secure(request)));
    return { object: 'ack', ok: true, sessionsEnded };
  }
}

function sessionView(result: SignedIn) {
  return {
    object: 'session',
    person: { id: result.person.id, email: result.person.email, name: result.person.name },
    expiresAt: result.expiresAt.toISOString(),
    csrfToken: result.csrfToken,
  };
}

function sessionOf(request: FastifyRequest): SessionCredential {
  const credential = request.credential!;
  if (credential.kind !== 'session') throw new ApiError('session_required');
  return credential;
}

function browserSession(request: FastifyRequest): SessionCredential {
  const credential = sessionOf(request);
  if (credential.csrfTokenHash === null || sessionCookieOf(request.headers.cookie) === null) {
    throw new ApiError('browser_session_required');
  }
  return credential;
}

function objectBody(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new ApiError('invalid_body', 'Send a JSON object');
  return body as Record<string, unknown>;
}

function stringField(body: Record<string, unknown>, name: string, maxLength: number): string {
  const value = body[name];
  if (typeof value !== 'string' || value.length === 0) throw new ApiError('invalid_request', `'${name}' is required and must be a string`, { param: name });
  if (value.length > maxLength) throw new ApiError('invalid_request', `'${name}' is too long`, { param: name });
  return value;
}

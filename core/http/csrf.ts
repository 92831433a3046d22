import { timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { SessionCredential } from '../identity/credential.ts';
import { ApiError } from '../kernel/errors.ts';
import { hashToken } from '../identity/api-tokens.ts';
import { requestOrigin } from './request-origin.ts';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

const csrfFailed = (message: string) => new ApiError('csrf_failed', message);

/**
 * A browser may send the session cookie with requests another site makes it send, so a write
 * authenticated by the cookie must prove it came from our own pages: its Origin (when the browser
 * sends one) is ours, it is not a cross-site fetch, and it carries the session's CSRF token in
 * x-csrf-token (the synchronizer token pattern). Bearer credentials are never sent by a browser on
 * its own and are not checked. Null when the request passes, the error otherwise.
 */
export function csrfRefusal(request: FastifyRequest, credential: SessionCredential, ownOrigin: string | null): ApiError | null {
  if (SAFE_METHODS.has(request.method)) return null;
  const crossSite = crossSiteRefusal(request, ownOrigin);
  if (crossSite) return crossSite;
  const token = request.headers['x-csrf-token'];
  if (typeof token !== 'string' || credential.csrfTokenHash === null) {
    return csrfFailed('A write with the session cookie needs the x-csrf-token header (from sign-in or GET /client/auth/session)');
  }
  const given = Buffer.from(hashToken(token));
  const expected = Buffer.from(credential.csrfTokenHash);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return csrfFailed('The x-csrf-token header does not match this session');
  return null;
}

/** Origin, when sent, must be ours (server.publicUrl's, else this request's own); a cross-site fetch is refused. */
export function crossSiteRefusal(request: FastifyRequest, ownOrigin: string | null): ApiError | null {
  const origin = request.headers.origin;
  if (origin !== undefined && origin !== requestOrigin(request, ownOrigin)) {
    return csrfFailed('Cross-site requests are refused');
  }
  if (request.headers['sec-fetch-site'] === 'cross-site') return csrfFailed('Cross-site requests are refused');
  return null;
}

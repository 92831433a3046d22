import type { FastifyRequest } from 'fastify';
import t from 'tap';
import type { SessionCredential } from '../../core/identity/credential.ts';
import { csrfRefusal, crossSiteRefusal } from '../../core/http/csrf.ts';
import { hashToken } from '../../core/identity/api-tokens.ts';

/**
 * The CSRF rules on their own (core/http/csrf.ts), one rule per test, so that a guard weakened by a
 * character fails here (people-sign-in.test.ts covers the same rules through the routes).
 */
const CSRF_TOKEN = 'the-session-csrf-token';
const OWN_ORIGIN = 'https://gateway.example';

const browserSession: SessionCredential = {
  kind: 'session',
  sessionId: 'session-1',
  personId: 'person-1',
  email: 'dev@acme.test',
  organizationId: 'org-1',
  role: 'owner',
  scopes: new Set(),
  csrfTokenHash: hashToken(CSRF_TOKEN),
};

/** The parts of a request the checks read: method, headers, and the protocol and host it came to. */
function browserRequest(method: string, headers: Record<string, string> = {}, ownHost = 'gateway.example'): FastifyRequest {
  return { method, headers, protocol: 'https', host: ownHost } as unknown as FastifyRequest;
}

const withToken = (headers: Record<string, string> = {}) => ({ 'x-csrf-token': CSRF_TOKEN, ...headers });
const refusalCode = (refusal: { code: string } | null) => refusal?.code ?? null;

t.test('a write carrying the session token from our own origin passes', async (t) => {
  for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
    t.equal(csrfRefusal(browserRequest(method, withToken({ origin: OWN_ORIGIN })), browserSession, OWN_ORIGIN), null, method);
  }
});

t.test('GET, HEAD and OPTIONS are the only methods that need no token', async (t) => {
  for (const method of ['GET', 'HEAD', 'OPTIONS']) t.equal(csrfRefusal(browserRequest(method), browserSession, OWN_ORIGIN), null, method);
  for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'CONNECT', 'TRACE']) {
    t.equal(refusalCode(csrfRefusal(browserRequest(method), browserSession, OWN_ORIGIN)), 'csrf_failed', `${method} without the token is refused`);
  }
});

t.test('a DELETE with the cookie and no token is refused', async (t) => {
  t.equal(refusalCode(csrfRefusal(browserRequest('DELETE', { origin: OWN_ORIGIN }), browserSession, OWN_ORIGIN)), 'csrf_failed');
});

t.test('a write with a wrong token, or a token of another length, is refused', async (t) => {
  for (const token of ['not-the-token', `${CSRF_TOKEN}x`, CSRF_TOKEN.slice(0, -1), '']) {
    t.equal(refusalCode(csrfRefusal(browserRequest('POST', { 'x-csrf-token': token }), browserSession, OWN_ORIGIN)), 'csrf_failed', JSON.stringify(token));
  }
});

t.test('a session without a CSRF token hash (a Bearer session) cannot write with the cookie rules', async (t) => {
  const bearerSession: SessionCredential = { ...browserSession, csrfTokenHash: null };
  t.equal(refusalCode(csrfRefusal(browserRequest('POST', withToken()), bearerSession, OWN_ORIGIN)), 'csrf_failed');
});

t.test('an Origin that merely starts with ours is refused', async (t) => {
  for (const origin of [`${OWN_ORIGIN}.evil.example`, `${OWN_ORIGIN}:8443`, `${OWN_ORIGIN}evil`, `${OWN_ORIGIN}/`]) {
    t.equal(refusalCode(crossSiteRefusal(browserRequest('POST', { origin }), OWN_ORIGIN)), 'csrf_failed', origin);
    t.equal(refusalCode(csrfRefusal(browserRequest('POST', withToken({ origin })), browserSession, OWN_ORIGIN)), 'csrf_failed', `${origin} with the token`);
  }
});

t.test('an Origin that is a prefix of ours, or another scheme of it, is refused', async (t) => {
  for (const origin of ['https://gateway.exampl', 'https://gateway', 'http://gateway.example', 'null', '']) {
    t.equal(refusalCode(crossSiteRefusal(browserRequest('POST', { origin }), OWN_ORIGIN)), 'csrf_failed', JSON.stringify(origin));
  }
});

t.test('without a public URL, the Origin must be the one the request itself came to', async (t) => {
  t.equal(crossSiteRefusal(browserRequest('POST', { origin: 'https://gateway.example' }), null), null, 'its own origin');
  t.equal(refusalCode(crossSiteRefusal(browserRequest('POST', { origin: 'https://gateway.example.evil' }), null)), 'csrf_failed', 'longer');
  t.equal(refusalCode(crossSiteRefusal(browserRequest('POST', { origin: 'https://gateway.example' }, 'other.example'), null)), 'csrf_failed', 'another host');
});

t.test('the public URL, when set, decides over the host the request names', async (t) => {
  const request = browserRequest('POST', { origin: 'https://internal.host' }, 'internal.host');
  t.equal(refusalCode(crossSiteRefusal(request, OWN_ORIGIN)), 'csrf_failed');
});

t.test('a request without an Origin is judged by the token alone', async (t) => {
  t.equal(crossSiteRefusal(browserRequest('POST'), OWN_ORIGIN), null);
  t.equal(csrfRefusal(browserRequest('POST', withToken()), browserSession, OWN_ORIGIN), null);
});

t.test('a cross-site fetch is refused even from our origin with the token', async (t) => {
  const request = browserRequest('POST', withToken({ origin: OWN_ORIGIN, 'sec-fetch-site': 'cross-site' }));
  t.equal(refusalCode(csrfRefusal(request, browserSession, OWN_ORIGIN)), 'csrf_failed');
  for (const site of ['same-origin', 'same-site', 'none']) {
    t.equal(crossSiteRefusal(browserRequest('POST', { 'sec-fetch-site': site }), OWN_ORIGIN), null, site);
  }
});

t.test('each refusal says what is wrong: the missing header, the mismatch, or the cross-site request', async (t) => {
  t.match(csrfRefusal(browserRequest('POST'), browserSession, OWN_ORIGIN)?.message, /needs the x-csrf-token header/);
  t.match(csrfRefusal(browserRequest('POST', { 'x-csrf-token': 'wrong' }), browserSession, OWN_ORIGIN)?.message, /does not match this session/);
  t.match(crossSiteRefusal(browserRequest('POST', { origin: 'https://evil.example' }), OWN_ORIGIN)?.message, /Cross-site requests are refused/);
  t.match(crossSiteRefusal(browserRequest('POST', { 'sec-fetch-site': 'cross-site' }), OWN_ORIGIN)?.message, /Cross-site requests are refused/);
});

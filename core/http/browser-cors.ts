import type { FastifyInstance } from 'fastify';
import FindMyWay, { type HTTPMethod } from 'find-my-way';

/** What a page may always send to /v1: its key, a JSON body and the opt-in to browser access. */
const ALLOWED_REQUEST_HEADERS = ['authorization', 'content-type', 'x-svc-dangerous-browser-access'];

/** An HTTP header name (RFC 9110 token); anything else asked for in a preflight is not echoed. */
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/;
/** At most this many names asked for are echoed. */
const MAX_ECHOED_HEADERS = 32;

/** What a page may read of a /v1 answer besides the CORS-safelisted headers. */
const EXPOSED_RESPONSE_HEADERS = [
  'x-request-id',
  'x-client-request-id',
  'x-ratelimit-limit-requests',
  'x-ratelimit-remaining-requests',
  'x-ratelimit-reset-requests',
  'x-ratelimit-limit-tokens',
  'x-ratelimit-remaining-tokens',
  'x-ratelimit-reset-tokens',
  'retry-after',
  'x-svc-provider',
  'x-svc-attempts',
].join(', ');

/** How long a browser may reuse a preflight's answer (seconds). */
const PREFLIGHT_MAX_AGE_SECONDS = '600';

/**
 * CORS for the /v1 surface (routes declaring `surface: 'v1'`), so a page whose user holds a key can
 * call the gateway directly once it opts in with `x-svc-dangerous-browser-access: true`.
 *
 * - A preflight (OPTIONS with Origin and Access-Control-Request-Method) for a method a /v1 route
 *   serves at that path is answered 204 here, before authentication: browsers send no credential
 *   with a preflight. It allows any origin, since the key, not the origin, is what grants access,
 *   and `authorization`, `content-type`, `x-svc-dangerous-browser-access` plus the other headers the
 *   page asks for (SDKs send their own, such as the OpenAI SDK's `x-stainless-*`).
 *   The browser rule (plugins/inference/browser-rule.ts) applies to the real request that follows.
 * - A /v1 request that carries Origin and the opt-in gets `access-control-allow-origin` (the
 *   origin itself) and may read the rate-limit and x-svc-* headers. Without the opt-in it gets no
 *   CORS headers, so a page cannot read the answer even on routes the browser rule does not cover.
 *
 * Management routes (/client, /platform/v1) answer no CORS at all: they take session cookies.
 * Written here rather than with @fastify/cors: that plugin runs a hook with an options merge on every
 * request, and its catch-all `OPTIONS *` route would turn every unknown path's 404 into a 405.
 * Installed before authentication and before any route is added (it keeps a router of /v1 routes).
 */
export function installBrowserCors(app: FastifyInstance): void {
  const v1Routes = FindMyWay({ ignoreTrailingSlash: true });
  app.addHook('onRoute', (route) => {
    if (route.config?.surface !== 'v1') return;
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) {
      if (method === 'OPTIONS' || method === 'HEAD') continue;
      try {
        v1Routes.on(method as HTTPMethod, route.url, () => undefined);
      } catch {
        // The same route under two prefixes that normalise alike: already known.
      }
    }
  });

  // Callback style, and servers send no Origin: the usual call costs one header look-up.
  app.addHook('onRequest', (request, reply, done) => {
    const origin = request.headers.origin;
    if (origin === undefined) return done();
    if (request.raw.method === 'OPTIONS') {
      const asked = request.headers['access-control-request-method'];
      const path = request.url.split('?')[0] ?? '/';
      if (typeof asked !== 'string' || !v1Routes.find(asked.toUpperCase() as HTTPMethod, path)) return done();
      void reply
        .code(204)
        .header('access-control-allow-origin', origin)
        .header('access-control-allow-methods', asked.toUpperCase())
        .header('access-control-allow-headers', allowedHeaders(request.headers['access-control-request-headers']))
        .header('access-control-max-age', PREFLIGHT_MAX_AGE_SECONDS)
        .header('vary', 'origin, access-control-request-method, access-control-request-headers')
        .send();
      return;
    }
    if (request.routeOptions.config.surface === 'v1' && request.headers['x-svc-dangerous-browser-access'] === 'true') {
      void reply.header('access-control-allow-origin', origin).header('access-control-expose-headers', EXPOSED_RESPONSE_HEADERS).header('vary', 'origin');
    }
    done();
  });
}

/** The three headers /v1 needs, and the well-formed names the preflight asked for besides. */
function allowedHeaders(asked: string | undefined): string {
  const names = new Set(ALLOWED_REQUEST_HEADERS);
  for (const name of (asked ?? '').split(',', MAX_ECHOED_HEADERS)) {
    const trimmed = name.trim().toLowerCase();
    if (HEADER_NAME.test(trimmed)) names.add(trimmed);
  }
  return [...names].join(', ');
}

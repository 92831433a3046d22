import type { FastifyInstance } from 'fastify';
import type { Authenticator } from '../identity/authenticator.ts';
import type { Credential, SessionCredential } from '../identity/credential.ts';
import { declaredScopeRefusal } from '../identity/authorization.ts';
import { ApiError } from '../kernel/errors.ts';
import { authorizationHeader, withXApiKey } from './authorization-header.ts';
import { csrfRefusal } from './csrf.ts';
import { sessionCookieOf } from './session-cookie.ts';

/**
 * Authenticates every request before its body is read (a bad key never costs a 10 MB parse),
 * then checks the route's scope. Unknown routes skip this so they answer 404, not 401. The /v1
 * surface takes API keys only: a person's session there would be billed to no key, outside every
 * key and project cap and key rate limit, so it is refused with 401 `api_key_required`.
 *
 * Without an Authorization header, the management surface (/client, /platform/v1) also takes a
 * browser session's `svc_session` cookie; its writes must pass the CSRF check (core/http/csrf.ts).
 * On /v1 a cookie is refused like any session, without being looked up. An Authorization header
 * always wins over a cookie. A route whose auth says `xApiKey` also takes the key from `x-api-key`.
 * A connector's OAuth access token is refused everywhere here (401 `connector_token_not_accepted`).
 */
export function installAuthHook(app: FastifyInstance, authenticator: Authenticator, options: { ownOrigin: string | null }): void {
  app.decorateRequest('credential', null);
  // Callback style: a credential the cache knows is checked without a promise.
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.is404) return done();
    const { auth, surface } = request.routeOptions.config;
    if (auth === false) return done();
    const declared = auth || {};
    const admit = (credential: Credential) => {
      // Connectors' OAuth tokens are for {auth_url}/mcp only, which authenticates them itself.
      if (credential.kind === 'connector') return done(new ApiError('connector_token_not_accepted'));
      if (surface === 'v1' && credential.kind !== 'key') return done(apiKeyRequired());
      request.credential = credential;
      const refusal = declaredScopeRefusal(credential, declared);
      if (refusal) return done(refusal);
      done();
    };
    let authorization: string | undefined;
    let cached: Credential | null;
    try {
      authorization = authorizationHeader(request.raw);
      if (auth?.xApiKey) authorization = withXApiKey(request.raw, authorization);
      const cookie = authorization === undefined ? sessionCookieOf(request.headers.cookie) : null;
      if (cookie !== null && surface !== 'client') {
        if (surface === 'v1' || request.url.startsWith('/v1')) return done(apiKeyRequired());
      } else if (cookie !== null) {
        const admitCookie = (credential: SessionCredential) => {
          const refusal = csrfRefusal(request, credential, options.ownOrigin);
          return refusal ? done(refusal) : admit(credential);
        };
        const cachedSession = authenticator.cachedCookieCredential(cookie);
        if (cachedSession) return admitCookie(cachedSession);
        authenticator.authenticateCookie(cookie).then(admitCookie, done);
        return;
      }
      cached = authenticator.cachedCredential(authorization);
    } catch (error) {
      return done(error as Error);
    }
    if (cached) return admit(cached);
    authenticator.authenticate(authorization).then(admit, done);
  });
}

const apiKeyRequired = () => new ApiError('api_key_required');

import type { FastifyInstance } from 'fastify';
import type { Authenticator } from '../authenticator.ts';
import type { Credential } from '../credential.ts';
import { ApiError } from '../errors.ts';
import { authorizationHeader } from './authorization-header.ts';

/**
 * Authenticates every request before its body is read (a bad key never costs a 10 MB parse),
 * then checks the route's scope. Unknown routes skip this so they answer 404, not 401.
 */
export function installAuthHook(app: FastifyInstance, authenticator: Authenticator): void {
  app.decorateRequest('credential', null);
  // Callback style: a credential the cache knows is checked without a promise.
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.is404) return done();
    const auth = request.routeOptions.config.auth;
    if (auth === false) return done();
    const scope = auth?.scope ?? null;
    const admit = (credential: Credential) => {
      request.credential = credential;
      if (scope && !credential.scopes.has(scope)) {
        return done(new ApiError(403, 'missing_scope', `This credential lacks the '${scope}' scope that this operation needs`));
      }
      done();
    };
    let authorization: string | undefined;
    let cached: Credential | null;
    try {
      authorization = authorizationHeader(request.raw);
      cached = authenticator.cachedCredential(authorization);
    } catch (error) {
      return done(error as Error);
    }
    if (cached) return admit(cached);
    authenticator.authenticate(authorization).then(admit, done);
  });
}

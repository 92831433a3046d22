import type { FastifyInstance } from 'fastify';
import type { Authenticator } from '../authenticator.ts';
import { ApiError } from '../errors.ts';

/**
 * Authenticates every request before its body is read (a bad key never costs a 10 MB parse),
 * then checks the route's scope. Unknown routes skip this so they answer 404, not 401.
 */
export function installAuthHook(app: FastifyInstance, authenticator: Authenticator): void {
  app.decorateRequest('credential', null);
  app.addHook('onRequest', async (request) => {
    if (request.is404) return;
    const auth = request.routeOptions.config.auth;
    if (auth === false) return;
    const credential = await authenticator.authenticate(request.headers.authorization);
    request.credential = credential;
    const scope = auth?.scope ?? null;
    if (scope && !credential.scopes.has(scope)) {
      throw new ApiError(403, 'missing_scope', `This credential lacks the '${scope}' scope that this operation needs`);
    }
  });
}

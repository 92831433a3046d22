import type { FastifyInstance } from 'fastify';
import { type AuthorizationDeps, authorizeResources, resourceId, resourcesOf } from '../identity/authorization.ts';
import { ApiError } from '../kernel/errors.ts';
import { resourceId as uuid } from '../vocabulary/ids.ts';

/**
 * The raw-route half of the one authorization decision: a route declaring `config.auth.resource`
 * (core/http/fastify-types.ts) has it resolved and checked by `authorizeResources` after its body is
 * parsed and before its handler, exactly as an operation's declared resources are, and finds the
 * result on `request.authorization`. The scope was checked before the body was read (auth-hook.ts).
 * Routes declaring nothing pay one property read.
 */
export function installRouteResources(app: FastifyInstance, deps: AuthorizationDeps): void {
  app.decorateRequest('authorization', null);
  app.addHook('preHandler', (request, _reply, done) => {
    const auth = request.routeOptions.config.auth;
    if (!auth || auth.resource === undefined || !request.credential) return done();
    const input = { params: request.params, query: request.query, body: request.body };
    // Raw input, unlike an operation's: the kernel's own kinds are looked up by UUID columns.
    for (const declaration of resourcesOf(auth)) {
      if (typeof declaration.kind === 'object') continue;
      const id = resourceId(declaration, input);
      if (id !== undefined && !uuid.safeParse(id).success) {
        return done(new ApiError('invalid_parameter', `Invalid '${declaration.field}' in ${declaration.in}: not a UUID`, { param: declaration.field }));
      }
    }
    authorizeResources(request.credential, auth, input, deps).then((authorization) => {
      request.authorization = authorization;
      done();
    }, done);
  });
}

import type { FastifyInstance } from 'fastify';
import type { OperationService } from '../operations/operation-service.ts';
import type { OperationRegistry } from '../operations/operations.ts';
import { requestOrigin } from './request-origin.ts';

/** The management surface's two mount points: the main host's and the regional host's. */
export const MANAGEMENT_PREFIXES = ['/client', '/platform/v1'] as const;

/**
 * Mounts every operation as a route; the operation service runs it and records its outcome.
 * The scope is checked in `onRequest`, before the body is read; the registry's runner checks it
 * again with owner-only and the declared resources, after input validation (see core/identity/authorization.ts).
 */
export function mountOperations(app: FastifyInstance, registry: OperationRegistry, service: OperationService, publicOrigin: string | null = null): void {
  for (const prefix of MANAGEMENT_PREFIXES) {
    for (const operation of registry.list()) {
      app.route({
        method: operation.method,
        url: prefix + operation.path,
        config: { auth: { scope: operation.scope }, surface: 'client' },
        handler: async (request, reply) => {
          const result = await service.call(
            operation,
            { params: request.params, query: request.query, body: request.body },
            { credential: request.credential!, requestId: request.id, logger: request.log, origin: requestOrigin(request, publicOrigin) },
          );
          return reply.code(operation.status ?? 200).send(result);
        },
      });
    }
  }
}

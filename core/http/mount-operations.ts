import type { FastifyInstance } from 'fastify';
import type { OperationEvents } from '../operations/operation-events.ts';
import type { OperationRegistry } from '../operations/operations.ts';

/** The management surface's two mount points: the main host's and the regional host's. */
export const MANAGEMENT_PREFIXES = ['/client', '/platform/v1'] as const;

/**
 * Mounts every operation; each call that writes is recorded as a `management.operation` event.
 * The scope is checked in `onRequest`, before the body is read; the registry's runner checks it
 * again with owner-only and the declared resources, after input validation (see core/identity/authorization.ts).
 */
export function mountOperations(app: FastifyInstance, registry: OperationRegistry, recorder: OperationEvents): void {
  for (const prefix of MANAGEMENT_PREFIXES) {
    for (const operation of registry.list()) {
      app.route({
        method: operation.method,
        url: prefix + operation.path,
        config: { auth: { scope: operation.scope }, surface: 'client' },
        handler: async (request, reply) => {
          const credential = request.credential!;
          const recording = recorder.begin(operation, credential, request.id, request.params);
          let result: unknown;
          try {
            result = await registry.run(
              operation,
              { params: request.params, query: request.query, body: request.body },
              { credential, requestId: request.id, logger: request.log, transaction: recording.transaction },
            );
          } catch (error) {
            await recording.failed(error);
            throw error;
          }
          await recording.succeeded(result);
          return reply.code(operation.status ?? 200).send(result);
        },
      });
    }
  }
}

import type { FastifyInstance } from 'fastify';
import { runOperation, type AnyOperation } from '../operations.ts';

/** The management surface's two mount points: the main host's and the regional host's. */
export const MANAGEMENT_PREFIXES = ['/client', '/platform/v1'] as const;

export function mountOperations(app: FastifyInstance, operations: readonly AnyOperation[]): void {
  for (const prefix of MANAGEMENT_PREFIXES) {
    for (const operation of operations) {
      app.route({
        method: operation.method,
        url: prefix + operation.path,
        config: { auth: { scope: operation.scope }, surface: 'client' },
        handler: async (request, reply) => {
          const result = await runOperation(
            operation,
            { params: request.params, query: request.query, body: request.body },
            { credential: request.credential!, requestId: request.id, logger: request.log },
          );
          return reply.code(operation.status ?? 200).send(result);
        },
      });
    }
  }
}

import type { FastifyInstance } from 'fastify';
import { ApiError } from '../kernel/errors.ts';
import type { Readiness } from '../kernel/readiness.ts';
import { sendError } from './error-handler.ts';

const LIVE = { status: 'ok' } as const;

/**
 * GET /health/live (and /health, its older name): the process's event loop answers, nothing else
 * is asked. GET /health/ready: 200 when this process can do its work (see core/kernel/readiness.ts),
 * otherwise 503 `not_ready` naming the dependencies that failed, never how they are reached.
 * Both are unauthenticated, like a load balancer's probe, and served by every role.
 */
export function mountHealthRoutes(app: FastifyInstance, readiness: Readiness): void {
  const root = { config: { auth: false, surface: 'root' } } as const;
  app.get('/health', root, async () => LIVE);
  app.get('/health/live', root, async () => LIVE);
  app.get('/health/ready', root, async (_request, reply) => {
    const report = await readiness.check();
    if (report.ready) return { status: 'ok' };
    // Answered here rather than thrown: the error handler would log an expected 503 as a fault.
    return sendError(
      reply,
      new ApiError('not_ready', `This server is not ready; failing checks: ${report.failed.join(', ')}`, {
        headers: { 'retry-after': '1' },
      }),
    );
  });
}

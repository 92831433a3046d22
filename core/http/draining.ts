import type { FastifyInstance } from 'fastify';
import { ApiError } from '../kernel/errors.ts';
import { sendError } from './error-handler.ts';

/**
 * Once close() begins (SIGTERM), the listener stops taking connections but a kept-alive one may
 * still bring a request. It is answered at once with 503 `shutting_down` in the envelope, with
 * `retry-after` and `connection: close`, so the client retries on another replica instead of
 * starting work here that the grace period may cut. Requests already in flight finish normally.
 * Install it after the hook that sets x-request-id and before authentication (nothing else runs).
 * Fastify's own answer for this case (return503OnClosing) is turned off in core/kernel/app.ts: it is not
 * in the envelope and carries no retry-after.
 */
export function installDraining(app: FastifyInstance): void {
  let draining = false;
  app.addHook('preClose', (done) => {
    draining = true;
    done();
  });
  app.addHook('onRequest', (request, reply, done) => {
    if (!draining) return done();
    // Answered here, not passed to done(): the error handler would log a 5xx as a fault.
    sendError(
      reply,
      new ApiError('shutting_down', `This server is shutting down and did nothing with the request; retry it (request id ${request.id})`, {
        headers: { 'retry-after': '1', connection: 'close' },
      }),
    );
  });
}

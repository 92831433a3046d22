import type { FastifyRequest } from 'fastify';
import { ApiError } from '../../core/kernel/errors.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './inference-errors.ts';

/**
 * A request from a web page (it carries Origin) would expose the key to the page's users, so it is
 * refused unless the caller opts in with x-svc-dangerous-browser-access: true.
 */
export function enforceBrowserRule(request: FastifyRequest): void {
  if (request.headers.origin === undefined) return;
  if (request.headers['x-svc-dangerous-browser-access'] === 'true') return;
  throw new ApiError('browser_access_denied');
}

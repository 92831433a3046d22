import { DatabaseUnavailable } from '../ports/database.ts';
import { ApiError, ClientGoneError } from './errors.ts';

/**
 * The one mapping from any thrown error to the answer it becomes (status, code, envelope): what the
 * HTTP error handler sends, what the gateway's request log and a job-run call record, and what a
 * management operation's event says. Surfaces translate their framework's own errors first (the
 * HTTP handler: Fastify's body errors) and hand everything else here.
 */
export function errorAnswer(error: unknown, requestId: string): ApiError {
  if (error instanceof ApiError) return error;
  // The client went away: nobody reads this answer, and it is no server fault.
  if (error instanceof ClientGoneError) return new ApiError('client_closed_request');
  if (isStorageUnavailable(error)) {
    return new ApiError('service_unavailable', `A storage backend is unreachable; nothing was done. Retry shortly (request id ${requestId})`, {
      headers: { 'retry-after': '1' },
    });
  }
  return new ApiError('internal_error', `Internal server error; quote request id ${requestId} when reporting it`);
}

/** The status and code errorAnswer gives, without building the answer (for logs and metrics). */
export function errorStatus(error: unknown): { status: number; code: string } {
  if (error instanceof ApiError) return { status: error.status, code: error.code };
  if (error instanceof ClientGoneError) return CLIENT_GONE;
  return isStorageUnavailable(error) ? STORAGE_UNAVAILABLE : INTERNAL;
}

const CLIENT_GONE = Object.freeze({ status: 499, code: 'client_closed_request' });
const STORAGE_UNAVAILABLE = Object.freeze({ status: 503, code: 'service_unavailable' });
const INTERNAL = Object.freeze({ status: 500, code: 'internal_error' });

// Redis's socket errors and closed clients; the database adapters raise DatabaseUnavailable themselves.
const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN']);

/** Whether an error says a database or Redis could not be reached (fail closed, retryable). */
export function isStorageUnavailable(error: unknown): boolean {
  if (error instanceof DatabaseUnavailable) return true;
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) return true;
  return error.name === 'ClientClosedError' || error.name === 'ConnectionTimeoutError' || /client (is|was) closed|the client is offline/i.test(error.message);
}

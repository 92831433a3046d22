import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from './schema.d.ts';
import { session, sessionEnded } from './session.ts';

/**
 * The management API, typed by the service's own OpenAPI document (schema.d.ts, generated from
 * it): a call the API does not have, or a body it would not take, fails the console's type check.
 */
export const api = createClient<paths>({ baseUrl: '/client', credentials: 'same-origin' });

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

const sessionMiddleware: Middleware = {
  onRequest({ request }) {
    // Writes prove they come from this page: the session's CSRF token, which another origin cannot read.
    const token = session.value?.csrfToken;
    if (!SAFE_METHODS.has(request.method) && token) request.headers.set('x-csrf-token', token);
    return request;
  },
  onResponse({ response }) {
    if (response.status === 401) sessionEnded();
    return response;
  },
};
api.use(sessionMiddleware);

/** The operations this deployment serves (`paths` of /client/openapi.json): a page shows only when its calls exist. */
export async function servedPaths(): Promise<ReadonlySet<string>> {
  const response = await fetch('/client/openapi.json', { credentials: 'same-origin' });
  if (!response.ok) return new Set();
  const document = (await response.json()) as { paths?: Record<string, Record<string, unknown>> };
  const served = new Set<string>();
  for (const [path, methods] of Object.entries(document.paths ?? {})) {
    for (const method of Object.keys(methods)) served.add(`${method.toUpperCase()} ${path}`);
  }
  return served;
}

import type { FastifyInstance } from 'fastify';
import { type InferenceAdmission, openAdmission } from '../gateway/inference-admission.ts';
import type { RouteAuth } from './fastify-types.ts';

/** A route of the /v1 surface as mounted, by whichever plugin mounted it. */
export interface V1Route {
  readonly method: string;
  /** OpenAPI style: `/v1/files/{id}`. */
  readonly path: string;
  readonly auth: RouteAuth | false | undefined;
}

/**
 * Collects every `surface: 'v1'` route under `/v1/` as plugins mount them (HEAD aside), into the
 * list returned: `GET /v1` lists them, and the scope-matrix and input-fuzz gates walk them, so a
 * plugin's new /v1 route (files, batches) is covered without being named anywhere else.
 */
export function collectV1Routes(app: FastifyInstance): readonly V1Route[] {
  const routes: V1Route[] = [];
  app.addHook('onRoute', (route) => {
    if (route.config?.surface !== 'v1' || !route.url.startsWith('/v1/')) return;
    const path = route.url.replace(/:(\w+)/g, '{$1}');
    for (const method of [route.method].flat()) if (method !== 'HEAD') routes.push({ method, path, auth: route.config.auth });
  });
  return routes;
}

const LIMIT_HEADERS = ['x-ratelimit-limit-requests', 'x-ratelimit-limit-tokens'] as const;

/**
 * Every response of a `surface: 'v1'` route says where the caller stands (the spec: every gateway
 * response carries the rate-limit headers): a call's admission set them already; anything else
 * (a model list, a file, a refusal before admission) reads them without consuming. Without a
 * metering plugin (`openAdmission`) there are no limits to tell of, and no hook.
 */
export function installRateLimitHeaders(app: FastifyInstance, admission: InferenceAdmission): void {
  if (admission === openAdmission) return;
  app.addHook('onSend', (request, reply, payload, done) => {
    if (request.routeOptions.config.surface !== 'v1' || !request.credential) return done(null, payload);
    if (LIMIT_HEADERS.some((name) => reply.hasHeader(name))) return done(null, payload);
    admission.peekHeaders(request.credential).then(
      (headers) => {
        void reply.headers(headers);
        done(null, payload);
      },
      // Headers are advice; a coordination hiccup must not fail the response.
      () => done(null, payload),
    );
  });
}

import type { FastifyInstance } from 'fastify';
import type { GatewayMetrics } from '../gateway/metrics.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set when a gateway call served this request and `GatewayMetrics.observeCall` counted it. */
    gatewayCallCounted: boolean;
  }
}

/**
 * Counts every /v1 response by status in `svc_gateway_requests_total`, so refusals before and at
 * admission (400, 401, 403, 404, 413, 402, 422, 429) are seen as well as calls. A response whose
 * call `observeCall` already counted (with its model and provider) is left alone. The endpoint is the
 * route as declared (`/v1/models/:model`), `unmatched` for a path no route serves and `preflight`
 * for a CORS preflight, so the label stays a bounded set whatever paths clients send.
 */
export function installV1ResponseMetrics(app: FastifyInstance, metrics: GatewayMetrics): void {
  app.decorateRequest('gatewayCallCounted', false);
  // Callback style: no promise per response.
  app.addHook('onResponse', (request, reply, done) => {
    if (request.gatewayCallCounted) return done();
    if (request.routeOptions.config.surface === 'v1') {
      metrics.observeResponse(request.routeOptions.url ?? 'unmatched', reply.statusCode);
    } else if (request.is404 && (request.url === '/v1' || request.url.startsWith('/v1/') || request.url.startsWith('/v1?'))) {
      metrics.observeResponse(request.raw.method === 'OPTIONS' && reply.statusCode === 204 ? 'preflight' : 'unmatched', reply.statusCode);
    }
    done();
  });
}

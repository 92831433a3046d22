import type { FastifyInstance } from 'fastify';
import { ApiError } from '../../core/kernel/errors.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './inference-errors.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The spec's browser rule covers this route: a request carrying Origin is refused 403
     * `browser_access_denied` unless it sends `x-svc-dangerous-browser-access: true`.
     */
    browserRule?: true;
  }
}

/**
 * A request from a web page (it carries Origin) would expose the key to the page's users, so on the
 * routes that declare `config.browserRule` it is refused unless the caller opts in with
 * x-svc-dangerous-browser-access: true. A CORS preflight is answered before this runs
 * (core/http/browser-cors.ts), so the rule never refuses the preflight itself.
 */
export function installBrowserRule(app: FastifyInstance): void {
  // Callback style on the hot path: servers send no Origin, so the usual call looks at one header.
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.headers.origin === undefined || request.routeOptions.config.browserRule !== true) return done();
    if (request.headers['x-svc-dangerous-browser-access'] === 'true') return done();
    done(new ApiError('browser_access_denied'));
  });
}

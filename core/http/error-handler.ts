import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import type { ErrorCode } from '../kernel/error-catalogue.ts';
import { errorAnswer } from '../kernel/error-answer.ts';
import { ApiError, ClientGoneError, requestTooLarge } from '../kernel/errors.ts';
import { bodyIsRead, drainRequestBody } from './oversize-body.ts';

const METHODS: HTTPMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/** Router errors (bad percent-encoding, over-long path segments) that never reach a route. */
export function frameworkErrorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  void reply.header('x-request-id', request.id);
  const code = error.code === 'FST_ERR_BAD_URL' ? 'invalid_url' : error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'path_too_long' : 'invalid_request';
  sendError(reply, new ApiError(code, error.message));
}

/**
 * Every failure leaves in the spec's envelope: our ApiErrors as they are, Fastify's own errors
 * (bad JSON, too large, wrong content type) translated, unknown routes as 404, a known path with
 * the wrong method as 405 with Allow, and anything unexpected as a masked 500.
 */
export function installErrorHandling(app: FastifyInstance): void {
  // Only JSON bodies are accepted; text/plain is a 415.
  app.removeContentTypeParser('text/plain');
  // A shadow router of every registered route, so the not-found handler can tell 404 from 405.
  const shadow = FindMyWay({ ignoreTrailingSlash: true });
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      if (METHODS.includes(method as HTTPMethod)) {
        try {
          // With its constraints (a route served on another host name only), so Allow names what this host serves.
          shadow.on(method as HTTPMethod, route.url, { constraints: route.constraints ?? {} }, () => undefined);
        } catch {
          // Same route declared under two prefixes that normalise alike: already known.
        }
      }
    }
  });

  const notFound = (request: FastifyRequest): ApiError => {
    const path = request.url.split('?')[0] ?? '/';
    const constraints = { host: request.headers.host ?? '' };
    const allowed = METHODS.filter((method) => method !== request.method && shadow.find(method, path, constraints));
    if (allowed.length > 0) {
      const message = `Method ${request.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}`;
      return new ApiError('method_not_allowed', message, { headers: { allow: allowed.join(', ') } });
    }
    return new ApiError('route_not_found', `No route ${request.method} ${path}`);
  };
  // Answered before the body is read: an unknown route takes no credential, so anyone could
  // otherwise make the service read and parse 10 MB for a 404.
  app.addHook('onRequest', (request, _reply, done) => (request.is404 ? done(notFound(request)) : done()));
  app.setNotFoundHandler((request, reply) => sendError(reply, notFound(request)));

  app.setErrorHandler(errorHandlerWriting(envelopeOf));
}

/** What an error answer's body is on a route: the spec's envelope, or another API's error shape. */
export type ErrorBodyWriter = (error: ApiError) => unknown;

const envelopeOf: ErrorBodyWriter = (error) => error.toEnvelope();

/**
 * The error handler, answering with `body`: the app's (the envelope), or a route's own where it
 * speaks another API (Anthropic's Messages API), with the same statuses, headers and 413 draining.
 */
export function errorHandlerWriting(body: ErrorBodyWriter) {
  return (error: FastifyError | ApiError | Error, request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const answer = toApiError(error, request);
    // A body refused as too large may still be arriving: answered once it has been read (bounded), not reset.
    if (answer.status === 413 && !bodyIsRead(request.raw)) {
      void drainRequestBody(request.raw).then(() => sendError(reply, answer, body));
      return reply;
    }
    return sendError(reply, answer, body);
  };
}

/**
 * Any other 4xx a library raises, by status: the catalogued code that says the same. A status not
 * listed here is answered as a plain 400 invalid_request.
 */
const CLIENT_ERROR_CODES: Partial<Record<number, ErrorCode>> = {
  404: 'route_not_found',
  405: 'method_not_allowed',
  408: 'request_timeout',
  413: 'request_too_large',
  414: 'path_too_long',
  415: 'unsupported_media_type',
  431: 'request_header_too_large',
};

export function sendError(reply: FastifyReply, error: ApiError, body: ErrorBodyWriter = envelopeOf): FastifyReply {
  for (const [name, value] of Object.entries(error.headers)) void reply.header(name, value);
  return reply.code(error.status).type('application/json; charset=utf-8').send(body(error));
}

export function toApiError(error: unknown, request: FastifyRequest): ApiError {
  if (error instanceof ApiError || error instanceof ClientGoneError) return logged(errorAnswer(error, request.id), error, request);
  const fastifyError = error as FastifyError;
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return requestTooLarge(request.routeOptions.bodyLimit);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError('unsupported_media_type', `Unsupported content type ${JSON.stringify(request.headers['content-type'] ?? '')}; send application/json`);
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError('invalid_json', 'The body is empty but content-type says application/json');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError('invalid_content_length');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new ApiError('invalid_json', `The body is not valid JSON: ${fastifyError.message}`);
    default:
      break;
  }
  if (error instanceof SyntaxError || fastifyError.code === 'FST_ERR_CTP_INVALID_JSON') {
    return new ApiError('invalid_json', `The body is not valid JSON: ${error instanceof Error ? error.message : ''}`);
  }
  const status = fastifyError.statusCode;
  if (status && status >= 400 && status < 500) {
    // Fastify's own client errors say what was wrong; other libraries' messages may say too much.
    const ours = typeof fastifyError.code === 'string' && fastifyError.code.startsWith('FST_');
    return new ApiError(CLIENT_ERROR_CODES[status] ?? 'invalid_request', ours ? fastifyError.message : undefined);
  }
  return logged(errorAnswer(error, request.id), error, request);
}

/** Server faults are logged with what caused them; the client sees only the masked answer. */
function logged(answer: ApiError, error: unknown, request: FastifyRequest): ApiError {
  if (answer.status < 500) return answer;
  if (answer.code === 'service_unavailable' && !(error instanceof ApiError)) request.log.error({ err: error }, 'storage unavailable');
  else if (error instanceof ApiError) request.log.error({ err: error.cause ?? error }, error.message);
  else request.log.error({ err: error }, 'unhandled error');
  return answer;
}

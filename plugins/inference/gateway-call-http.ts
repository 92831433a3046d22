import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { CallSignal } from '../../core/gateway/call-signal.ts';
import { errorHandlerWriting } from '../../core/http/error-handler.ts';
import type { CountedResponse } from '../../core/gateway/metrics.ts';
import type { Credential } from '../../core/identity/credential.ts';
import { ClientGoneError } from '../../core/kernel/errors.ts';
import type { AnyCapability } from './capability.ts';
import type { CallExchange, GatewayCallPath } from './gateway-call.ts';
import { SseResponse } from './sse-response.ts';

const V1_CALL = { config: { auth: { scope: 'inference' as const }, surface: 'v1' as const } };
const V1_CALL_BROWSER_RULE = { config: { ...V1_CALL.config, browserRule: true as const } };

/** The route's options: the browser rule, and for a capability speaking another API its credential header and error shape. */
function routeOptions(capability: AnyCapability) {
  const options = capability.browserRule ? V1_CALL_BROWSER_RULE : V1_CALL;
  const foreign = capability.foreignApi;
  if (!foreign) return options;
  return { config: { ...options.config, auth: { ...options.config.auth, xApiKey: foreign.xApiKey } }, errorHandler: errorHandlerWriting(foreign.errorBody) };
}

/** Mounts a capability as `POST {endpoint}`: the HTTP adapter of the gateway call path. */
export function mountCapability(app: FastifyInstance, path: GatewayCallPath, capability: AnyCapability): void {
  app.post(capability.endpoint, routeOptions(capability), async (request, reply) => {
    const answer = await path.run(capability, new HttpExchange(request, reply));
    if (answer === null) return reply;
    return reply.code(answer.status).headers(answer.headers).send(answer.body);
  });
}

/** A Fastify request and reply as the path's exchange. */
class HttpExchange implements CallExchange {
  readonly signal = new CallSignal();

  constructor(
    private readonly request: FastifyRequest,
    private readonly reply: FastifyReply,
  ) {
    const raw = reply.raw;
    const signal = this.signal;
    raw.once('close', () => {
      if (!raw.writableFinished) signal.abort(new ClientGoneError());
    });
  }

  get requestId(): string {
    return this.request.id;
  }

  /** The response metrics hook counts what the path did not (core/http/v1-response-metrics.ts). */
  get counted(): CountedResponse {
    return this.request;
  }

  get credential(): Credential {
    return this.request.credential!;
  }

  get body(): unknown {
    return this.request.body;
  }

  setHeaders(headers: Readonly<Record<string, string>>): void {
    void this.reply.headers(headers);
  }

  openStream(headers: Readonly<Record<string, string>>): SseResponse {
    this.reply.hijack();
    const sse = new SseResponse(this.reply.raw);
    // What hooks and setHeaders put on the reply (request id, rate limits) goes out with the stream.
    sse.open({ ...(this.reply.getHeaders() as Record<string, string>), ...headers });
    return sse;
  }

  warn(details: Record<string, unknown>, message: string): void {
    this.request.log.warn(details, message);
  }
}

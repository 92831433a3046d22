import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { CallSignal } from '../../core/gateway/call-signal.ts';
import { errorHandlerWriting } from '../../core/http/error-handler.ts';
import type { CountedResponse } from '../../core/gateway/metrics.ts';
import type { Credential } from '../../core/identity/credential.ts';
import { incomingTraceHeaders, type TraceHeaders } from '../../core/observability/trace-context.ts';
import { mountUploadRoutes, readUpload } from '../../core/http/uploads.ts';
import { ClientGoneError } from '../../core/kernel/errors.ts';
import type { AnyCapability } from './capability.ts';
import { isByteStream, type CallExchange, type GatewayCallPath, type JsonAnswer } from './gateway-call.ts';
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

/**
 * Mounts a capability as `POST {endpoint}`: the HTTP adapter of the gateway call path. A JSON body
 * by default; a capability taking an upload gets its multipart form read into an object first
 * (core/http/uploads.ts: 413 over its limits, answered once the body is read, never a reset).
 */
export async function mountCapability(app: FastifyInstance, path: GatewayCallPath, capability: AnyCapability): Promise<void> {
  const options = routeOptions(capability);
  const upload = capability.upload;
  if (!upload) {
    app.post(capability.endpoint, options, (request, reply) => answerCall(path, capability, new HttpExchange(request, reply, request.body)));
    return;
  }
  await mountUploadRoutes(app, (uploads) => {
    uploads.post(capability.endpoint, { ...options, bodyLimit: upload.maxBodyBytes }, async (request, reply) =>
      answerCall(path, capability, new HttpExchange(request, reply, await formBody(request, upload.maxFileBytes))),
    );
  });
}

async function answerCall(path: GatewayCallPath, capability: AnyCapability, exchange: HttpExchange): Promise<FastifyReply> {
  let answer: JsonAnswer | null;
  try {
    answer = await path.run(capability, exchange);
  } catch (error) {
    exchange.over();
    throw error;
  }
  const reply = exchange.reply;
  // Bytes as they arrive go out as a stream; ending it (the client left) ends the upstream's.
  if (answer !== null && isByteStream(answer.body)) {
    return reply
      .code(answer.status)
      .headers(answer.headers)
      .send(Readable.from(answer.body, { objectMode: false }));
  }
  exchange.over();
  return answer === null ? reply : reply.code(answer.status).headers(answer.headers).send(answer.body);
}

/** A multipart form as an object: fields as strings, `name[]` fields as arrays, each file as `{ data, filename, contentType }`. */
async function formBody(request: FastifyRequest, maxFileBytes: number): Promise<Record<string, unknown>> {
  const fields = new Map<string, unknown>();
  for await (const part of readUpload(request, { maxFileBytes })) {
    if (part.type === 'file') {
      fields.set(part.name, { data: await buffer(part.stream), filename: part.filename, contentType: part.contentType });
    } else if (part.name.endsWith('[]')) {
      const name = part.name.slice(0, -2);
      const values = fields.get(name);
      fields.set(name, Array.isArray(values) ? [...values, part.value] : [part.value]);
    } else {
      fields.set(part.name, part.value);
    }
  }
  // fromEntries: a field named `__proto__` stays a field.
  return Object.fromEntries(fields);
}

/** A Fastify request and reply as the path's exchange. */
class HttpExchange implements CallExchange {
  readonly signal = new CallSignal();
  /** The client going away before the response is complete ends the call (499). */
  private readonly clientGone = (): void => {
    if (!this.reply.raw.writableFinished) this.signal.abort(new ClientGoneError());
  };

  constructor(
    private readonly request: FastifyRequest,
    readonly reply: FastifyReply,
    readonly body: unknown,
  ) {
    // `on` and an explicit removal, not `once`: with once's wrapper on every response, the
    // responses and what their calls held outlived two young-generation collections into the old
    // one (650-800 KiB at each collection under load, freed only by full ones; the plugin README).
    reply.raw.on('close', this.clientGone);
  }

  /** The call is over (answered, or failed for the error envelope): the connection is no longer watched for it. */
  over(): void {
    this.reply.raw.removeListener('close', this.clientGone);
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

  /** The caller's `traceparent` and `tracestate`, when the first is valid. */
  get traceHeaders(): TraceHeaders | undefined {
    const headers = this.request.headers;
    return incomingTraceHeaders(headers.traceparent, headers.tracestate);
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

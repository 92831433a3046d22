import type { IncomingHttpHeaders } from 'node:http';
import type { LookupFunction } from 'node:net';
import { Pool, type Dispatcher, type FormData } from 'undici';
import type { CallOptions, UpstreamTimeouts } from '../../core/gateway/provider.ts';
import { cancellationOf } from '../../core/gateway/call-options.ts';
import { assertPublicUrlSync, guardedLookup } from '../../core/net/outbound-url-guard.ts';
import { JsonExchange, type ExchangedResponse } from './json-exchange.ts';
import { StreamExchange } from './stream-exchange.ts';
import { timedConnector } from '../../core/net/timed-connector.ts';
import { errorFromStatus, errorFromTransport, protocolError, type ErrorContext } from './upstream-errors.ts';

export interface UpstreamClientOptions {
  /** Where calls go; request paths are appended to its path (`https://api.groq.com/openai/v1`). */
  baseUrl: string;
  timeouts: UpstreamTimeouts;
  /** Provider instance name, used in error messages. */
  label: string;
  /** Values (API keys) that must never appear in an error message. */
  secrets?: readonly string[];
  /** Skip the SSRF guard: for upstreams on the operator's own network and loopback test fakes. */
  allowPrivateNetwork?: boolean;
  /** Resolver under the SSRF guard (default: the system's). */
  lookup?: LookupFunction;
  /** Most sockets to the origin at once (default: unlimited, the gateway's own limits apply first). */
  connections?: number;
}

export interface UpstreamRequest {
  /** Appended to the base URL's path; may carry a query string. */
  path: string;
  /** Serialised as JSON. */
  body: unknown;
  headers?: Record<string, string>;
  /**
   * The call's options as the provider received them: the client takes the cancellation from them
   * (`cancellationOf`, the kernel's cheap signal when the kernel made them) and sends their
   * `traceHeaders`, so every built-in provider propagates trace context without a line of its own.
   */
  call: CallOptions;
  /** The `accept` header: JSON for postJson and SSE for postStream unless said otherwise (audio bytes: any type). */
  accept?: string;
}

/** A multipart/form-data upload (an audio file and its fields); undici writes the boundary and the content type. */
export interface UpstreamFormRequest extends Omit<UpstreamRequest, 'body'> {
  form: FormData;
}

/** An answer read whole as text, whatever its type (JSON, plain text, subtitles): the content type says which. */
export interface TextResponse {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

export interface JsonResponse<T = unknown> {
  status: number;
  headers: IncomingHttpHeaders;
  body: T;
}

export interface StreamResponse {
  status: number;
  headers: IncomingHttpHeaders;
  /**
   * The body's bytes. Failures while reading surface as UpstreamError; stopping early (break,
   * return) closes the upstream connection so the upstream stops generating.
   */
  body: AsyncIterable<Uint8Array>;
}

/** Upstream error bodies are for logs; no need to hold a megabyte of HTML. */
const ERROR_BODY_LIMIT = 64 * 1024;

/**
 * HTTP to one upstream origin: a keep-alive undici pool, the three deadlines, the caller's signal,
 * and every failure turned into UpstreamError.
 */
export class UpstreamHttpClient {
  private readonly pool: Pool;
  private readonly basePath: string;
  private readonly timeouts: UpstreamTimeouts;
  private readonly errors: ErrorContext;

  constructor(options: UpstreamClientOptions) {
    const url = assertPublicUrlSync(options.baseUrl, { allowPrivate: options.allowPrivateNetwork ?? false });
    this.basePath = url.pathname.replace(/\/+$/, '');
    this.timeouts = options.timeouts;
    this.errors = { label: options.label, secrets: (options.secrets ?? []).filter((secret) => secret !== '') };
    const lookup = options.allowPrivateNetwork ? options.lookup : guardedLookup(options.lookup);
    this.pool = new Pool(url.origin, {
      connections: options.connections ?? null,
      // our own deadlines are the ones that count; undici's only back them up
      headersTimeout: options.timeouts.firstByteMs,
      bodyTimeout: options.timeouts.totalMs,
      connect: timedConnector(options.timeouts.connectMs, lookup),
    });
  }

  /** POST a JSON body and read a JSON answer; non-2xx statuses throw. */
  async postJson<T = unknown>(request: UpstreamRequest): Promise<JsonResponse<T>> {
    const response = await this.exchange(request, jsonPayload(request.body), request.accept ?? 'application/json');
    if (response.status < 200 || response.status >= 300) throw errorFromStatus(this.errors, response.status, response.headers, response.text);
    try {
      return { status: response.status, headers: response.headers, body: JSON.parse(response.text) as T };
    } catch {
      throw protocolError(this.errors, `upstream answered ${response.status} with a body that is not JSON`, response.text.slice(0, 2000));
    }
  }

  /** POST a multipart form and read the answer whole, as text; non-2xx statuses throw. Same deadlines as JSON calls. */
  async postForm(request: UpstreamFormRequest): Promise<TextResponse> {
    const response = await this.exchange(request, { body: request.form, contentType: null }, request.accept ?? 'application/json');
    if (response.status < 200 || response.status >= 300) throw errorFromStatus(this.errors, response.status, response.headers, response.text);
    return response;
  }

  /** POST a JSON body and stream the answer (SSE, or bytes with `accept`); non-2xx statuses throw before anything is yielded. */
  async postStream(request: UpstreamRequest): Promise<StreamResponse> {
    const exchange = new StreamExchange(cancellationOf(request.call), this.timeouts, ERROR_BODY_LIMIT, (failure) =>
      errorFromTransport(this.errors, failure.error, failure.phase, failure.cause, this.timeouts),
    );
    const accept = request.accept ?? 'text/event-stream';
    if (exchange.open) this.dispatch(request, jsonPayload(request.body), accept, exchange);
    const { status, headers, text } = await exchange.head;
    if (status < 200 || status >= 300) throw errorFromStatus(this.errors, status, headers, text);
    return { status, headers, body: exchange };
  }

  async close(): Promise<void> {
    await this.pool.destroy();
  }

  /** The whole answer in one piece, through a dispatch handler (no body stream, no AbortController per call). */
  private exchange(request: RequestTarget, payload: Payload, accept: string): Promise<ExchangedResponse> {
    return new Promise((resolve, reject) => {
      const exchange = new JsonExchange(cancellationOf(request.call), this.timeouts, ERROR_BODY_LIMIT, resolve, (failure) =>
        reject(errorFromTransport(this.errors, failure.error, failure.phase, failure.cause, this.timeouts)),
      );
      if (exchange.open) this.dispatch(request, payload, accept, exchange);
    });
  }

  private dispatch(request: RequestTarget, payload: Payload, accept: string, handler: Dispatcher.DispatchHandler): void {
    const headers = payloadHeaders(request, payload, accept);
    this.pool.dispatch({ method: 'POST', path: this.basePath + request.path, headers, body: payload.body }, handler);
  }
}

/** Where a request goes and what it carries besides its body. */
type RequestTarget = Pick<UpstreamRequest, 'path' | 'headers' | 'call'>;

/** A request body and its content type; null lets undici set it (a form's boundary). */
interface Payload {
  body: string | FormData;
  contentType: string | null;
}

function jsonPayload(body: unknown): Payload {
  return { body: JSON.stringify(body), contentType: 'application/json' };
}

/** The provider's headers, the trace context (after them: the attempt's, never a static one from config), then the body's. */
function payloadHeaders(request: Pick<UpstreamRequest, 'headers' | 'call'>, payload: Payload, accept: string): Record<string, string> {
  const trace = request.call.traceHeaders;
  return payload.contentType === null ? { ...request.headers, ...trace, accept } : { ...request.headers, ...trace, 'content-type': payload.contentType, accept };
}

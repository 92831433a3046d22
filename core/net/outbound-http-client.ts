import type { IncomingHttpHeaders } from 'node:http';
import type { LookupFunction } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Agent, type Dispatcher, errors } from 'undici';
import { type Cancellation, CallSignal } from '../gateway/call-signal.ts';
import { type AbortCause, abortingDeadlines, type CallDeadlines } from './call-deadlines.ts';
import { assertPublicUrl, assertPublicUrlSync, guardedLookup, type OutboundRefusalReason, OutboundUrlRefusedError } from './outbound-url-guard.ts';
import { timedConnector } from './timed-connector.ts';

/**
 * The one HTTP client for URLs customers give us (webhook endpoints, customers' MCP servers), with
 * what such a URL needs that an upstream the operator chose does not:
 * - the SSRF guard twice: `check` when the URL is saved (its name resolved then), and on every
 *   connection as it is dialled, so a name that resolves elsewhere by then (DNS rebinding) is
 *   refused; the socket connects to the very addresses the guard checked;
 * - no redirect followed: a 3xx is an answer the caller sees (following it would leave the guard,
 *   and a customer's endpoint has no business sending us elsewhere);
 * - a connect deadline, a total deadline (to the answer's last byte), a cap on the answer's size
 *   and the caller's signal; or, for an answer read as it arrives (`stream`: server-sent events, a
 *   customer's MCP server), a headers deadline, an idle deadline between chunks and an optional
 *   total one (outbound-fetch.ts gives SDKs that take a `fetch` this mode);
 * - one error type with a kind, whose message names the method, the origin and the limit, never
 *   the path or query (which may carry a customer's token), the headers or a body.
 */

export type OutboundFailureKind = 'refused_address' | 'connect' | 'timeout' | 'too_large' | 'protocol' | 'aborted';

export class OutboundHttpError extends Error {
  readonly code = 'ERR_OUTBOUND_HTTP';
  readonly kind: OutboundFailureKind;
  /** For `refused_address`: what the guard refused (a scheme, a private address, text that is no URL). */
  readonly reason: OutboundRefusalReason | null;

  constructor(kind: OutboundFailureKind, message: string, reason: OutboundRefusalReason | null = null) {
    super(message);
    this.name = 'OutboundHttpError';
    this.kind = kind;
    this.reason = reason;
  }
}

export interface OutboundHttpSettings {
  /** Skip the guard: operators whose customers' endpoints are on their own network, and tests with loopback servers. */
  allowPrivateNetwork: boolean;
  connectTimeoutMs: number;
  /** From sending the request to the answer's last byte, connecting included. */
  totalTimeoutMs: number;
  /** The most answer body read; past it the call fails `too_large`. */
  maxResponseBytes: number;
  /** The resolver under the guard, at save and at connect time (default: the system's). */
  lookup?: LookupFunction;
}

export interface OutboundRequest {
  url: string | URL;
  /** Default GET. */
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  signal?: Cancellation;
  /** This call's own limits, instead of the client's. */
  totalTimeoutMs?: number;
  maxResponseBytes?: number;
  /**
   * An answer longer than the cap: `fail` (the default) fails the call `too_large`; `keep-start`
   * answers with its first `maxResponseBytes` and `truncated: true`, and closes the connection
   * (for a caller that judges by the status and keeps only an excerpt of the body, as webhook
   * deliveries do).
   */
  whenTooLarge?: 'fail' | 'keep-start';
}

export interface OutboundResponse {
  /** Whatever the server answered, 3xx included: redirects are not followed. */
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** The body was longer than the cap and is cut there (only with `whenTooLarge: 'keep-start'`). */
  truncated: boolean;
  /** From sending the request to the answer's last byte (delivery logs show it). */
  durationMs: number;
}

/**
 * A request whose answer is read as it arrives (server-sent events, a customer's MCP server):
 * the same guard, connect deadline, no redirects and error kinds as `request`, with deadlines fit
 * for a stream that may stay open for as long as its reader wants it.
 */
export interface OutboundStreamRequest {
  url: string | URL;
  /** Default GET. */
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  signal?: Cancellation;
  /** Until the answer's status and headers, connecting included (default: the client's total deadline). */
  headersTimeoutMs?: number;
  /** The longest the body may stay silent while it is being read; absent, a quiet stream waits for its reader to end it. */
  idleTimeoutMs?: number;
  /** The whole call, body included; absent, only the reader, the signal and the idle deadline end a stream. */
  totalTimeoutMs?: number;
  /** The most body bytes read over the stream's life; past it the body fails `too_large` (default: the client's cap). */
  maxResponseBytes?: number;
}

export interface OutboundStreamResponse {
  /** Whatever the server answered, 3xx included: redirects are not followed. */
  status: number;
  headers: IncomingHttpHeaders;
  /** Errors with an OutboundHttpError; cancelling it closes the connection. */
  body: ReadableStream<Uint8Array>;
  /** From sending the request to the answer's headers. */
  durationMs: number;
}

/** A timer cannot wait longer than 2^31 - 1 ms; "no total deadline" is that long, and always disarmed when the stream ends. */
const NO_DEADLINE_MS = 2_147_483_647;

/** A moment of the call, to name what failed when the transport gives only an error code. */
type Phase = 'before_answer' | 'body';

export class OutboundHttpClient {
  private readonly agent: Agent;

  constructor(private readonly settings: OutboundHttpSettings) {
    const lookup = settings.allowPrivateNetwork ? settings.lookup : guardedLookup(settings.lookup);
    this.agent = new Agent({
      connect: timedConnector(settings.connectTimeoutMs, lookup),
      // The call's own total deadline is the one that counts; undici's would only cut it sooner.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
  }

  /**
   * The check when a URL is saved: its scheme and host, and every address its name resolves to
   * now. A refusal is `refused_address` with the guard's reason; a name that does not resolve, `connect`.
   */
  async check(url: string | URL): Promise<URL> {
    try {
      return await assertPublicUrl(url, {
        allowPrivate: this.settings.allowPrivateNetwork,
        ...(this.settings.lookup ? { lookupAll: lookupAllWith(this.settings.lookup) } : {}),
      });
    } catch (error) {
      if (error instanceof OutboundUrlRefusedError) throw new OutboundHttpError('refused_address', error.message, error.reason);
      throw new OutboundHttpError('connect', `Could not resolve ${hostOf(url)} (${codeOf(error) ?? 'resolution failed'})`);
    }
  }

  /** One request, its answer read whole. Every failure is an OutboundHttpError; any status is an answer. */
  async request(request: OutboundRequest): Promise<OutboundResponse> {
    const method = request.method ?? 'GET';
    const url = this.checkedNow(request.url);
    const limits = {
      connectMs: this.settings.connectTimeoutMs,
      totalMs: request.totalTimeoutMs ?? this.settings.totalTimeoutMs,
      maxBytes: request.maxResponseBytes ?? this.settings.maxResponseBytes,
    };
    const where = `${method} ${url.origin}`;
    // A signal of its own when none is given: many calls listening on one shared signal would be a leak warning.
    const callerSignal = request.signal ?? new CallSignal();
    if (callerSignal.aborted) throw new OutboundHttpError('aborted', `${where}: cancelled before it was sent`);

    // No first-byte deadline of its own for a customer's URL: the total one bounds the whole call.
    const { deadlines, signal } = abortingDeadlines(callerSignal, { connectMs: limits.connectMs, firstByteMs: limits.totalMs, totalMs: limits.totalMs });
    const started = performance.now();
    try {
      let response: Dispatcher.ResponseData;
      try {
        response = await this.agent.request({
          origin: url.origin,
          path: url.pathname + url.search,
          method,
          headers: request.headers ?? {},
          body: request.body ?? null,
          signal,
        });
      } catch (error) {
        throw failureOf(where, error, 'before_answer', deadlines.cause, limits);
      }
      deadlines.headersArrived();
      const fail = (error: unknown) => failureOf(where, error, 'body', deadlines.cause, limits);
      const { body, truncated } = await readCapped(response, limits.maxBytes, request.whenTooLarge ?? 'fail', fail, where);
      return { status: response.statusCode, headers: response.headers, body, truncated, durationMs: performance.now() - started };
    } finally {
      deadlines.finish();
    }
  }

  /**
   * One request whose body is handed over as a stream, read as it arrives. Failing before the
   * headers rejects with an OutboundHttpError; failing later errors the body with one.
   */
  async stream(request: OutboundStreamRequest): Promise<OutboundStreamResponse> {
    const method = request.method ?? 'GET';
    const url = this.checkedNow(request.url);
    const headersMs = request.headersTimeoutMs ?? this.settings.totalTimeoutMs;
    const totalMs = request.totalTimeoutMs ?? NO_DEADLINE_MS;
    const limits = { connectMs: this.settings.connectTimeoutMs, totalMs, maxBytes: request.maxResponseBytes ?? this.settings.maxResponseBytes };
    const where = `${method} ${url.origin}`;
    const callerSignal = request.signal ?? new CallSignal();
    if (callerSignal.aborted) throw new OutboundHttpError('aborted', `${where}: cancelled before it was sent`);
    const { deadlines, signal } = abortingDeadlines(callerSignal, { connectMs: limits.connectMs, firstByteMs: headersMs, totalMs });
    const started = performance.now();
    let response: Dispatcher.ResponseData;
    try {
      response = await this.agent.request({ origin: url.origin, path: url.pathname + url.search, method, headers: request.headers ?? {}, body: request.body ?? null, signal });
    } catch (error) {
      deadlines.finish();
      if (deadlines.cause === 'first_byte') throw new OutboundHttpError('timeout', `${where}: no answer within ${headersMs} ms`);
      throw failureOf(where, error, 'before_answer', deadlines.cause, limits);
    }
    deadlines.headersArrived();
    const body = streamedBody(response, { where, maxBytes: limits.maxBytes, idleMs: request.idleTimeoutMs ?? null, deadlines, limits });
    return { status: response.statusCode, headers: response.headers, body, durationMs: performance.now() - started };
  }

  /** Closes kept-alive connections; calls still running fail. */
  async close(): Promise<void> {
    await this.agent.destroy();
  }

  /** The guard without I/O on each request: literal addresses never reach the lookup the dial runs. */
  private checkedNow(url: string | URL): URL {
    try {
      return assertPublicUrlSync(url, { allowPrivate: this.settings.allowPrivateNetwork });
    } catch (error) {
      if (error instanceof OutboundUrlRefusedError) throw new OutboundHttpError('refused_address', error.message, error.reason);
      throw error;
    }
  }
}

/**
 * The answer's body up to the cap; a declared or actual size past it stops the reading and closes
 * the connection, failing the call or, with `keep-start`, answering what fits.
 */
async function readCapped(
  response: Dispatcher.ResponseData,
  maxBytes: number,
  whenTooLarge: 'fail' | 'keep-start',
  failure: (error: unknown) => OutboundHttpError,
  where: string,
): Promise<{ body: Buffer; truncated: boolean }> {
  const tooLarge = () => new OutboundHttpError('too_large', `${where}: the answer is larger than the ${maxBytes}-byte limit`);
  const body = response.body;
  try {
    const declared = Number(response.headers['content-length']);
    if (whenTooLarge === 'fail' && Number.isFinite(declared) && declared > maxBytes) throw tooLarge();
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of body) {
      const buffer = chunk as Buffer;
      if (size + buffer.length > maxBytes) {
        if (whenTooLarge === 'fail') throw tooLarge();
        chunks.push(buffer.subarray(0, maxBytes - size));
        return { body: Buffer.concat(chunks, maxBytes), truncated: true };
      }
      size += buffer.length;
      chunks.push(buffer);
    }
    return { body: Buffer.concat(chunks, size), truncated: false };
  } catch (error) {
    throw error instanceof OutboundHttpError ? error : failure(error);
  } finally {
    // An answer left unread must not keep its connection (or its sender) busy. undici reports the
    // cut as an error on the body, which is ours and expected: nothing else listens any more.
    if (!body.readableEnded) body.on('error', () => undefined).destroy();
  }
}

/**
 * The answer's body as a web stream, pulled as its reader reads: each wait for the next chunk is
 * bounded by the idle deadline, the bytes over the stream's life by the cap. However it ends (read
 * to its end, failed, cancelled by the reader) the call's deadlines are disarmed and the
 * connection is released.
 */
function streamedBody(
  response: Dispatcher.ResponseData,
  context: { where: string; maxBytes: number; idleMs: number | null; deadlines: CallDeadlines; limits: { connectMs: number; totalMs: number } },
): ReadableStream<Uint8Array> {
  const { where, maxBytes, idleMs, deadlines, limits } = context;
  const source = response.body;
  const chunks = source[Symbol.asyncIterator]();
  let size = 0;
  let silentTooLong = false;
  const release = () => {
    deadlines.finish();
    // undici reports our cut as an error on the body: expected, and nobody else listens.
    if (!source.readableEnded) source.on('error', () => undefined).destroy();
  };
  const failure = (error: unknown): OutboundHttpError => {
    if (error instanceof OutboundHttpError) return error;
    if (silentTooLong) return new OutboundHttpError('timeout', `${where}: the answer stayed silent for more than ${idleMs} ms`);
    return failureOf(where, error, 'body', deadlines.cause, limits);
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const idle =
        idleMs === null
          ? undefined
          : setTimeout(() => {
              silentTooLong = true;
              source.destroy(new Error('idle deadline'));
            }, idleMs);
      try {
        const next = await chunks.next();
        if (next.done) {
          release();
          controller.close();
          return;
        }
        const chunk = next.value as Buffer;
        size += chunk.length;
        if (size > maxBytes) throw new OutboundHttpError('too_large', `${where}: the answer is larger than the ${maxBytes}-byte limit`);
        controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length));
      } catch (error) {
        const failed = failure(error);
        release();
        controller.error(failed);
      } finally {
        clearTimeout(idle);
      }
    },
    cancel() {
      release();
    },
  });
}

/** Parser codes of an answer that is not HTTP, and undici's for a body shorter or longer than declared. */
const PROTOCOL_CODES = new Set(['UND_ERR_RES_CONTENT_LENGTH_MISMATCH', 'UND_ERR_RES_EXCEEDED_MAX_SIZE', 'UND_ERR_INFO']);

/**
 * A transport failure as the one error type. Our own cuts are judged by their recorded cause,
 * not by whatever error undici surfaced for them; otherwise only an error's code is kept, never
 * its message.
 */
function failureOf(where: string, error: unknown, phase: Phase, cause: AbortCause | null, limits: { connectMs: number; totalMs: number }): OutboundHttpError {
  if (error instanceof OutboundHttpError) return error;
  if (cause === 'caller') return new OutboundHttpError('aborted', `${where}: cancelled by the caller`);
  if (cause !== null) return new OutboundHttpError('timeout', `${where}: no complete answer within ${limits.totalMs} ms`);
  if (error instanceof OutboundUrlRefusedError) return new OutboundHttpError('refused_address', `${where}: ${error.message}`, error.reason);
  const code = codeOf(error);
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return new OutboundHttpError('timeout', `${where}: could not connect within ${limits.connectMs} ms`);
  if (code === 'UND_ERR_INVALID_ARG') return new OutboundHttpError('protocol', `${where}: the request is not valid HTTP (a method or header)`);
  // undici's parser error carries an HPE_ code only for some failures (not for an answer that is no HTTP at all).
  if (error instanceof errors.HTTPParserError || (code !== undefined && (code.startsWith('HPE_') || PROTOCOL_CODES.has(code)))) {
    return new OutboundHttpError('protocol', `${where}: the answer is not valid HTTP (${code ?? 'unparseable'})`);
  }
  if (phase === 'before_answer') return new OutboundHttpError('connect', `${where}: no answer, the connection failed (${code ?? 'unknown error'})`);
  return new OutboundHttpError('protocol', `${where}: the connection failed before the answer was complete (${code ?? 'unknown error'})`);
}

function codeOf(error: unknown): string | undefined {
  if (error === null || typeof error !== 'object') return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

function hostOf(url: string | URL): string {
  try {
    return (typeof url === 'string' ? new URL(url) : url).hostname;
  } catch {
    return 'the host';
  }
}

/** The promise-style resolver the save-time check takes, over the callback one the dial uses: one resolver for both. */
function lookupAllWith(lookup: LookupFunction): (hostname: string) => Promise<Array<{ address: string; family: number }>> {
  return (hostname) =>
    new Promise((resolve, reject) => {
      lookup(hostname, { all: true }, (error, addresses) => {
        if (error) reject(error);
        else resolve(Array.isArray(addresses) ? addresses : [{ address: addresses, family: 0 }]);
      });
    });
}

import { GatewayCallOptions } from '../../core/gateway/call-options.ts';
import type { CallSignal } from '../../core/gateway/call-signal.ts';
import type { CheckedCall } from '../../core/gateway/gateway-calls.ts';
import type { Admission, CallHold, CallOutcome, InferenceAdmission } from '../../core/gateway/inference-admission.ts';
import type { InputGuard } from '../../core/gateway/input-guards.ts';
import type { CountedResponse, GatewayMetrics } from '../../core/gateway/metrics.ts';
import { UpstreamError, type Modality } from '../../core/gateway/provider.ts';
import type { Credential } from '../../core/identity/credential.ts';
import type { TraceHeaders } from '../../core/observability/trace-context.ts';
import { errorStatus } from '../../core/kernel/error-answer.ts';
import { ApiError, ClientGoneError } from '../../core/kernel/errors.ts';
import type { CallAnswer, CallEstimate, EventSink, GatewayCapability } from './capability.ts';
import type { CallTrace, CallTracer, AttemptTrace } from './call-trace.ts';
import type { CircuitBreaker } from './circuit-breaker.ts';
import { FailoverError, runWithFailover, type FailoverOptions, type FailoverOutcome } from './failover.ts';
import type { InferenceConfig } from './inference-config.ts';
import { guardInput } from './input-guarding.ts';
import type { CatalogueModel, ModelCatalogue } from './model-catalogue.ts';
import type { ProviderRegistry } from './provider-registry.ts';
import { planRoutes, type RouteCandidate } from './route-planner.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './inference-errors.ts';

/**
 * One call as the path sees it, whoever made it: an HTTP request (gateway-call-http.ts) or code
 * running a call for a key (gateway-calls-service.ts). The path never sees Fastify.
 */
export interface CallExchange {
  readonly requestId: string;
  readonly credential: Credential;
  readonly body: unknown;
  /** Aborted when the caller goes away. */
  readonly signal: CallSignal;
  /** Headers for whatever answer leaves, errors included: the rate-limit headers, once admitted. */
  setHeaders(headers: Readonly<Record<string, string>>): void;
  /** Commits to a 200 event stream; absent where the caller cannot read one. */
  openStream?(headers: Readonly<Record<string, string>>): EventSink & { end(): void };
  warn(details: Record<string, unknown>, message: string): void;
  /** The HTTP response the call is counted on, so it is counted once (absent for calls from code). */
  readonly counted?: CountedResponse;
  /** The caller's W3C trace context, when it sent a valid `traceparent` (read once per call). */
  readonly traceHeaders?: TraceHeaders | undefined;
  /** The spend hold a call from code runs against (a batch line); never set over HTTP. */
  readonly hold?: CallHold | undefined;
}

/**
 * An answer that is not an event stream (one is answered through the exchange, and run() returns
 * null): JSON, or with a `content-type` header, text, bytes, or bytes as they arrive.
 */
export interface JsonAnswer {
  status: number;
  headers: Readonly<Record<string, string>>;
  body: unknown;
}

export interface GatewayCallDeps {
  catalogue: ModelCatalogue;
  providers: ProviderRegistry;
  breaker: CircuitBreaker;
  admission: InferenceAdmission;
  config: InferenceConfig;
  metrics: GatewayMetrics;
  /** Read once (extensions.all(InputGuardsPoint)); empty in the usual deployment. */
  guards: readonly InputGuard[];
  /** Null when tracing is off: then no span is made, and the caller's trace headers pass through to the upstream. */
  tracer: CallTracer | null;
}

/** What a call holds once admitted. */
interface AdmittedCall<M extends Modality, B> {
  capability: GatewayCapability<M, B>;
  exchange: CallExchange;
  body: B;
  model: CatalogueModel;
  candidates: RouteCandidate<M>[];
  admission: Admission;
  estimate: CallEstimate;
  started: number;
  /** The call's spans; null when tracing is off. */
  trace: CallTrace | null;
  /** When tracing is off: the caller's trace headers, sent upstream as they came (each attempt sends its own span's otherwise). */
  callerTrace: TraceHeaders | undefined;
}

/**
 * The gateway call path: every /v1 capability runs through it, in this order: parse (400), model
 * lookup (404), the capability's checks (400), input guards (422), admission (429/402, rate-limit
 * headers from here on), route planning and failover, then the JSON answer or the stream with its
 * commit point; metrics and the request log (admission.finish) exactly once, however it ended.
 */
export class GatewayCallPath {
  private readonly failover: Omit<FailoverOptions, 'signal'>;

  constructor(private readonly deps: GatewayCallDeps) {
    this.failover = {
      settings: deps.config.failover,
      breaker: deps.breaker,
      onAttemptFailed: (candidate: RouteCandidate, error: UpstreamError) => deps.metrics.upstreamError(candidate.provider.name, error.kind),
    };
  }

  get admission(): InferenceAdmission {
    return this.deps.admission;
  }

  /** Runs one call: the JSON answer, or null when it was answered as a stream. Throws errors for the caller's envelope. */
  run<M extends Modality, B>(capability: GatewayCapability<M, B>, exchange: CallExchange): Promise<JsonAnswer | null> {
    const caller = exchange.traceHeaders;
    // One check per call: with tracing off, no span, not even a no-op one, is made.
    const tracer = this.deps.tracer;
    if (tracer === null) return this.call(capability, exchange, null, caller);
    return this.traced(capability, exchange, tracer.begin(capability.modality, exchange.requestId, caller));
  }

  /** The call in its span, which ends with the outcome or, failing before admission, with the error. */
  private async traced<M extends Modality, B>(capability: GatewayCapability<M, B>, exchange: CallExchange, trace: CallTrace): Promise<JsonAnswer | null> {
    try {
      return await this.call(capability, exchange, trace, undefined);
    } catch (error) {
      trace.fail(error);
      throw error;
    }
  }

  private async call<M extends Modality, B>(
    capability: GatewayCapability<M, B>,
    exchange: CallExchange,
    trace: CallTrace | null,
    callerTrace: TraceHeaders | undefined,
  ): Promise<JsonAnswer | null> {
    const { deps } = this;
    const credential = exchange.credential;
    const pending = this.prepare(capability, credential, exchange.body);
    // At once on the usual call: a promise only where a file must be read (transcriptions).
    const prepared = pending instanceof Promise ? await pending : pending;
    const model = prepared.model;
    let body = prepared.body;
    if (deps.guards.length > 0) {
      // At once when no guard has a check for this caller (the usual call): no promise to wait for.
      const guarded = guardInput(deps.guards, capability, body, model, exchange, deps.admission);
      body = guarded instanceof Promise ? await guarded : guarded;
    }
    const streaming = capability.streaming?.wanted(body) === true;
    trace?.model(model.id, streaming);
    if (streaming && !exchange.openStream) throw streamsOverHttpOnly();
    const candidates = planRoutes(model, capability.modality, deps.providers, deps.breaker);
    const counted = capability.estimate(body, model);
    // A number at once on the usual call: no promise unless a long text is being counted in slices.
    const estimate = counted instanceof Promise ? await counted : counted;
    const admissionRequest = {
      credential,
      requestId: exchange.requestId,
      endpoint: capability.endpoint,
      model: model.id,
      stream: streaming,
      estimate,
      countedInputTokens: estimate.countedInputTokens,
      ...(exchange.hold ? { hold: exchange.hold } : {}),
    };
    const admission = trace === null ? await deps.admission.admit(admissionRequest) : await trace.admission(() => deps.admission.admit(admissionRequest));
    exchange.setHeaders(admission.headers);
    const call: AdmittedCall<M, B> = { capability, exchange, body, model, candidates, admission, estimate, started: performance.now(), trace, callerTrace };
    return streaming ? this.stream(call) : this.once(call);
  }

  /**
   * What a call would be, without running it (GatewayCalls.check): parsed, its model looked up and
   * the capability's checks passed as run() would, and the estimate admission would reserve. No
   * input guards (they may call out) and nothing taken.
   */
  async check<M extends Modality, B>(capability: GatewayCapability<M, B>, credential: Credential, input: unknown): Promise<CheckedCall> {
    const { body, model } = await this.prepare(capability, credential, input);
    if (capability.streaming?.wanted(body) === true) throw streamsOverHttpOnly();
    const counted = capability.estimate(body, model);
    const { inputTokens, maxOutputTokens, units } = counted instanceof Promise ? await counted : counted;
    return { model: model.id, batch: model.batch, estimate: { inputTokens, maxOutputTokens, ...(units ? { units } : {}) } };
  }

  /** Parse (400), model lookup (404), the capability's checks (400) and its model defaults: the first steps of every call. */
  private prepare<M extends Modality, B>(capability: GatewayCapability<M, B>, credential: Credential, input: unknown): Prepared<B> | Promise<Prepared<B>> {
    const parsed = capability.parse(input);
    if (parsed instanceof Promise) return parsed.then((body) => this.checked(capability, credential, body));
    return this.checked(capability, credential, parsed);
  }

  private checked<M extends Modality, B>(capability: GatewayCapability<M, B>, credential: Credential, parsed: B): Prepared<B> {
    let body = parsed;
    const model = this.deps.catalogue.require(credential, capability.modelOf(body));
    capability.check?.(body, model, credential);
    if (capability.withModelDefaults) body = capability.withModelDefaults(body, model);
    return { body, model };
  }

  private finish(call: AdmittedCall<Modality, unknown>, outcome: CallOutcome): void {
    this.deps.metrics.observeCall(call.capability.endpoint, call.model.id, outcome, call.exchange.counted);
    if (call.exchange.hold) this.deps.metrics.observeBatchLine(call.capability.endpoint, call.model.id, outcome.status);
    const trace = call.trace;
    if (trace === null) {
      call.admission.finish(outcome);
      return;
    }
    trace.settle(() => call.admission.finish(outcome));
    trace.end(outcome);
  }

  /** Before anything reached the client: settle the call as failed and rethrow for the error envelope. */
  private failed(call: AdmittedCall<Modality, unknown>, error: unknown): never {
    const { status, code } = errorStatus(error);
    this.finish(call, {
      status,
      errorCode: code,
      usage: null,
      provider: null,
      upstreamModel: null,
      attempts: error instanceof FailoverError ? error.attempts : 0,
      latencyMs: Math.round(performance.now() - call.started),
      ttftMs: null,
    });
    throw error;
  }

  private async once<M extends Modality, B>(call: AdmittedCall<M, B>): Promise<JsonAnswer> {
    const { capability, body, model, exchange } = call;
    let outcome: FailoverOutcome<unknown, RouteCandidate<M>>;
    let answer: CallAnswer;
    try {
      const trace = call.trace;
      outcome = await runWithFailover<RouteCandidate<M>, unknown>(
        call.candidates,
        trace === null
          ? (candidate, signal) => capability.attempt(candidate, body, new GatewayCallOptions(signal, exchange.requestId, call.callerTrace))
          : (candidate, signal) => trace.attempted(candidate, (headers) => capability.attempt(candidate, body, new GatewayCallOptions(signal, exchange.requestId, headers))),
        { ...this.failover, signal: exchange.signal },
      );
      answer = capability.answer(outcome.value, body, model);
    } catch (error) {
      this.failed(call, error);
    }
    const headers: Record<string, string> = { 'x-svc-provider': outcome.candidate.provider.name, 'x-svc-attempts': String(outcome.attempts) };
    if (answer.contentType !== undefined) headers['content-type'] = answer.contentType;
    const answered = Math.round(performance.now() - call.started);
    const settle = (status: number, errorCode: string | null) =>
      this.finish(call, {
        status,
        errorCode,
        usage: answer.usage,
        ...(answer.units ? { units: answer.units } : {}),
        provider: outcome.candidate.provider.name,
        upstreamModel: outcome.candidate.upstreamModel,
        attempts: outcome.attempts,
        latencyMs: Math.round(performance.now() - call.started),
        // For bytes sent as they arrive: when the first could go out.
        ttftMs: isByteStream(answer.body) ? answered : null,
        ...(call.admission.logBodies ? { bodies: answer.logged ?? { request: body, response: answer.body } } : {}),
      });
    if (answer.contentType !== undefined && isByteStream(answer.body)) {
      return { status: 200, headers, body: settledWhenSent(answer.body, exchange, settle) };
    }
    settle(200, null);
    return { status: 200, headers, body: answer.body };
  }

  private async stream<M extends Modality, B>(call: AdmittedCall<M, B>): Promise<null> {
    const { exchange, body, model } = call;
    const streaming = call.capability.streaming!;
    let opened: FailoverOutcome<OpenedStream<unknown>, RouteCandidate<M>>;
    try {
      opened = await runWithFailover<RouteCandidate<M>, OpenedStream<unknown>>(call.candidates, (candidate, signal) => this.openUntilCommit(call, candidate, signal), {
        ...this.failover,
        signal: exchange.signal,
      });
    } catch (error) {
      this.failed(call, error);
    }

    const { iterator, buffered, committedAt, attempt } = opened.value;
    const sink = exchange.openStream!({ 'x-svc-provider': opened.candidate.provider.name, 'x-svc-attempts': String(opened.attempts) });
    const writer = streaming.writer(body, model, { requestId: exchange.requestId, countedInputTokens: call.estimate.countedInputTokens, logBodies: call.admission.logBodies });
    let status = 200;
    let errorCode: string | null = null;
    let broken: unknown;
    let settled = false;
    const settle = () => {
      if (settled) return;
      settled = true;
      // The attempt's span covers the whole upstream exchange, so it ends with the stream.
      if (attempt && broken === undefined) attempt.succeeded();
      else attempt?.failed(broken);
      const tally = writer.settle();
      this.finish(call, {
        status,
        errorCode,
        usage: tally.usage,
        ...(tally.units ? { units: tally.units } : {}),
        provider: opened.candidate.provider.name,
        upstreamModel: opened.candidate.upstreamModel,
        attempts: opened.attempts,
        latencyMs: Math.round(performance.now() - call.started),
        ttftMs: Math.round(committedAt - call.started),
        ...(call.admission.logBodies ? { bodies: { request: body, response: tally.logged ?? null } } : {}),
      });
    };
    try {
      // A write is a promise only while the client is slow: no promise per chunk otherwise.
      for (const event of buffered) {
        const written = writer.write(event, sink);
        if (written) await written;
      }
      for (;;) {
        if (exchange.signal.aborted) throw new ClientGoneError();
        const next = await iterator.next();
        if (next.done) break;
        const written = writer.write(next.value, sink);
        if (written) await written;
      }
      // Settled (its row journaled) before the closing events go out: a process killed after its client
      // read the whole answer then bills the call by its own row, never as interrupted. A client that
      // leaves during those last bytes has had every content event; the call counts as served.
      settle();
      await writer.close(sink);
    } catch (error) {
      if (exchange.signal.aborted || error instanceof ClientGoneError) {
        status = 499;
        errorCode = 'client_closed_request';
      } else {
        // Past the commit point a failure can only be reported in-band.
        status = 502;
        errorCode = 'upstream_error';
        broken = error;
        exchange.warn({ err: error, route: opened.candidate.key }, 'stream failed after its commit point');
        await writer.fail(new ApiError('upstream_error', 'The upstream stream failed part-way; the response is incomplete. It is safe to retry.'), sink);
      }
      void iterator.return?.().catch(() => undefined);
    } finally {
      settle();
      sink.end();
    }
    return null;
  }

  /**
   * Opens a stream on one route and reads until the commit point or the time-to-first-token limit.
   * Until then nothing has reached the client, so a failure here can still fail over.
   */
  private async openUntilCommit<M extends Modality, B>(call: AdmittedCall<M, B>, candidate: RouteCandidate<M>, attemptSignal: CallSignal): Promise<OpenedStream<unknown>> {
    const streaming = call.capability.streaming!;
    const ttftMs = call.model.ttftTimeoutMs ?? this.deps.config.failover.ttftTimeoutMs;
    // Its own signal: a slow first token cuts this attempt without ending the client's call.
    const upstream = attemptSignal.child();
    const attempt = call.trace?.attempt(candidate);
    let timer: NodeJS.Timeout | undefined;
    const ttft = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const late = new UpstreamError('timeout', `no content within ${ttftMs} ms`);
        upstream.signal.abort(late);
        reject(late);
      }, ttftMs);
    });
    const options = new GatewayCallOptions(upstream.signal, call.exchange.requestId, attempt ? attempt.headers : call.callerTrace);
    const iterator = streaming.open(candidate, call.body, options)[Symbol.asyncIterator]();
    const buffered: unknown[] = [];
    try {
      for (;;) {
        const pending = iterator.next();
        // If the timeout wins the race, the abandoned read rejects later: keep that quiet.
        pending.catch(() => undefined);
        const next = await Promise.race([pending, ttft]);
        if (next.done) throw new UpstreamError('protocol', 'the stream ended before any content');
        buffered.push(next.value);
        if (streaming.commits(next.value)) {
          const committedAt = performance.now();
          attempt?.firstChunk();
          call.trace?.firstChunk(committedAt - call.started);
          return { iterator, buffered, committedAt, attempt };
        }
      }
    } catch (error) {
      attempt?.failed(error);
      upstream.signal.abort(error);
      void iterator.return?.().catch(() => undefined);
      throw error;
    } finally {
      clearTimeout(timer);
      upstream.detach();
    }
  }
}

/** An answer of bytes that arrive over time (rather than JSON, text or bytes in one piece). */
export function isByteStream(body: unknown): body is AsyncIterable<Uint8Array> {
  return typeof body === 'object' && body !== null && Symbol.asyncIterator in body;
}

/**
 * Bytes that go out as they arrive (an upstream's audio): the call is settled when the last has
 * been read (200), the upstream broke off (502, the client sees the transfer cut: the status was
 * sent) or whoever was reading stopped (499: the client left). Whoever holds the answer must read
 * it or end it (`return()`), as the HTTP adapter's stream does when the socket closes.
 */
function settledWhenSent(bytes: AsyncIterable<Uint8Array>, exchange: CallExchange, settle: (status: number, errorCode: string | null) => void): AsyncIterable<Uint8Array> {
  const upstream = bytes[Symbol.asyncIterator]();
  let settled = false;
  const once = (status: number, errorCode: string | null) => {
    if (settled) return;
    settled = true;
    settle(status, errorCode);
  };
  const iterator: AsyncIterator<Uint8Array> = {
    async next() {
      try {
        const next = await upstream.next();
        if (next.done) once(200, null);
        return next;
      } catch (error) {
        if (exchange.signal.aborted) once(499, 'client_closed_request');
        else {
          exchange.warn({ err: error }, 'the upstream broke off an answer after it had begun');
          once(502, 'upstream_error');
        }
        throw error;
      }
    },
    async return() {
      once(499, 'client_closed_request');
      await upstream.return?.();
      return { done: true, value: undefined };
    },
  };
  return { [Symbol.asyncIterator]: () => iterator };
}

/** A call's body after its first steps, and its model. */
interface Prepared<B> {
  body: B;
  model: CatalogueModel;
}

const streamsOverHttpOnly = () => new ApiError('invalid_parameter', 'Streams are answered over HTTP only; leave stream unset here', { param: 'stream' });

interface OpenedStream<E> {
  iterator: AsyncIterator<E>;
  /** Events read before and including the commit point. */
  buffered: E[];
  committedAt: number;
  /** The attempt's span when tracing is on: it ends with the stream. */
  attempt: AttemptTrace | undefined;
}

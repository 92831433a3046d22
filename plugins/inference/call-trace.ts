import { createTraceState, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type Span, type Tracer } from '@opentelemetry/api';
import type { CallOutcome } from '../../core/gateway/inference-admission.ts';
import { UpstreamError, type Modality } from '../../core/gateway/provider.ts';
import { errorStatus } from '../../core/kernel/error-answer.ts';
import { ATTR, GEN_AI, GEN_AI_OPERATION } from '../../core/observability/semantic-attributes.ts';
import { formatTraceparent, parseTraceparent, type TraceHeaders } from '../../core/observability/trace-context.ts';
import type { RouteCandidate } from './route-planner.ts';

/**
 * A span's start to the sub-millisecond. Without it the SDK starts a span at `Date.now()`, whole
 * milliseconds, and ends it that start plus its measured duration: two spans' ends could then be out of
 * order by up to a millisecond (an attempt seemed to outlast the call that contained it).
 */
const preciseNow = (): number => performance.timeOrigin + performance.now();

/** The gateway's own attributes, beside the conventions'. */
const SVC = {
  REQUEST_ID: 'svc.request_id',
  ATTEMPTS: 'svc.attempts',
  /** The route an attempt went to: `provider/upstream model`. */
  ROUTE: 'svc.route',
  ATTEMPT: 'svc.attempt',
} as const;

/**
 * Makes the spans of gateway calls (only when tracing is on: the call path holds null otherwise).
 * A call is one trace under the caller's `traceparent` when it sent one:
 *
 *   `{operation} {model}` (server)   the call, from the body read to its outcome
 *   ├─ `admission`                   limits, caps and the money reservation
 *   ├─ `{operation} {upstream model}` (client), one per upstream attempt, siblings in order
 *   └─ `settle`                      metering's settlement, which may end after the call's span
 *
 * GenAI attributes on the call: operation, request and response model, provider (our configured
 * name, as the metrics label it), token usage, the time to the first chunk of a stream; `error.type`
 * is the error code the client received. Each attempt sends its own span's context upstream.
 */
export class CallTracer {
  constructor(private readonly tracer: Tracer) {}

  begin(modality: Modality, requestId: string, caller: TraceHeaders | undefined): CallTrace {
    return new CallTrace(this.tracer, GEN_AI_OPERATION[modality], requestId, callerContext(caller));
  }
}

/** The caller's span as the parent (continuing its trace), or a new trace. */
function callerContext(caller: TraceHeaders | undefined): Context {
  const parent = caller && parseTraceparent(caller.traceparent);
  if (!parent) return ROOT_CONTEXT;
  const traceState = caller.tracestate === undefined ? undefined : createTraceState(caller.tracestate);
  return trace.setSpanContext(ROOT_CONTEXT, { ...parent, isRemote: true, ...(traceState ? { traceState } : {}) });
}

/** One call's spans. */
export class CallTrace {
  private readonly span: Span;
  private readonly context: Context;
  private ended = false;
  private attempts = 0;

  constructor(
    private readonly tracer: Tracer,
    private readonly operation: string,
    requestId: string,
    parent: Context,
  ) {
    this.span = tracer.startSpan(operation, { kind: SpanKind.SERVER, startTime: preciseNow(), attributes: { [GEN_AI.OPERATION_NAME]: operation, [SVC.REQUEST_ID]: requestId } }, parent);
    this.context = trace.setSpan(ROOT_CONTEXT, this.span);
  }

  /** The model is known: the span takes the conventions' name, `{operation} {model}`. */
  model(model: string, stream: boolean): void {
    this.span.updateName(`${this.operation} ${model}`);
    this.span.setAttribute(GEN_AI.REQUEST_MODEL, model);
    if (stream) this.span.setAttribute(GEN_AI.REQUEST_STREAM, true);
  }

  /** Admission in its own span; a refusal (429, 402) is recorded with its code and passed on. */
  async admission<T>(admit: () => Promise<T>): Promise<T> {
    const span = this.tracer.startSpan('admission', { startTime: preciseNow() }, this.context);
    try {
      const admitted = await admit();
      span.end();
      return admitted;
    } catch (error) {
      const { status, code } = errorStatus(error);
      markError(span, code, status);
      span.end();
      throw error;
    }
  }

  /** One attempt that ends when `run` settles, given the trace headers to send upstream. */
  async attempted<T>(candidate: RouteCandidate, run: (headers: TraceHeaders) => Promise<T>): Promise<T> {
    const attempt = this.attempt(candidate);
    try {
      const value = await run(attempt.headers);
      attempt.succeeded();
      return value;
    } catch (error) {
      attempt.failed(error);
      throw error;
    }
  }

  /** An upstream attempt's span, its context what the attempt sends upstream; the caller ends it. */
  attempt(candidate: RouteCandidate): AttemptTrace {
    const provider = candidate.provider.name;
    const upstreamModel = candidate.upstreamModel;
    this.attempts += 1;
    const span = this.tracer.startSpan(
      `${this.operation} ${upstreamModel}`,
      {
        kind: SpanKind.CLIENT,
        startTime: preciseNow(),
        attributes: {
          [GEN_AI.OPERATION_NAME]: this.operation,
          [GEN_AI.PROVIDER_NAME]: provider,
          [GEN_AI.REQUEST_MODEL]: upstreamModel,
          [SVC.ROUTE]: candidate.key,
          [SVC.ATTEMPT]: this.attempts,
        },
      },
      this.context,
    );
    return new AttemptTrace(span);
  }

  /** A stream reached its first chunk (the commit point) `ms` after the call began. */
  firstChunk(ms: number): void {
    this.span.setAttribute(GEN_AI.RESPONSE_TIME_TO_FIRST_CHUNK, ms / 1000);
  }

  /** Runs the admission's finish in the `settle` span, which ends when the settlement it returns does. */
  settle(finish: () => PromiseLike<unknown> | undefined): void {
    const span = this.tracer.startSpan('settle', { startTime: preciseNow() }, this.context);
    const settling = finish();
    if (settling === undefined) span.end();
    else
      settling.then(
        () => span.end(),
        () => {
          markError(span, 'internal_error', 500);
          span.end();
        },
      );
  }

  /** The call's outcome, once admitted. */
  end(outcome: CallOutcome): void {
    if (this.ended) return;
    this.ended = true;
    const span = this.span;
    if (span.isRecording()) {
      if (outcome.provider !== null) span.setAttribute(GEN_AI.PROVIDER_NAME, outcome.provider);
      if (outcome.upstreamModel !== null) span.setAttribute(GEN_AI.RESPONSE_MODEL, outcome.upstreamModel);
      const usage = outcome.usage;
      if (usage) {
        span.setAttribute(GEN_AI.USAGE_INPUT_TOKENS, usage.inputTokens);
        span.setAttribute(GEN_AI.USAGE_OUTPUT_TOKENS, usage.outputTokens);
        if (usage.cachedInputTokens > 0) span.setAttribute(GEN_AI.USAGE_CACHE_READ_INPUT_TOKENS, usage.cachedInputTokens);
      }
      span.setAttribute(SVC.ATTEMPTS, outcome.attempts);
      span.setAttribute(ATTR.HTTP_RESPONSE_STATUS_CODE, outcome.status);
      if (outcome.errorCode !== null) markError(span, outcome.errorCode, outcome.status);
    }
    span.end();
  }

  /** A call that failed before admission (400, 404, 422 and so on) or whose error ended it: a no-op once ended. */
  fail(error: unknown): void {
    if (this.ended) return;
    this.ended = true;
    const { status, code } = errorStatus(error);
    this.span.setAttribute(ATTR.HTTP_RESPONSE_STATUS_CODE, status);
    markError(this.span, code, status);
    this.span.end();
  }
}

/** One upstream attempt: a client span, and the trace headers the upstream request carries. */
export class AttemptTrace {
  readonly headers: TraceHeaders;
  private readonly started = performance.now();

  constructor(private readonly span: Span) {
    const context = span.spanContext();
    const traceparent = formatTraceparent(context);
    const tracestate = context.traceState?.serialize();
    this.headers = tracestate ? { traceparent, tracestate } : { traceparent };
  }

  /** A stream's first chunk arrived on this attempt. */
  firstChunk(): void {
    this.span.setAttribute(GEN_AI.RESPONSE_TIME_TO_FIRST_CHUNK, (performance.now() - this.started) / 1000);
  }

  succeeded(): void {
    this.span.end();
  }

  /** The upstream's failure: its kind (`server`, `timeout`, `connect` and so on) as `error.type`, its status when it answered one. */
  failed(error: unknown): void {
    const span = this.span;
    if (error instanceof UpstreamError) {
      if (error.status !== null) span.setAttribute(ATTR.HTTP_RESPONSE_STATUS_CODE, error.status);
      span.setAttribute(ATTR.ERROR_TYPE, error.kind);
      // Upstream messages are redacted of secrets and shown to clients already (FailoverError).
      span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
    } else {
      span.setAttribute(ATTR.ERROR_TYPE, errorStatus(error).code);
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  }
}

/**
 * `error.type` is the code the client received; the span is an error only for a 5xx, as the HTTP
 * conventions have it for servers: a refusal (429, 402, 404) is the gateway doing its job.
 */
function markError(span: Span, code: string, status: number): void {
  span.setAttribute(ATTR.ERROR_TYPE, code);
  if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR, message: code });
}

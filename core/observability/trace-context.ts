/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` and `tracestate`
 * headers a caller sends to continue its trace, and what the gateway sends upstream. Read here
 * rather than through an OpenTelemetry propagator because the gateway passes a caller's context
 * through even when tracing is off, where no OpenTelemetry SDK is loaded at all.
 */

/** The headers as they travel: `traceparent`, and `tracestate` when there is one. */
export type TraceHeaders = Readonly<{ traceparent: string; tracestate?: string }>;

/** A caller's parent span, read from its `traceparent`. */
export interface ParentSpan {
  traceId: string;
  spanId: string;
  traceFlags: number;
}

/** version-traceid-parentid-flags, lower-case hex; a later version may append `-…` fields. */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ALL_ZEROS = /^0+$/;

/**
 * Vendors must pass on at least 512 characters of tracestate and may drop a longer one; the
 * gateway drops it rather than forward a caller's kilobytes to every upstream.
 */
const TRACESTATE_MAX_CHARS = 512;

/** The parent a `traceparent` names, or null when it is not one the specification accepts. */
export function parseTraceparent(value: string): ParentSpan | null {
  const match = TRACEPARENT.exec(value);
  if (!match) return null;
  const [, version, traceId, spanId, flags, rest] = match as unknown as [string, string, string, string, string, string | undefined];
  // ff is forbidden; version 00 has exactly four fields; ids of all zeros are invalid.
  if (version === 'ff' || (version === '00' && rest !== undefined)) return null;
  if (ALL_ZEROS.test(traceId) || ALL_ZEROS.test(spanId)) return null;
  return { traceId, spanId, traceFlags: Number.parseInt(flags, 16) };
}

/** The `traceparent` of a span (version 00). */
export function formatTraceparent(span: ParentSpan): string {
  return `00-${span.traceId}-${span.spanId}-${(span.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/**
 * A caller's trace headers as received, when its `traceparent` is valid: nothing otherwise (a
 * malformed one, or two of them, which Node joins with a comma, starts no trace of the caller's).
 * `tracestate` counts only beside a valid `traceparent`, as the specification says.
 */
export function incomingTraceHeaders(traceparent: unknown, tracestate: unknown): TraceHeaders | undefined {
  if (typeof traceparent !== 'string' || parseTraceparent(traceparent) === null) return undefined;
  if (typeof tracestate === 'string' && tracestate !== '' && tracestate.length <= TRACESTATE_MAX_CHARS) return { traceparent, tracestate };
  return { traceparent };
}

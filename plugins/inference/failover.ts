import type { CallSignal } from '../../core/gateway/call-signal.ts';
import type { ErrorCode } from '../../core/kernel/error-catalogue.ts';
import { ApiError, ClientGoneError } from '../../core/kernel/errors.ts';
import { UpstreamError } from '../../core/gateway/provider.ts';
import type { CircuitBreaker } from './circuit-breaker.ts';
import type { RouteCandidate } from './route-planner.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './inference-errors.ts';

export interface FailoverSettings {
  maxAttempts: number;
  retriesPerRoute: number;
  initialBackoffMs: number;
  maxBackoffMs: number;
  maxRetryAfterMs: number;
  deadlineMs: number;
}

export interface FailoverOutcome<T, C extends RouteCandidate = RouteCandidate> {
  value: T;
  candidate: C;
  attempts: number;
}

/** An ApiError that also says how many upstream attempts were made (for headers and logs). */
export class FailoverError extends ApiError {
  constructor(
    code: ErrorCode,
    message: string,
    readonly attempts: number,
    readonly lastRoute: string | null,
  ) {
    super(code, message, { headers: { 'x-svc-attempts': String(attempts) } });
  }
}

export interface FailoverOptions<C extends RouteCandidate = RouteCandidate> {
  settings: FailoverSettings;
  breaker: CircuitBreaker;
  /** The client's signal: aborting it stops the current attempt and any wait. */
  signal: CallSignal;
  now?: () => number;
  random?: () => number;
  /**
   * The pause before a retry on the same route (backoff or retry-after): resolves after `ms`, or
   * rejects with ClientGoneError once `signal` aborts. Default: a timer. Tests pass one that records
   * the delays and returns at once.
   */
  wait?: (ms: number, signal: CallSignal) => Promise<void>;
  /** Told about every failed attempt (metrics). */
  onAttemptFailed?(candidate: C, error: UpstreamError): void;
}

/**
 * The one place any modality's call runs with failover: the call is the `attempt` (a chat
 * completion, an opened stream, an embedding, an image…), made on each candidate's `api` with
 * `new GatewayCallOptions(signal, requestId)`. Tries the candidates in order. Connect errors, timeouts, 5xx and 429 are retried on the same
 * route with exponential backoff and full jitter (honouring the upstream's retry-after when it is
 * short), then the next route is tried; an upstream that says the request itself is wrong (4xx)
 * ends the search at once. No new attempt starts after the deadline.
 */
export async function runWithFailover<C extends RouteCandidate, T>(
  candidates: readonly C[],
  attempt: (candidate: C, signal: CallSignal) => Promise<T>,
  options: FailoverOptions<C>,
): Promise<FailoverOutcome<T, C>> {
  const { settings, breaker, signal } = options;
  const now = options.now ?? Date.now;
  const random = options.random ?? Math.random;
  const wait = options.wait ?? waitOrAbort;
  const deadline = now() + settings.deadlineMs;
  let attempts = 0;
  let last: { error: UpstreamError; route: string } | null = null;

  if (candidates.length === 0) {
    throw new FailoverError('upstream_error', 'No upstream route can serve this model right now; it is safe to retry later', 0, null);
  }

  search: for (const candidate of candidates) {
    for (let onRoute = 0; ; onRoute += 1) {
      if (attempts >= settings.maxAttempts || (attempts > 0 && now() >= deadline)) break search;
      if (signal.aborted) throw new ClientGoneError();
      attempts += 1;
      try {
        // Attempts run one after another and each ends before the next starts, so the client's
        // signal is the only cancellation an attempt needs.
        const value = await attempt(candidate, signal);
        return { value, candidate, attempts };
      } catch (caught) {
        if (signal.aborted) throw new ClientGoneError();
        if (!(caught instanceof UpstreamError)) throw caught;
        last = { error: caught, route: candidate.key };
        options.onAttemptFailed?.(candidate, caught);
        if (caught.kind === 'client' && caught.status !== 404) {
          throw new FailoverError('upstream_rejected_request', `The model rejected the request: ${caught.message}`, attempts, candidate.key);
        }
        void breaker.recordFailure(candidate.key);
        const retryAfter = caught.retryAfterMs;
        const sameRouteAgain = caught.retryable && onRoute < settings.retriesPerRoute && !(caught.kind === 'rate_limited' && (retryAfter === null || retryAfter > settings.maxRetryAfterMs));
        if (!sameRouteAgain) continue search;
        const backoff = random() * Math.min(settings.maxBackoffMs, settings.initialBackoffMs * 2 ** onRoute);
        const delay = retryAfter ?? backoff;
        if (now() + delay >= deadline) continue search;
        await wait(delay, signal);
      }
    }
  }
  const detail = last ? ` (last: ${describe(last.error)} from ${last.route})` : '';
  throw new FailoverError('upstream_error', `The model could not be reached after ${attempts} attempt(s)${detail}; it is safe to retry`, attempts, last?.route ?? null);
}

function describe(error: UpstreamError): string {
  return error.status ? `${error.kind} ${error.status}` : error.kind;
}

/** The default wait: a timer the client's going away cuts short. */
export function waitOrAbort(ms: number, signal: CallSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new ClientGoneError());
    const timer = setTimeout(() => {
      stopListening();
      resolve();
    }, ms);
    const stopListening = signal.onAbort(() => {
      clearTimeout(timer);
      reject(new ClientGoneError());
    });
  });
}

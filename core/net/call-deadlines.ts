import { onCancel, type Cancellation } from '../gateway/call-signal.ts';
import type { UpstreamTimeouts } from '../gateway/provider.ts';

/** Why we cut a call ourselves; set before the abort so the resulting error can be named. */
export type AbortCause = 'caller' | 'first_byte' | 'total';

/**
 * One outbound call's cut-offs (an upstream's, or a customer URL's through the outbound client):
 * the caller's signal and the first-byte and total deadlines. The first of them to fire calls
 * `onCut` once with its cause (kept in `cause`, so the error can say which it was); finish()
 * disarms them all.
 */
export class CallDeadlines {
  private firstByteTimer: NodeJS.Timeout | undefined;
  private totalTimer: NodeJS.Timeout | undefined;
  private finished = false;
  private stopListening: (() => void) | null = null;
  cause: AbortCause | null = null;

  constructor(
    callerSignal: Cancellation,
    timeouts: UpstreamTimeouts,
    private readonly onCut: (cause: AbortCause) => void,
  ) {
    if (callerSignal.aborted) {
      this.cut('caller');
      return;
    }
    this.stopListening = onCancel(callerSignal, () => this.cut('caller'));
    this.firstByteTimer = setTimeout(() => this.cut('first_byte'), timeouts.firstByteMs);
    this.totalTimer = setTimeout(() => this.cut('total'), timeouts.totalMs);
  }

  headersArrived(): void {
    clearTimeout(this.firstByteTimer);
  }

  /** Idempotent; must run once the call is over, whichever way it ended. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.firstByteTimer);
    clearTimeout(this.totalTimer);
    this.stopListening?.();
  }

  private cut(cause: AbortCause): void {
    if (this.cause !== null || this.finished) return;
    this.cause = cause;
    this.onCut(cause);
  }
}

/** Deadlines that abort a signal of their own: for undici calls that take an AbortSignal. */
export function abortingDeadlines(callerSignal: Cancellation, timeouts: UpstreamTimeouts): { deadlines: CallDeadlines; signal: AbortSignal } {
  const controller = new AbortController();
  const deadlines = new CallDeadlines(callerSignal, timeouts, (cause) => controller.abort(new Error(`upstream call cut: ${cause}`)));
  return { deadlines, signal: controller.signal };
}

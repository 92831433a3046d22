import type { UpstreamTimeouts } from '../../core/provider.ts';
import type { AbortCause } from './upstream-errors.ts';

/**
 * One upstream call's abort signal: the caller's signal plus the first-byte and total deadlines,
 * remembering which of them fired so the error can say so.
 */
export class CallDeadlines {
  private readonly controller = new AbortController();
  private firstByteTimer: NodeJS.Timeout | undefined;
  private totalTimer: NodeJS.Timeout | undefined;
  private finished = false;
  cause: AbortCause | null = null;

  constructor(
    private readonly callerSignal: AbortSignal,
    timeouts: UpstreamTimeouts,
  ) {
    if (callerSignal.aborted) {
      this.abort('caller');
      return;
    }
    callerSignal.addEventListener('abort', this.onCallerAbort, { once: true });
    this.firstByteTimer = setTimeout(() => this.abort('first_byte'), timeouts.firstByteMs);
    this.totalTimer = setTimeout(() => this.abort('total'), timeouts.totalMs);
  }

  get signal(): AbortSignal {
    return this.controller.signal;
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
    this.callerSignal.removeEventListener('abort', this.onCallerAbort);
  }

  private readonly onCallerAbort = () => this.abort('caller');

  private abort(cause: AbortCause): void {
    if (this.cause !== null || this.finished) return;
    this.cause = cause;
    this.controller.abort(new Error(`upstream call cut: ${cause}`));
  }
}

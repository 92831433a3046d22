import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { Cancellation } from '../../core/gateway/call-signal.ts';
import type { UpstreamTimeouts } from '../../core/gateway/provider.ts';
import { CallDeadlines } from '../../core/net/call-deadlines.ts';
import type { AbortCause, CallPhase } from './upstream-errors.ts';

export interface ExchangedResponse {
  status: number;
  headers: IncomingHttpHeaders;
  /** The whole body, or its first `errorBodyLimit` bytes when the status is not 2xx. */
  text: string;
}

export interface ExchangeFailure {
  error: unknown;
  phase: CallPhase;
  cause: AbortCause | null;
}

/**
 * One request whose whole answer is wanted at once (a JSON completion), as an undici dispatch
 * handler: the body is gathered into buffers instead of going through a Readable stream, and the
 * caller's signal and the first-byte and total deadlines cut the call through undici's own
 * controller, so a call makes no AbortController of its own. Settles exactly once.
 */
export class JsonExchange implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | null = null;
  /** Assigned last in the constructor: a caller that has already given up cuts the call from inside it. */
  private readonly deadlines: CallDeadlines;
  private settled = false;
  private phase: CallPhase = 'before_headers';
  private status = 0;
  private headers: IncomingHttpHeaders = {};
  private readonly chunks: Buffer[] = [];
  private size = 0;

  constructor(
    callerSignal: Cancellation,
    timeouts: UpstreamTimeouts,
    private readonly errorBodyLimit: number,
    private readonly resolve: (response: ExchangedResponse) => void,
    private readonly reject: (failure: ExchangeFailure) => void,
  ) {
    this.deadlines = new CallDeadlines(callerSignal, timeouts, (cause) => this.cut(cause));
  }

  /** False when the call was over before it was dispatched (the caller had already given up). */
  get open(): boolean {
    return !this.settled;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    // Cut while it waited for a connection: stop it before anything is written.
    if (this.settled) controller.abort(new Error('upstream call already over'));
  }

  onResponseStart(_controller: Dispatcher.DispatchController, status: number, headers: IncomingHttpHeaders): void {
    this.deadlines.headersArrived();
    this.phase = 'body';
    this.status = status;
    this.headers = headers;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.settled) return;
    this.chunks.push(chunk);
    this.size += chunk.length;
    // An error page is for logs: keep its start, stop reading the rest.
    if ((this.status < 200 || this.status >= 300) && this.size >= this.errorBodyLimit) {
      this.succeed();
      controller.abort(new Error('error body long enough'));
    }
  }

  onResponseEnd(): void {
    this.succeed();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.fail(error, null);
  }

  /** Ends the call ourselves; the cause names the error the caller sees. */
  private cut(cause: AbortCause): void {
    if (this.settled) return;
    const error = new Error(`upstream call cut: ${cause}`);
    this.fail(error, cause);
    this.controller?.abort(error);
  }

  private succeed(): void {
    if (this.settled) return;
    this.finish();
    const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size);
    const text = this.status >= 200 && this.status < 300 ? body.toString('utf8') : body.subarray(0, this.errorBodyLimit).toString('utf8');
    this.resolve({ status: this.status, headers: this.headers, text });
  }

  private fail(error: unknown, cause: AbortCause | null): void {
    if (this.settled) return;
    this.finish();
    this.reject({ error, phase: this.phase, cause });
  }

  private finish(): void {
    this.settled = true;
    // Undefined only while the constructor is still running (a caller that had already given up).
    (this.deadlines as CallDeadlines | undefined)?.finish();
  }
}

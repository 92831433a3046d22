import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { Cancellation } from '../../core/gateway/call-signal.ts';
import type { UpstreamTimeouts } from '../../core/gateway/provider.ts';
import { CallDeadlines } from '../../core/net/call-deadlines.ts';
import type { ExchangedResponse, ExchangeFailure } from './json-exchange.ts';
import type { AbortCause, CallPhase } from './upstream-errors.ts';

/** Bytes the reader may fall behind by before the upstream socket is paused (a slow client). */
const HIGH_WATER_BYTES = 64 * 1024;

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

/** The reader's pending `next()`. */
interface Waiter {
  resolve(result: IteratorResult<Uint8Array>): void;
  reject(error: unknown): void;
}

/**
 * One request whose answer is read as it arrives (SSE, audio bytes), as an undici dispatch handler,
 * so a stream costs what a JSON call does: no Readable body and async iterator over it, and no
 * AbortController (the caller's signal and the first-byte and total deadlines cut the call through
 * undici's own controller). `head` settles with the status and headers, or for a status that is not
 * 2xx with the start of the error body; then the object itself is the body, for one reader reading
 * one chunk at a time. Stopping early (`return`) closes the upstream connection, so the upstream
 * stops generating. Failures reach the reader as `toError(failure)` made them.
 */
export class StreamExchange implements Dispatcher.DispatchHandler, AsyncIterableIterator<Uint8Array> {
  readonly head: Promise<ExchangedResponse>;
  private resolveHead!: (response: ExchangedResponse) => void;
  private rejectHead!: (error: unknown) => void;
  private controller: Dispatcher.DispatchController | null = null;
  /** Assigned last in the constructor: a caller that has already given up cuts the call from inside it. */
  private readonly deadlines: CallDeadlines;
  private phase: CallPhase = 'before_headers';
  private status = 0;
  private headers: IncomingHttpHeaders = {};
  /** Chunks that arrived while nobody was waiting (the reader was writing the last one out). */
  private readonly queue: Buffer[] = [];
  private queuedBytes = 0;
  private waiting: Waiter | null = null;
  private ended = false;
  private failure: unknown = null;

  constructor(
    callerSignal: Cancellation,
    timeouts: UpstreamTimeouts,
    private readonly errorBodyLimit: number,
    private readonly toError: (failure: ExchangeFailure) => unknown,
  ) {
    this.head = new Promise((resolve, reject) => {
      this.resolveHead = resolve;
      this.rejectHead = reject;
    });
    // Nobody may be awaiting it when the call fails during the body: the reader sees that failure.
    this.head.catch(() => undefined);
    this.deadlines = new CallDeadlines(callerSignal, timeouts, (cause) => this.cut(cause));
  }

  /** False when the call was over before it was dispatched (the caller had already given up). */
  get open(): boolean {
    return !this.ended;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    // Cut while it waited for a connection: stop it before anything is written.
    if (this.ended) controller.abort(new Error('upstream call already over'));
  }

  onResponseStart(_controller: Dispatcher.DispatchController, status: number, headers: IncomingHttpHeaders): void {
    this.deadlines.headersArrived();
    this.phase = 'body';
    this.status = status;
    this.headers = headers;
    if (status >= 200 && status < 300) this.resolveHead({ status, headers, text: '' });
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.ended) return;
    const waiting = this.waiting;
    if (waiting !== null && this.queue.length === 0) {
      this.waiting = null;
      waiting.resolve({ done: false, value: chunk });
      return;
    }
    this.queue.push(chunk);
    this.queuedBytes += chunk.length;
    if (this.isError()) {
      // An error page is for logs: keep its start, stop reading the rest.
      if (this.queuedBytes >= this.errorBodyLimit) {
        this.answerError();
        controller.abort(new Error('error body long enough'));
      }
    } else if (this.queuedBytes >= HIGH_WATER_BYTES && !controller.paused) {
      controller.pause();
    }
  }

  onResponseEnd(): void {
    if (this.ended) return;
    if (this.isError()) {
      this.answerError();
      return;
    }
    this.finish();
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.resolve(DONE);
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.fail(error, null);
  }

  next(): Promise<IteratorResult<Uint8Array>> {
    const chunk = this.queue.shift();
    if (chunk !== undefined) {
      this.queuedBytes -= chunk.length;
      if (this.queue.length === 0 && this.controller?.paused) this.controller.resume();
      return Promise.resolve({ done: false, value: chunk });
    }
    if (this.failure !== null) {
      const failure = this.failure;
      // Reported once; the reader is done after it.
      this.failure = null;
      return Promise.reject(failure);
    }
    if (this.ended) return Promise.resolve(DONE);
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
    });
  }

  /** The reader stopped early: the upstream must not go on generating into a dead socket. */
  return(): Promise<IteratorResult<Uint8Array>> {
    if (!this.ended) {
      this.finish();
      this.controller?.abort(new Error('the reader stopped'));
    }
    this.queue.length = 0;
    this.failure = null;
    return Promise.resolve(DONE);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  private isError(): boolean {
    return this.status < 200 || this.status >= 300;
  }

  /** A status that is not 2xx: the head settles with the start of the body, for the error. */
  private answerError(): void {
    this.finish();
    const body = this.queue.length === 1 ? this.queue[0]! : Buffer.concat(this.queue, this.queuedBytes);
    this.queue.length = 0;
    const text = body.subarray(0, this.errorBodyLimit).toString('utf8');
    this.resolveHead({ status: this.status, headers: this.headers, text });
  }

  /** Ends the call ourselves; the cause names the error the caller sees. */
  private cut(cause: AbortCause): void {
    if (this.ended) return;
    const error = new Error(`upstream call cut: ${cause}`);
    this.fail(error, cause);
    this.controller?.abort(error);
  }

  private fail(error: unknown, cause: AbortCause | null): void {
    if (this.ended) return;
    // Broken off while an error page was read: the status alone still says what happened.
    if (this.phase === 'body' && this.isError()) {
      this.answerError();
      return;
    }
    const phase = this.phase;
    this.finish();
    const failure = this.toError({ error, phase, cause });
    if (phase === 'before_headers') {
      this.rejectHead(failure);
      return;
    }
    const waiting = this.waiting;
    this.waiting = null;
    if (waiting) waiting.reject(failure);
    else this.failure = failure;
  }

  private finish(): void {
    this.ended = true;
    // Undefined only while the constructor is still running (a caller that had already given up).
    (this.deadlines as CallDeadlines | undefined)?.finish();
  }
}

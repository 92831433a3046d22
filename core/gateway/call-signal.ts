/**
 * Cancellation for one gateway call: aborted when the client goes away, or when the failover
 * loop gives up on an attempt. Cheap to make and to listen to, which matters because every call
 * needs one: on Node 20 an AbortSignal costs more to create and to attach its first listener to
 * than the rest of a call's bookkeeping together. A real AbortSignal, tied to this one, is made
 * only when something asks for `signal` (a provider handing it to fetch, say).
 */
export class CallSignal {
  aborted = false;
  reason: unknown = undefined;
  private listeners: Array<(reason: unknown) => void> | null = null;
  private controller: AbortController | null = null;

  /** Idempotent: the first reason wins and listeners run once. */
  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const listeners = this.listeners;
    this.listeners = null;
    if (listeners) for (const listener of listeners) listener(reason);
    this.controller?.abort(reason);
  }

  /**
   * Runs `listener` once on abort (not if already aborted: check `aborted` first). Returns the
   * function that removes it again.
   */
  onAbort(listener: (reason: unknown) => void): () => void {
    if (this.aborted) return noop;
    (this.listeners ??= []).push(listener);
    return () => {
      const index = this.listeners?.indexOf(listener) ?? -1;
      if (index !== -1) this.listeners!.splice(index, 1);
    };
  }

  /** A standard AbortSignal that aborts with this one (made on first use). */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  /** A signal aborted when this one is, or by itself (one attempt of a call, say); detach() stops the forwarding. */
  child(): { signal: CallSignal; detach: () => void } {
    const child = new CallSignal();
    if (this.aborted) child.abort(this.reason);
    const detach = this.onAbort((reason) => child.abort(reason));
    return { signal: child, detach };
  }
}

function noop(): void {}

/** Either kind of cancellation, as the kernel's HTTP client and deadlines accept it. */
export type Cancellation = AbortSignal | CallSignal;

/** Listens for the abort of either kind; returns the function that stops listening. */
export function onCancel(cancellation: Cancellation, listener: () => void): () => void {
  if (cancellation instanceof CallSignal) return cancellation.onAbort(listener);
  cancellation.addEventListener('abort', listener, { once: true });
  return () => cancellation.removeEventListener('abort', listener);
}

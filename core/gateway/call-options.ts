import type { CallOptions } from './provider.ts';
import type { CallSignal, Cancellation } from './call-signal.ts';
import type { TraceHeaders } from '../observability/trace-context.ts';

/**
 * The options the kernel hands a provider call: to its author just the public CallOptions, a
 * standard `signal` made only when read. The CallSignal behind it is a private field, reachable
 * only through cancellationOf, so the kernel's own HTTP client keeps the cheap path without the
 * provider contract showing it. A class, because an object literal with a getter is built the
 * slow way on every call.
 */
export class GatewayCallOptions implements CallOptions {
  readonly #cancel: CallSignal;

  constructor(
    cancel: CallSignal,
    readonly requestId: string,
    readonly traceHeaders?: TraceHeaders,
  ) {
    this.#cancel = cancel;
  }

  get signal(): AbortSignal {
    return this.#cancel.signal;
  }

  /** The cheapest cancellation behind a call's options: the CallSignal when the kernel made them. */
  static cancellationOf(options: CallOptions): Cancellation {
    return #cancel in options ? options.#cancel : options.signal;
  }
}

/** What a built-in provider hands the kernel's HTTP client as `signal`. */
export const cancellationOf = GatewayCallOptions.cancellationOf;

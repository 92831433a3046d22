import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Waits for a condition that something running on its own makes true (another process, a server's
 * pub/sub, a background timer) when the code offers no event or promise to await. Prefer awaiting
 * the code's own promise (`settled()`, `idle()`, a fake's `arrived()`) where there is one; never
 * sleep for a fixed time to decide a result.
 *
 * The deadline only bounds a failing test: it is long, so a loaded machine never trips it, and it
 * proves nothing about speed. A test that claims "within N ms" must measure that itself.
 */
export interface EventuallyOptions {
  /** Give up after this long (default 10 s). */
  timeoutMs?: number;
  /** Look again after this long (default 10 ms). */
  everyMs?: number;
}

/** What a truthy check returned. */
export type Truthy<T> = Exclude<T, null | undefined | false | 0 | ''>;

/**
 * Resolves with the first truthy value `check` returns (checked at once, then every `everyMs`);
 * rejects naming `what` and the last value once `timeoutMs` has passed.
 */
export async function eventually<T>(check: () => T | Promise<T>, what: string, options: EventuallyOptions = {}): Promise<Truthy<T>> {
  const { timeoutMs = 10_000, everyMs = 10 } = options;
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as Truthy<T>;
    if (performance.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${String(value)})`);
    await sleep(everyMs);
  }
}

/** The same wait for `t.ok(await waitFor(...), 'what')`: true once `check` is, false at the deadline. */
export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 10_000, everyMs = 10): Promise<boolean> {
  return eventually(check, 'a condition', { timeoutMs, everyMs }).then(
    () => true,
    () => false,
  );
}

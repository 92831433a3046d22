import type { ErrorCode } from '../kernel/error-catalogue.ts';
import { ApiError } from '../kernel/errors.ts';
import type { RateEntry, RateLimiter } from '../ports/coordination.ts';

/**
 * Takes one attempt from every bucket, all or none, on the coordination store's limiter (so every
 * replica counts together), or refuses with `code` (a 429) and a `retry-after` in whole seconds: the
 * throttling of anything a caller could guess (passwords, set-password tokens, promotion codes).
 */
export async function throttleAttempts(limiter: RateLimiter, entries: RateEntry[], code: ErrorCode): Promise<void> {
  const result = await limiter.consume(entries);
  if (result.allowed) return;
  const waitMs = Math.max(...result.decisions.map((decision) => decision.retryAfterMs));
  throw new ApiError(code, undefined, { headers: { 'retry-after': String(Math.max(1, Math.ceil(waitMs / 1000))) } });
}

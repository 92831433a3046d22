/**
 * When a failed attempt is tried again: the schedule's wait after attempt `attempt` (1 for the first),
 * or later if the receiver's `retry-after` asked for more (never sooner: a short retry-after does not
 * bring a retry forward), bounded by `maxRetryAfterSeconds`. Null when the schedule is used up: the
 * delivery has failed for good.
 */
export interface RetryPolicy {
  retryScheduleSeconds: readonly number[];
  maxRetryAfterSeconds: number;
}

export function nextAttemptAt(policy: RetryPolicy, attempt: number, now: Date, retryAfterMs: number | null): Date | null {
  const waitSeconds = policy.retryScheduleSeconds[attempt - 1];
  if (waitSeconds === undefined) return null;
  const asked = retryAfterMs === null ? 0 : Math.min(retryAfterMs, policy.maxRetryAfterSeconds * 1000);
  return new Date(now.getTime() + Math.max(waitSeconds * 1000, asked));
}

/** The attempts a delivery gets: the first and one per wait of the schedule. */
export function attemptsAllowed(policy: RetryPolicy): number {
  return policy.retryScheduleSeconds.length + 1;
}

/** `retry-after` as seconds or an HTTP date, in milliseconds from `now`; null when absent or unreadable. */
export function retryAfterMs(header: string | string[] | undefined, now: Date): number | null {
  const value = (Array.isArray(header) ? header[0] : header)?.trim();
  if (!value) return null;
  if (/^\d{1,10}$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - now.getTime());
}

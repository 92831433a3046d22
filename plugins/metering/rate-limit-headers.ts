import type { RateDecision } from '../../core/ports/coordination.ts';

/** OpenAI's duration style: "120ms", "1.5s", "6m0s". */
function formatDuration(ms: number): string {
  const whole = Math.max(0, Math.ceil(ms));
  if (whole < 1000) return `${whole}ms`;
  const seconds = whole / 1000;
  if (seconds < 60) return `${Number(seconds.toFixed(3))}s`;
  const minutes = Math.floor(seconds / 60);
  return `${minutes}m${Math.round(seconds - minutes * 60)}s`;
}

/** The scope closest to its limit speaks for the family: that is the one a client will hit first. */
function tightest(decisions: RateDecision[]): RateDecision | null {
  let best: RateDecision | null = null;
  for (const decision of decisions) if (!best || decision.remaining < best.remaining) best = decision;
  return best;
}

/**
 * x-ratelimit-* headers. A family with no limit set is absent, never zero: a missing header means
 * "not measured".
 */
export function rateLimitHeaders(requests: RateDecision[], tokens: RateDecision[]): Record<string, string> {
  const headers: Record<string, string> = {};
  const r = tightest(requests);
  if (r) {
    headers['x-ratelimit-limit-requests'] = String(r.limit);
    headers['x-ratelimit-remaining-requests'] = String(r.remaining);
    headers['x-ratelimit-reset-requests'] = formatDuration(r.resetMs);
  }
  const t = tightest(tokens);
  if (t) {
    headers['x-ratelimit-limit-tokens'] = String(t.limit);
    headers['x-ratelimit-remaining-tokens'] = String(t.remaining);
    headers['x-ratelimit-reset-tokens'] = formatDuration(t.resetMs);
  }
  return headers;
}

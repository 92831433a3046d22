import type { IncomingHttpHeaders } from 'node:http';

function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function parseMilliseconds(text: string | undefined): number | null {
  if (text === undefined || text.trim() === '') return null;
  const value = Number(text);
  return Number.isFinite(value) && value >= 0 ? Math.ceil(value) : null;
}

/**
 * How long the upstream asked us to wait, from (in order of precision) `retry-after-ms`,
 * Azure's `x-ms-retry-after-ms`, then `retry-after` as seconds or an HTTP date. Null when absent
 * or unreadable; a date in the past reads as 0.
 */
export function parseRetryAfterMs(headers: IncomingHttpHeaders, now: number = Date.now()): number | null {
  const ms = parseMilliseconds(headerValue(headers, 'retry-after-ms')) ?? parseMilliseconds(headerValue(headers, 'x-ms-retry-after-ms'));
  if (ms !== null) return ms;

  const retryAfter = headerValue(headers, 'retry-after')?.trim();
  if (!retryAfter) return null;
  if (/^\d+(\.\d+)?$/.test(retryAfter)) return Math.ceil(Number(retryAfter) * 1000);
  const date = Date.parse(retryAfter);
  if (Number.isNaN(date)) return null;
  return Math.max(0, date - now);
}

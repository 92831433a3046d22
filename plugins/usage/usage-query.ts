import { z } from 'zod';
import { ApiError } from '../../core/errors.ts';
import type { Cursor, Granularity } from './usage-store.ts';

/** Turns the validated query strings into what the store takes: time windows and cursors. */

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
export const DEFAULT_WINDOW_DAYS = 30;
/** The widest series: a year and a half of days, or about eleven weeks of hours. */
export const MAX_SERIES_BUCKETS = 2_000;

const invalid = (param: string, message: string) => new ApiError(400, 'invalid_parameter', message, { param });

/** `YYYY-MM-DD` is midnight UTC of that day; anything else passed the schema as an ISO timestamp. */
export function parseInstant(value: string): Date {
  return new Date(/^\d{4}-\d{2}-\d{2}$/.test(value) ? `${value}T00:00:00.000Z` : value);
}

export interface TimeRange {
  from: Date;
  to: Date;
}

/** [from, to): `to` defaults to now, `from` to 30 days before `to`. */
export function resolveRange(query: { from?: string; to?: string }, now: Date): TimeRange {
  const to = query.to !== undefined ? parseInstant(query.to) : now;
  const from = query.from !== undefined ? parseInstant(query.from) : new Date(to.getTime() - DEFAULT_WINDOW_DAYS * DAY_MS);
  if (from.getTime() >= to.getTime()) throw invalid('from', "'from' must be before 'to' ('to' is exclusive)");
  return { from, to };
}

/** Either bound may be absent (no limit on that side). */
export function resolveOpenRange(query: { from?: string; to?: string }): { from?: Date; to?: Date } {
  const from = query.from !== undefined ? parseInstant(query.from) : undefined;
  const to = query.to !== undefined ? parseInstant(query.to) : undefined;
  if (from && to && from.getTime() >= to.getTime()) throw invalid('from', "'from' must be before 'to' ('to' is exclusive)");
  return { from, to };
}

/** hour for a window of two days or less, else day; refuses a series of more than MAX_SERIES_BUCKETS buckets. */
export function resolveGranularity(range: TimeRange, asked: Granularity | undefined): Granularity {
  const span = range.to.getTime() - range.from.getTime();
  const granularity = asked ?? (span <= 2 * DAY_MS ? 'hour' : 'day');
  const size = granularity === 'hour' ? HOUR_MS : DAY_MS;
  const buckets = Math.ceil(range.to.getTime() / size) - Math.floor(range.from.getTime() / size);
  if (buckets > MAX_SERIES_BUCKETS) {
    throw invalid(
      asked ? 'granularity' : 'from',
      `That window needs ${buckets} ${granularity} buckets; at most ${MAX_SERIES_BUCKETS} are served. Narrow from/to${granularity === 'hour' ? ' or use granularity=day' : ''}`,
    );
  }
  return granularity;
}

/** The window of the same length just before. */
export function previousRange(range: TimeRange): TimeRange {
  const span = range.to.getTime() - range.from.getTime();
  return { from: new Date(range.from.getTime() - span), to: range.from };
}

/** The last `minutes` whole minutes, the current (partial) minute included as the newest. */
export function minuteWindow(now: Date, minutes: number): TimeRange {
  const to = Math.floor(now.getTime() / 60_000) * 60_000 + 60_000;
  return { from: new Date(to - minutes * 60_000), to: new Date(to) };
}

// Cursors are opaque to callers: base64url of {at, id}, where `at` keeps created_at's microseconds
// (a JavaScript Date would round them away and make pages skip or repeat rows).
const cursorShape = z.strictObject({
  at: z.string().regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/),
  id: z.string().min(1).max(128),
});

export function encodeCursor(cursor: Cursor): string {
  return Buffer.from(JSON.stringify({ at: cursor.at, id: cursor.id }), 'utf8').toString('base64url');
}

export function decodeCursor(value: string): Cursor {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
  } catch {
    throw invalid('cursor', "Invalid 'cursor' in query: pass nextCursor from a previous page unchanged");
  }
  const result = cursorShape.safeParse(parsed);
  if (!result.success || Number.isNaN(Date.parse(result.data.at))) {
    throw invalid('cursor', "Invalid 'cursor' in query: pass nextCursor from a previous page unchanged");
  }
  return result.data;
}

import { ApiError } from '../../core/kernel/errors.ts';
import { clampToAcceptedRange } from '../../core/vocabulary/timestamps.ts';
import type { Granularity } from '../../core/ports/metering.ts';

/** Turns the validated query into what the store takes: time windows. */

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
export const DEFAULT_WINDOW_DAYS = 30;
/** The widest series: a year and a half of days, or about eleven weeks of hours. */
export const MAX_SERIES_BUCKETS = 2_000;

const invalid = (param: string, message: string) => new ApiError('invalid_parameter', message, { param });

export interface TimeRange {
  from: Date;
  to: Date;
}

/** [from, to): `to` defaults to now, `from` to 30 days before `to`. */
export function resolveRange(query: { from?: Date; to?: Date }, now: Date): TimeRange {
  const to = query.to ?? now;
  const from = query.from ?? new Date(to.getTime() - DEFAULT_WINDOW_DAYS * DAY_MS);
  if (from.getTime() >= to.getTime()) throw invalid('from', "'from' must be before 'to' ('to' is exclusive)");
  return { from, to };
}

/** Either bound may be absent (no limit on that side). */
export function resolveOpenRange(query: { from?: Date; to?: Date }): { from?: Date; to?: Date } {
  const { from, to } = query;
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

/** The window of the same length just before, cut at the start of the accepted range (nothing is older). */
export function previousRange(range: TimeRange): TimeRange {
  const span = range.to.getTime() - range.from.getTime();
  return { from: clampToAcceptedRange(new Date(range.from.getTime() - span)), to: range.from };
}

/** The last `minutes` whole minutes, the current (partial) minute included as the newest. */
export function minuteWindow(now: Date, minutes: number): TimeRange {
  const to = Math.floor(now.getTime() / 60_000) * 60_000 + 60_000;
  return { from: new Date(to - minutes * 60_000), to: new Date(to) };
}

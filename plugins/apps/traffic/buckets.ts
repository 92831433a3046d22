import { ApiError } from '../../../core/kernel/errors.ts';

/** Time windows and their UTC buckets, shared by the request series, analytics and usage series. */

export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;
/** A window without a start reaches back this far. */
export const DEFAULT_WINDOW_MS = DAY_MS;
/** Hourly buckets up to two days; daily beyond. */
export const HOURLY_UP_TO_MS = 2 * DAY_MS;
/** The most buckets a series answers (about 16 months of days). */
export const MAX_BUCKETS = 500;

export type Granularity = 'hour' | 'day';

export interface Bucketing {
  from: Date;
  to: Date;
  granularity: Granularity;
}

/**
 * [from, to): `to` defaults to now, `from` to a day before `to`; hourly buckets for two days or
 * less, else daily, unless the caller names one. 400 on `fromParam` for an empty or reversed
 * window, or one needing more than MAX_BUCKETS buckets.
 */
export function resolveBucketing(asked: { from?: Date | undefined; to?: Date | undefined; granularity?: Granularity | undefined }, now: Date, fromParam: string): Bucketing {
  const to = asked.to ?? now;
  const from = asked.from ?? new Date(to.getTime() - DEFAULT_WINDOW_MS);
  if (from.getTime() >= to.getTime()) {
    throw new ApiError('invalid_parameter', `'${fromParam}' must be before the window's end (which is exclusive)`, { param: fromParam });
  }
  const granularity = asked.granularity ?? (to.getTime() - from.getTime() <= HOURLY_UP_TO_MS ? 'hour' : 'day');
  const count = bucketStarts({ from, to, granularity }, MAX_BUCKETS + 1).length;
  if (count > MAX_BUCKETS) {
    throw new ApiError('invalid_parameter', `That window needs more than ${MAX_BUCKETS} ${granularity} buckets: narrow it`, {
      param: asked.granularity ? 'granularity' : fromParam,
    });
  }
  return { from, to, granularity };
}

/** The UTC start of the bucket holding `at`. */
export function bucketStart(at: Date, granularity: Granularity): Date {
  const size = granularity === 'hour' ? HOUR_MS : DAY_MS;
  return new Date(Math.floor(at.getTime() / size) * size);
}

/** Every bucket overlapping [from, to), newest first (at most `limit`). */
export function bucketStarts(bucketing: Bucketing, limit = Number.POSITIVE_INFINITY): Date[] {
  const size = bucketing.granularity === 'hour' ? HOUR_MS : DAY_MS;
  const starts: Date[] = [];
  for (let at = bucketStart(new Date(bucketing.to.getTime() - 1), bucketing.granularity).getTime(); at >= bucketStart(bucketing.from, bucketing.granularity).getTime(); at -= size) {
    starts.push(new Date(at));
    if (starts.length >= limit) break;
  }
  return starts;
}

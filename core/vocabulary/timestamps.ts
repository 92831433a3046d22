import { z } from 'zod';

/**
 * The instants a caller may name (query bounds, expiry times, cursors): from the Unix epoch to the
 * end of year 9999, UTC. Wider than any data the service holds, and narrow enough that everything
 * done with them stays where PostgreSQL, PGlite and JavaScript dates agree: PGlite refuses year 0
 * and five-digit years and misreads years before 1000, PostgreSQL refuses years before 4713 BC,
 * and windows derived from a bound (30 days before `to`, the previous window of a comparison)
 * must stay inside all of that.
 */
const EARLIEST_MS = Date.parse('1970-01-01T00:00:00.000Z');
const LATEST_MS = Date.parse('9999-12-31T23:59:59.999Z');

const RANGE_MESSAGE = 'must be between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z';

export function inAcceptedRange(instant: Date): boolean {
  const time = instant.getTime();
  return time >= EARLIEST_MS && time <= LATEST_MS;
}

/** `YYYY-MM-DD` is midnight UTC of that day; anything else is an ISO 8601 timestamp. */
function toInstant(value: string): Date {
  return new Date(/^\d{4}-\d{2}-\d{2}$/.test(value) ? `${value}T00:00:00.000Z` : value);
}

/** An ISO 8601 timestamp with `Z` or an offset, as a Date in the accepted range. */
export const timestampSchema = z.iso.datetime({ offset: true }).transform(toInstant).refine(inAcceptedRange, RANGE_MESSAGE);

/** A date (`YYYY-MM-DD`, midnight UTC) or an ISO 8601 timestamp, as a Date in the accepted range. */
export const dateOrTimestampSchema = z
  .union([z.iso.date(), z.iso.datetime({ offset: true })], { error: 'expected a date (YYYY-MM-DD, midnight UTC) or an ISO 8601 timestamp' })
  .transform(toInstant)
  .refine(inAcceptedRange, RANGE_MESSAGE);

/**
 * What the service answers with: an instant as `Date.toISOString()` writes it (UTC, `Z`,
 * milliseconds), and a UTC calendar day. Plain strings on the wire, but declared as such so the
 * OpenAPI document says `format: date-time` / `format: date` rather than an opaque string; the
 * input schemas above turn into Dates, which a JSON Schema of the answer could not describe.
 */
export const instantView = z.iso.datetime();

export const dayView = z.iso.date();

/** Clamps a derived instant (never a caller's) into the accepted range. */
export function clampToAcceptedRange(instant: Date): Date {
  const time = instant.getTime();
  return time < EARLIEST_MS ? new Date(EARLIEST_MS) : time > LATEST_MS ? new Date(LATEST_MS) : instant;
}

import { z } from 'zod';
import { inAcceptedRange } from './timestamps.ts';

/**
 * Keyset pagination over rows ordered by (created_at, id), newest first. A cursor is opaque to
 * callers: base64url of {at, id}, where `at` keeps created_at's microseconds (a JavaScript Date
 * would round them away and make pages skip or repeat rows). A cursor is checked as thoroughly as
 * any other input, since a caller can forge one: `at` must be a real calendar instant in the
 * accepted range (core/timestamps.ts), or the database would refuse it.
 */
export interface KeysetCursor {
  /** created_at with microseconds, UTC: `2026-01-31T12:00:00.123456Z`. */
  at: string;
  id: string;
}

const cursorContent = z.strictObject({
  at: z.iso.datetime({ precision: 6 }).refine((at) => inAcceptedRange(new Date(at))),
  id: z.string().min(1).max(128),
});

const UNREADABLE = 'pass nextCursor from a previous page unchanged';

export function encodeCursor(cursor: KeysetCursor): string {
  return Buffer.from(JSON.stringify({ at: cursor.at, id: cursor.id }), 'utf8').toString('base64url');
}

function decodeCursor(value: string): KeysetCursor | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  const result = cursorContent.safeParse(parsed);
  return result.success ? result.data : null;
}

/** The `cursor` query parameter of a keyset-paginated list: a nextCursor, decoded. */
export const cursorSchema = z
  .string()
  .min(1)
  .max(512)
  .transform((value, ctx) => {
    const cursor = decodeCursor(value);
    if (cursor) return cursor;
    ctx.issues.push({ code: 'custom', message: UNREADABLE, input: value });
    return z.NEVER;
  });

import { z } from 'zod';
import { inAcceptedRange } from './timestamps.ts';

/**
 * Keyset pagination, the one way every list pages: rows newest first by (created_at, id), both
 * descending, so a tie in created_at is broken by the id and no row is skipped or repeated between
 * pages, whatever is written meanwhile (new rows land before the first page, not inside a later one).
 *
 * A cursor is opaque to callers: base64url of {at, id}, the position of the last row of a page.
 * `at` keeps created_at's microseconds (a JavaScript Date would round them away and make pages skip
 * or repeat rows). A cursor is checked as thoroughly as any other input, since a caller can forge
 * one: `at` must be a real calendar instant in the accepted range (core/vocabulary/timestamps.ts),
 * and `id` must be an id of the list's kind, or the database would refuse it.
 */
export interface KeysetCursor {
  /** created_at with microseconds, UTC: `2026-01-31T12:00:00.123456Z`. */
  at: string;
  id: string;
}

/** What a store is asked for: at most `limit` rows, after `cursor` when given. */
export interface PageRequest {
  limit: number;
  cursor?: KeysetCursor | undefined;
}

/** One page of a store's rows; `next` is the position to continue from, null on the last page. */
export interface Page<T> {
  items: T[];
  next: KeysetCursor | null;
}

const UNREADABLE = 'pass nextCursor from a previous page unchanged';

export function encodeCursor(cursor: KeysetCursor): string {
  return Buffer.from(JSON.stringify({ at: cursor.at, id: cursor.id }), 'utf8').toString('base64url');
}

function decodeCursor(value: string, content: z.ZodType<KeysetCursor>): KeysetCursor | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  const result = content.safeParse(parsed);
  return result.success ? result.data : null;
}

/** The `cursor` query parameter of a list whose rows have ids of the given kind: a nextCursor, decoded. */
export function cursorSchema(id: z.ZodType<string>) {
  const content = z.strictObject({ at: z.iso.datetime({ precision: 6 }).refine((at) => inAcceptedRange(new Date(at))), id });
  return z
    .string()
    .min(1)
    .max(512)
    .transform((value, ctx) => {
      const cursor = decodeCursor(value, content);
      if (cursor) return cursor;
      ctx.issues.push({ code: 'custom', message: UNREADABLE, input: value });
      return z.NEVER;
    });
}

export interface PageLimits {
  /** Rows per page when the caller names no limit. */
  defaultLimit: number;
  /** The most a caller may ask for; more is a 400 on `limit`. */
  maxLimit: number;
  /** The kind of id the list's rows have (core/vocabulary/ids.ts), checked inside the cursor. */
  id: z.ZodType<string>;
}

/** The query of a paginated list: `limit` and the opaque `cursor`; extend it with the list's filters. */
export function pageQuery({ defaultLimit, maxLimit, id }: PageLimits) {
  return z.object({
    cursor: cursorSchema(id).optional().describe('nextCursor of the previous page; the same filters must be sent with it'),
    limit: z.coerce.number().int().min(1).max(maxLimit).default(defaultLimit).describe(`Rows per page (default ${defaultLimit}, max ${maxLimit})`),
  });
}

/**
 * The response of a paginated list: `{object: 'list', data, nextCursor}`, plus `extra`, anything
 * else the list returns. It is the `<Item>List` schema of the OpenAPI document, so the item must be
 * named (`.meta({ id })`), and, like every named schema, the list is declared once, at module level:
 * a name belongs to one schema (core/kernel/openapi.ts refuses two).
 */
export function listOf<Item extends z.ZodType, Extra extends z.ZodRawShape = Record<never, never>>(item: Item, extra?: Extra) {
  const name = z.globalRegistry.get(item)?.id;
  if (!name) throw new Error('listOf: name the item schema first (.meta({ id }))');
  return z
    .object({
      object: z.literal('list'),
      data: z.array(item).describe('Newest first'),
      nextCursor: z.string().nullable().describe('Pass as cursor for the next page; null on the last page'),
      ...(extra ?? ({} as Extra)),
    })
    .meta({ id: `${name}List`, description: `A page of ${name} items, newest first` });
}

/** A store's page as a list response, each row turned into its wire view. */
export function listResponse<T, View>(page: Page<T>, view: (item: T) => View): { object: 'list'; data: View[]; nextCursor: string | null } {
  return { object: 'list', data: page.items.map(view), nextCursor: page.next ? encodeCursor(page.next) : null };
}

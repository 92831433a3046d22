import type { Queryable } from '../../core/ports/database.ts';
import type { Page, PageRequest } from '../../core/vocabulary/pagination.ts';
import type { Conditions } from './conditions.ts';
import type { Row } from './rows.ts';

/**
 * The SQL side of keyset pagination (core/vocabulary/pagination.ts): newest first by a timestamp
 * and a unique tie-breaker. A page asks for one row more than it returns; that row only tells
 * whether a next page exists, so the last page needs no extra query. Each list needs an index on
 * its filter columns followed by (at DESC, id DESC) for a page to be an index range scan.
 */
export interface KeysetOrder {
  /** The timestamptz column, qualified when the query joins (`pm.created_at`). */
  at: string;
  /** The column that breaks ties in `at`: unique among the rows listed. */
  id: string;
  /** Its SQL type, so a cursor's id compares as the column does (and reaches the index). */
  idType: 'uuid' | 'text' | 'bigint';
}

export interface PageSelect<T> {
  /** The columns the rows need (the position columns are added). */
  columns: string;
  /** The table, with its joins. */
  from: string;
  /** The list's own filters; the cursor's condition is added to them. */
  where: Conditions;
  order: KeysetOrder;
  page: PageRequest;
  toItem: (row: Row) => T;
}

/** The row's position: `at` as text with microseconds (a Date would drop them), the id as text. */
const positionColumns = (order: KeysetOrder) => `to_char(${order.at} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS keyset_at, ${order.id}::text AS keyset_id`;

/** Appends `(at, id) < (cursor)` to the conditions; the plain bound on `at` lets the planner narrow the index range first. */
function addKeysetCondition(where: Conditions, order: KeysetOrder, page: PageRequest): void {
  if (!page.cursor) return;
  const at = where.param(page.cursor.at);
  where.add(`${order.at} <= ${at}::timestamptz`);
  where.add(`(${order.at}, ${order.id}) < (${at}::timestamptz, ${where.param(page.cursor.id)}::${order.idType})`);
}

/** `ORDER BY at DESC, id DESC LIMIT n+1`, its limit a parameter of `where`. */
function keysetTail(where: Conditions, order: KeysetOrder, page: PageRequest): string {
  return `ORDER BY ${order.at} DESC, ${order.id} DESC LIMIT ${where.param(page.limit + 1)}::int`;
}

/** Turns the n+1 rows of a page query into the page: n items, and the position of the last when more follow. */
function toPage<T>(rows: Row[], page: PageRequest, toItem: (row: Row) => T): Page<T> {
  const kept = rows.slice(0, page.limit);
  const last = kept[kept.length - 1];
  const next = rows.length > page.limit && last ? { at: last['keyset_at'] as string, id: last['keyset_id'] as string } : null;
  return { items: kept.map(toItem), next };
}

/** One page of a list: the filters, the cursor's condition, the keyset order, n+1 rows, a page. */
export async function selectPage<T>(db: Queryable, select: PageSelect<T>): Promise<Page<T>> {
  const { where, order, page } = select;
  addKeysetCondition(where, order, page);
  const tail = keysetTail(where, order, page);
  const { rows } = await db.query(`SELECT ${select.columns}, ${positionColumns(order)} FROM ${select.from} WHERE ${where.sql} ${tail}`, where.params);
  return toPage(rows, page, select.toItem);
}

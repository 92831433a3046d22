import type { Database } from '../../core/ports/database.ts';
import type { RequestLogRow, UsageRecorder } from '../../core/ports/metering.ts';
import { appendLine } from './credit-ledger-store.ts';
import { COLUMNS, rowValues } from './request-log-row-values.ts';

/**
 * The whole batch travels as one JSON parameter (an array of row arrays): serialising it is one
 * native JSON.stringify, where one array parameter per column cost the gateway about half as much
 * again in the driver's escaping (the database's share is the same). The answer is one row per
 * organisation: what the rows that were new cost, so a retried flush never charges twice.
 */
const INSERT_AND_TOTAL = `WITH inserted AS (
    INSERT INTO request_logs (${COLUMNS.map(([name]) => name).join(', ')})
    SELECT ${COLUMNS.map(([, type], i) => (type === 'timestamptz' ? `to_timestamp((r->>${i})::float8 / 1000)` : `(r->>${i})::${type}`)).join(', ')}
    FROM jsonb_array_elements($1::jsonb) AS r
    ON CONFLICT (id) DO NOTHING
    RETURNING id, organization_id, cost_micros
  )
  SELECT organization_id, sum(cost_micros)::bigint AS micros, count(*)::int AS calls,
         array_agg(id) FILTER (WHERE id = ANY($2::text[])) AS with_bodies
  FROM inserted GROUP BY organization_id ORDER BY organization_id`;

/**
 * jsonb cannot hold U+0000 nor a lone surrogate (a string JavaScript allows, and a caller's prompt
 * may carry); bodies are kept for reading, so a replacement character stands in. JSON.stringify
 * writes a surrogate as an escape only when it is unpaired, so every such escape is one. The scan
 * walks escapes from the left, so text that merely spells one (`\\u0000` once serialised) is left
 * as it was. One such row would otherwise fail its whole batch on every retry.
 */
function jsonForStorage(value: unknown): string {
  return JSON.stringify(value ?? null).replace(/\\(\\|u0000|ud[89a-f][0-9a-f]{2})/g, (sequence, what: string) => (what === '\\' ? sequence : '\\ufffd'));
}

/**
 * Writes a batch of calls and their charges in one transaction: the rows (a row already stored,
 * e.g. a retried flush, is skipped), then one ai_usage line per organisation for exactly the rows
 * that were new, in organisation order so concurrent flushes never deadlock on balance rows.
 */
export class SqlUsageRecorder implements UsageRecorder {
  constructor(private readonly db: Database) {}

  async record(rows: RequestLogRow[]): Promise<number> {
    if (rows.length === 0) return 0;
    const withBodies = rows.filter((row) => row.bodies);
    return this.db.transaction(async (tx) => {
      const totals = await tx.query<{ organization_id: string; micros: bigint; calls: number; with_bodies: string[] | null }>(INSERT_AND_TOTAL, [
        JSON.stringify(rows.map((row) => rowValues(row))),
        withBodies.map((row) => row.id),
      ]);
      let fresh = 0;
      const stored = new Set<string>();
      // Organisations come back in order, so concurrent flushes lock balance rows in one order.
      for (const total of totals.rows) {
        fresh += total.calls;
        for (const id of total.with_bodies ?? []) stored.add(id);
        if (total.micros === 0n) continue;
        await appendLine(tx, total.organization_id, {
          kind: 'ai_usage',
          amountMicros: -total.micros,
          note: `${total.calls} model call${total.calls === 1 ? '' : 's'}`,
          coversEntries: total.calls,
        });
      }
      // Bodies of the rows that were new, in one statement like the rows themselves.
      const bodies = withBodies.filter((row) => stored.has(row.id)).map((row) => [row.id, row.bodies!.request ?? null, row.bodies!.response ?? null]);
      if (bodies.length > 0) {
        await tx.query('INSERT INTO request_log_bodies (request_id, request_body, response_body) SELECT b->>0, b->1, b->2 FROM jsonb_array_elements($1::jsonb) AS b', [
          jsonForStorage(bodies),
        ]);
      }
      return fresh;
    });
  }
}

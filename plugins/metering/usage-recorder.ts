import type { Database, Queryable } from '../../core/ports/database.ts';
import type { RequestLogRow, UsageRecorder } from '../../core/ports/metering.ts';
import { INTERRUPTED_ERROR_CODE } from './billing-journal.ts';
import { appendLine } from './credit-ledger-store.ts';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import { emitCreditCrossings } from './credit-events.ts';
import { COLUMNS, rowValues } from './request-log-row-values.ts';
import { jsonForStorage } from '../../adapters/sql/jsonb.ts';

/** Column i of a row array `r` (rowValues' order) as its SQL type. */
const columnValue = (i: number, type: string) => (type === 'timestamptz' ? `to_timestamp((r->>${i})::float8 / 1000)` : `(r->>${i})::${type}`);

/**
 * The whole batch travels as one JSON parameter (an array of row arrays): serialising it is one
 * native JSON.stringify, where one array parameter per column cost the gateway about half as much
 * again in the driver's escaping (the database's share is the same). The answer is one row per
 * organisation: what the rows that were new cost, so a retried flush never charges twice.
 */
const INSERT_AND_TOTAL = `WITH inserted AS (
    INSERT INTO request_logs (${COLUMNS.map(([name]) => name).join(', ')})
    SELECT ${COLUMNS.map(([, type], i) => columnValue(i, type)).join(', ')}
    FROM jsonb_array_elements($1::jsonb) AS r
    ON CONFLICT (id) DO NOTHING
    RETURNING id, organization_id, cost_micros
  )
  SELECT organization_id, sum(cost_micros)::bigint AS micros, count(*)::int AS calls,
         array_agg(id) FILTER (WHERE id = ANY($2::text[])) AS with_bodies
  FROM inserted GROUP BY organization_id ORDER BY organization_id`;

/**
 * Stored provisional rows (a call journaled when admitted, replayed after its process died) among
 * the batch's ids, locked: the calls' own rows replace them, and the ledger is charged the
 * difference. Locked first, so the cost replaced is the one that stays replaced.
 */
const LOCK_PROVISIONAL = 'SELECT id, cost_micros FROM request_logs WHERE id = ANY($1::text[]) AND error_code = $2 FOR UPDATE';

const REPLACE_PROVISIONAL = `UPDATE request_logs AS l
  SET ${COLUMNS.map(([name, type], i) => (name === 'id' ? null : `${name} = ${columnValue(i, type)}`))
    .filter((set) => set !== null)
    .join(', ')}
  FROM jsonb_array_elements($1::jsonb) AS r
  WHERE l.id = r->>0
  RETURNING l.id, l.organization_id, l.cost_micros`;

/** What a batch adds to one organisation's bill. */
interface Charge {
  micros: bigint;
  /** Rows new in the log. */
  calls: number;
  /** Provisional rows replaced by their calls' own rows. */
  replaced: number;
}

/**
 * Writes a batch of calls and their charges in one transaction: the rows (a row already stored,
 * e.g. a retried flush, is skipped; a stored provisional row is replaced by its call's own row),
 * then one ai_usage line per organisation for exactly what the batch added, in organisation order
 * so concurrent flushes never deadlock on balance rows.
 */
export class SqlUsageRecorder implements UsageRecorder {
  /** `events`: where credit.low and credit.exhausted go, in the batch's transaction (none in stores' own tests). */
  constructor(
    private readonly db: Database,
    private readonly events: DomainEvents | null = null,
  ) {}

  async record(rows: RequestLogRow[]): Promise<number> {
    if (rows.length === 0) return 0;
    const withBodies = rows.filter((row) => row.bodies);
    return this.db.transaction(async (tx) => {
      const totals = await tx.query<{ organization_id: string; micros: bigint; calls: number; with_bodies: string[] | null }>(INSERT_AND_TOTAL, [
        JSON.stringify(rows.map((row) => rowValues(row))),
        withBodies.map((row) => row.id),
      ]);
      const charges = new Map<string, Charge>();
      const stored = new Set<string>();
      let inserted = 0;
      for (const total of totals.rows) {
        inserted += total.calls;
        for (const id of total.with_bodies ?? []) stored.add(id);
        charges.set(total.organization_id, { micros: total.micros, calls: total.calls, replaced: 0 });
      }
      // Every row new (the usual flush): nothing stored before can be a provisional row to replace.
      const replaced = inserted < rows.length ? await replaceProvisional(tx, rows, charges, stored) : 0;
      // Organisations in order, so concurrent flushes lock balance rows in one order.
      for (const organizationId of [...charges.keys()].sort()) {
        const charge = charges.get(organizationId)!;
        if (charge.micros === 0n) continue;
        const line = await appendLine(tx, organizationId, {
          kind: 'ai_usage',
          amountMicros: -charge.micros,
          note: usageNote(charge),
          coversEntries: charge.calls,
        });
        if (line && this.events) await emitCreditCrossings(this.events, tx, line);
      }
      // Bodies of the rows that were new, in one statement like the rows themselves; a prompt jsonb
      // refuses (a lone surrogate) would otherwise fail its whole batch on every retry.
      const bodies = withBodies.filter((row) => stored.has(row.id)).map((row) => [row.id, row.bodies!.request ?? null, row.bodies!.response ?? null]);
      if (bodies.length > 0) {
        await tx.query('INSERT INTO request_log_bodies (request_id, request_body, response_body) SELECT b->>0, b->1, b->2 FROM jsonb_array_elements($1::jsonb) AS b', [
          jsonForStorage(bodies),
        ]);
      }
      return inserted + replaced;
    });
  }
}

function usageNote({ calls, replaced }: Charge): string {
  const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
  const parts = calls > 0 ? [plural(calls, 'model call')] : [];
  // A replaced row was charged as provisional before: this line adds only the difference.
  if (replaced > 0) parts.push(`${plural(replaced, 'interrupted call')} settled with its own usage`);
  return parts.join(', ');
}

/**
 * Replaces the stored provisional rows of calls whose own rows are in the batch, adding to
 * `charges` what each replacement costs beyond the provisional row (the ledger already holds that)
 * and to `stored` the ids whose bodies are to be stored. Such a row is stored when a replay (or a
 * replica that took a stalled process's journal for a dead one's) stored the provisional row first:
 * the order in which a call's two records reach the database must not change its bill.
 */
async function replaceProvisional(tx: Queryable, rows: RequestLogRow[], charges: Map<string, Charge>, stored: Set<string>): Promise<number> {
  const finals = rows.filter((row) => row.errorCode !== INTERRUPTED_ERROR_CODE);
  if (finals.length === 0) return 0;
  const locked = await tx.query<{ id: string; cost_micros: bigint }>(LOCK_PROVISIONAL, [finals.map((row) => row.id), INTERRUPTED_ERROR_CODE]);
  if (locked.rows.length === 0) return 0;
  const before = new Map(locked.rows.map((row) => [row.id, row.cost_micros]));
  const replacements = finals.filter((row) => before.has(row.id));
  const updated = await tx.query<{ id: string; organization_id: string; cost_micros: bigint }>(REPLACE_PROVISIONAL, [JSON.stringify(replacements.map((row) => rowValues(row)))]);
  for (const row of updated.rows) {
    const charge = charges.get(row.organization_id) ?? { micros: 0n, calls: 0, replaced: 0 };
    charge.micros += row.cost_micros - before.get(row.id)!;
    charge.replaced += 1;
    charges.set(row.organization_id, charge);
    stored.add(row.id);
  }
  return updated.rows.length;
}

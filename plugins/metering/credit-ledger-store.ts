import type { Database, Queryable } from '../../core/ports/database.ts';
import { ADJUSTMENT_KINDS, type CreditLedger, type LedgerFilter, type LedgerKind, type LedgerLine, type LedgerSummary, type NewLedgerLine } from '../../core/ports/metering.ts';
import type { PageRequest } from '../../core/vocabulary/pagination.ts';
import { Conditions } from '../../adapters/sql/conditions.ts';
import { type KeysetOrder, selectPage } from '../../adapters/sql/keyset.ts';
import { bigintOf, date, str, strOrNull, type Row } from '../../adapters/sql/rows.ts';

const toLine = (row: Row): LedgerLine => ({
  id: String(row['id']),
  organizationId: str(row, 'organization_id'),
  kind: str(row, 'kind') as LedgerKind,
  amountMicros: bigintOf(row, 'amount_micros'),
  balanceAfterMicros: bigintOf(row, 'balance_after_micros'),
  note: strOrNull(row, 'note'),
  reference: strOrNull(row, 'reference'),
  coversUtcDay: strOrNull(row, 'covers_day'),
  coversEntries: row['covers_entries'] === null || row['covers_entries'] === undefined ? null : Number(row['covers_entries']),
  createdAt: date(row, 'created_at'),
});

/**
 * Every column of a ledger line, the covered day as text: node-postgres turns a `date` into a Date at
 * local midnight, which reads a day early through toISOString on a host east of UTC.
 */
const LINE_COLUMNS = '*, covers_utc_day::text AS covers_day';

/** Ledger lines are numbered by the database; created_at is clock_timestamp(), microseconds apart. */
const LEDGER_ORDER: KeysetOrder = { at: 'created_at', id: 'id', idType: 'bigint' };

/**
 * The ledger in SQL. Every line is written in the same transaction that moves the balance row
 * (whose row lock serialises one organisation's lines), so balance_after chains exactly.
 */
export class SqlCreditLedger implements CreditLedger {
  constructor(private readonly db: Database) {}

  async ensureAccount(organizationId: string, initialCreditMicros: bigint): Promise<void> {
    await this.db.transaction(async (tx) => {
      const created = await tx.query('INSERT INTO credit_balances (organization_id, balance_micros) VALUES ($1, 0) ON CONFLICT DO NOTHING RETURNING organization_id', [organizationId]);
      if (created.rowCount > 0 && initialCreditMicros > 0n) {
        await appendLine(tx, organizationId, { kind: 'adjustment', amountMicros: initialCreditMicros, note: 'Opening credit', reference: 'opening-credit' });
      }
    });
  }

  async append(organizationId: string, line: NewLedgerLine, tx?: Queryable): Promise<LedgerLine | null> {
    if (tx) return appendLine(tx, organizationId, line);
    return this.db.transaction((inner) => appendLine(inner, organizationId, line));
  }

  async balance(organizationId: string): Promise<bigint | null> {
    const { rows } = await this.db.query('SELECT balance_micros FROM credit_balances WHERE organization_id = $1', [organizationId]);
    return rows[0] ? bigintOf(rows[0], 'balance_micros') : null;
  }

  async page(organizationId: string, filter: LedgerFilter, page: PageRequest) {
    const where = new Conditions();
    where.add(`organization_id = ${where.param(organizationId)}::uuid`);
    if (filter.kinds) where.add(`kind = ANY(${where.param(filter.kinds)}::text[])`);
    if (filter.from) where.add(`created_at >= ${where.param(filter.from)}::timestamptz`);
    if (filter.to) where.add(`created_at < ${where.param(filter.to)}::timestamptz`);
    return selectPage(this.db, { columns: LINE_COLUMNS, from: 'credit_ledger', where, order: LEDGER_ORDER, page, toItem: toLine });
  }

  async lines(organizationId: string, filter: LedgerFilter & { limit: number }): Promise<LedgerLine[]> {
    const { rows } = await this.db.query(
      `SELECT ${LINE_COLUMNS} FROM credit_ledger
       WHERE organization_id = $1
         AND ($2::text[] IS NULL OR kind = ANY($2::text[]))
         AND ($3::timestamptz IS NULL OR created_at >= $3)
         AND ($4::timestamptz IS NULL OR created_at < $4)
       ORDER BY created_at DESC, id DESC LIMIT $5`,
      [organizationId, filter.kinds ?? null, filter.from ?? null, filter.to ?? null, filter.limit],
    );
    return rows.map(toLine);
  }

  async summary(organizationId: string, window: { from?: Date; to?: Date }): Promise<LedgerSummary> {
    const { rows } = await this.db.query(
      `SELECT
         COALESCE(sum(amount_micros) FILTER (WHERE kind = 'payment'), 0)::bigint AS payments,
         COALESCE(sum(amount_micros) FILTER (WHERE kind = ANY($4::text[])), 0)::bigint AS adjustments,
         COALESCE(-sum(amount_micros) FILTER (WHERE kind IN ('hosting', 'hosting_base_fee')), 0)::bigint AS hosting,
         COALESCE(-sum(amount_micros) FILTER (WHERE kind = 'ai_usage'), 0)::bigint AS ai
       FROM credit_ledger
       WHERE organization_id = $1 AND ($2::timestamptz IS NULL OR created_at >= $2) AND ($3::timestamptz IS NULL OR created_at < $3)`,
      [organizationId, window.from ?? null, window.to ?? null, ADJUSTMENT_KINDS],
    );
    const sums = rows[0] ?? {};
    // Without `from` the window starts at the very beginning, so the opening balance is zero.
    let opening = 0n;
    if (window.from) {
      const before = await this.db.query(
        `SELECT balance_after_micros FROM credit_ledger WHERE organization_id = $1 AND created_at < $2
         ORDER BY created_at DESC, id DESC LIMIT 1`,
        [organizationId, window.from],
      );
      opening = before.rows[0] ? bigintOf(before.rows[0], 'balance_after_micros') : 0n;
    }
    const payments = bigintOf(sums, 'payments');
    const adjustments = bigintOf(sums, 'adjustments');
    const hosting = bigintOf(sums, 'hosting');
    const ai = bigintOf(sums, 'ai');
    return {
      openingMicros: opening,
      paymentsMicros: payments,
      adjustmentsMicros: adjustments,
      hostingMicros: hosting,
      aiMicros: ai,
      closingMicros: opening + payments + adjustments - hosting - ai,
    };
  }
}

/** Moves the balance and writes its line; the UPDATE's row lock orders concurrent appends. */
export async function appendLine(tx: Queryable, organizationId: string, line: NewLedgerLine): Promise<LedgerLine | null> {
  if (line.reference) {
    await tx.query('INSERT INTO credit_balances (organization_id, balance_micros) VALUES ($1, 0) ON CONFLICT DO NOTHING', [organizationId]);
    // Take the balance row lock before looking for the reference: a concurrent append of the same
    // reference has then committed, so it is seen here (a duplicate) instead of failing the insert.
    await tx.query('SELECT 1 FROM credit_balances WHERE organization_id = $1 FOR UPDATE', [organizationId]);
    const seen = await tx.query('SELECT 1 FROM credit_ledger WHERE organization_id = $1 AND kind = $2 AND reference = $3', [organizationId, line.kind, line.reference]);
    if (seen.rowCount > 0) return null;
  }
  // One statement moves the balance, creating the row on an account's first line.
  const moved = await tx.query(
    `INSERT INTO credit_balances (organization_id, balance_micros) VALUES ($1, $2)
     ON CONFLICT (organization_id) DO UPDATE SET balance_micros = credit_balances.balance_micros + EXCLUDED.balance_micros, updated_at = now()
     RETURNING balance_micros`,
    [organizationId, line.amountMicros],
  );
  const balanceAfter = bigintOf(moved.rows[0]!, 'balance_micros');
  const { rows } = await tx.query(
    `INSERT INTO credit_ledger (organization_id, kind, amount_micros, balance_after_micros, note, reference, covers_utc_day, covers_entries, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, clock_timestamp()) RETURNING ${LINE_COLUMNS}`,
    [organizationId, line.kind, line.amountMicros, balanceAfter, line.note ?? null, line.reference ?? null, line.coversUtcDay ?? null, line.coversEntries ?? null],
  );
  return toLine(rows[0]!);
}

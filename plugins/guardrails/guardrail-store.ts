import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../core/ports/database.ts';
import { bool, date, str, strOrNull, type Row } from '../../adapters/sql/rows.ts';
import type { RuleAction, RuleDetector, RuleSpec } from './rule-evaluation.ts';

export interface GuardrailRule extends RuleSpec {
  readonly id: string;
  readonly organizationId: string;
  readonly enabled: boolean;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

export interface NewRule {
  name: string;
  detector: RuleDetector;
  pattern: string | null;
  action: RuleAction;
  enabled: boolean;
}

export type RuleChanges = Partial<Pick<NewRule, 'name' | 'pattern' | 'action' | 'enabled'>>;

const COLUMNS = 'id, organization_id, name, detector, pattern, action, enabled, created_at, updated_at';

function toRule(row: Row): GuardrailRule {
  return {
    id: str(row, 'id'),
    organizationId: str(row, 'organization_id'),
    name: str(row, 'name'),
    detector: str(row, 'detector') as RuleDetector,
    pattern: strOrNull(row, 'pattern'),
    action: str(row, 'action') as RuleAction,
    enabled: bool(row, 'enabled'),
    createdAt: date(row, 'created_at'),
    updatedAt: date(row, 'updated_at'),
  };
}

/** The guardrail_rules table (owned by this plugin). Rules are listed in the order they were made. */
export class GuardrailStore {
  constructor(private readonly db: Queryable) {}

  async list(organizationId: string): Promise<GuardrailRule[]> {
    const { rows } = await this.db.query(`SELECT ${COLUMNS} FROM guardrail_rules WHERE organization_id = $1 ORDER BY position`, [organizationId]);
    return rows.map(toRule);
  }

  /** What the call path runs: the enabled rules only. */
  async enabled(organizationId: string): Promise<GuardrailRule[]> {
    const { rows } = await this.db.query(`SELECT ${COLUMNS} FROM guardrail_rules WHERE organization_id = $1 AND enabled ORDER BY position`, [organizationId]);
    return rows.map(toRule);
  }

  async get(tx: Queryable, organizationId: string, id: string): Promise<GuardrailRule | null> {
    const { rows } = await tx.query(`SELECT ${COLUMNS} FROM guardrail_rules WHERE organization_id = $1 AND id = $2`, [organizationId, id]);
    return rows[0] ? toRule(rows[0]) : null;
  }

  /**
   * Counts the account's rules with its organisation row locked, so that two creates racing for
   * the last free place cannot both take it.
   */
  async countLocked(tx: Queryable, organizationId: string): Promise<number> {
    await tx.query('SELECT id FROM organizations WHERE id = $1 FOR UPDATE', [organizationId]);
    const { rows } = await tx.query<{ count: string | number | bigint }>('SELECT count(*) AS count FROM guardrail_rules WHERE organization_id = $1', [organizationId]);
    return Number(rows[0]?.count ?? 0);
  }

  async create(tx: Queryable, organizationId: string, rule: NewRule, now: Date): Promise<GuardrailRule> {
    const { rows } = await tx.query(
      `INSERT INTO guardrail_rules (id, organization_id, name, detector, pattern, action, enabled, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) RETURNING ${COLUMNS}`,
      [randomUUID(), organizationId, rule.name, rule.detector, rule.pattern, rule.action, rule.enabled, now],
    );
    return toRule(rows[0] as Row);
  }

  async update(tx: Queryable, organizationId: string, id: string, changes: RuleChanges, now: Date): Promise<GuardrailRule | null> {
    const { rows } = await tx.query(
      `UPDATE guardrail_rules SET
         name = COALESCE($3, name),
         pattern = COALESCE($4, pattern),
         action = COALESCE($5, action),
         enabled = COALESCE($6, enabled),
         updated_at = $7
       WHERE organization_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
      [organizationId, id, changes.name ?? null, changes.pattern ?? null, changes.action ?? null, changes.enabled ?? null, now],
    );
    return rows[0] ? toRule(rows[0]) : null;
  }

  async delete(tx: Queryable, organizationId: string, id: string): Promise<boolean> {
    const { rowCount } = await tx.query('DELETE FROM guardrail_rules WHERE organization_id = $1 AND id = $2', [organizationId, id]);
    return rowCount > 0;
  }

  /** Every rule of an organisation whose account is being deleted. */
  async eraseOrganization(tx: Queryable, organizationId: string): Promise<number> {
    const { rowCount } = await tx.query('DELETE FROM guardrail_rules WHERE organization_id = $1', [organizationId]);
    return rowCount;
  }
}

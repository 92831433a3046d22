import type { Queryable } from '../../core/ports/database.ts';
import type { RecentCalls, SpendReader, SpendWindows } from '../../core/ports/identity.ts';
import { keyTree } from '../../adapters/sql/key-tree.ts';
import { bigintOf } from '../../adapters/sql/rows.ts';
import { periodStart } from '../../core/vocabulary/periods.ts';

type Column = 'key_id' | 'project_id' | 'organization_id';

/** Reads spend windows from request_logs; each window is one FILTER over the same index range. */
export class SqlSpendReader implements SpendReader {
  constructor(private readonly db: Queryable) {}

  /** The key's own calls and those of every key it made: a maker's cap bounds its descendants too. */
  forKey(keyId: string, now: Date) {
    return this.windows('key_id', keyId, now, true);
  }
  forProject(projectId: string, now: Date) {
    return this.windows('project_id', projectId, now);
  }
  forOrganization(organizationId: string, now: Date) {
    return this.windows('organization_id', organizationId, now);
  }

  /** A key's calls include those of every key it made: a maker's rate windows count its descendants' calls. */
  async recentCalls(scope: 'key' | 'project' | 'account', id: string, since: Date): Promise<RecentCalls> {
    const column: Column = scope === 'key' ? 'key_id' : scope === 'project' ? 'project_id' : 'organization_id';
    const { withClause, where } = rowsOf(column, scope === 'key');
    const { rows } = await this.db.query(
      `${withClause}SELECT count(*)::bigint AS requests, COALESCE(sum(input_tokens + output_tokens), 0)::bigint AS tokens
       FROM request_logs WHERE ${where} AND created_at >= $2`,
      [id, since],
    );
    const row = rows[0] ?? {};
    return { requests: Number(bigintOf(row, 'requests')), tokens: Number(bigintOf(row, 'tokens')) };
  }

  private async windows(column: Column, id: string, now: Date, withDescendants = false): Promise<SpendWindows> {
    const { withClause, where } = rowsOf(column, withDescendants);
    const { rows } = await this.db.query(
      `${withClause}SELECT COALESCE(sum(cost_micros), 0)::bigint AS total,
              COALESCE(sum(cost_micros) FILTER (WHERE created_at >= $2), 0)::bigint AS today,
              COALESCE(sum(cost_micros) FILTER (WHERE created_at >= $3), 0)::bigint AS week,
              COALESCE(sum(cost_micros) FILTER (WHERE created_at >= $4), 0)::bigint AS month
       FROM request_logs WHERE ${where}`,
      [id, periodStart('day', now), periodStart('week', now), periodStart('month', now)],
    );
    const row = rows[0] ?? {};
    return {
      totalMicros: bigintOf(row, 'total'),
      todayMicros: bigintOf(row, 'today'),
      weekMicros: bigintOf(row, 'week'),
      monthMicros: bigintOf(row, 'month'),
    };
  }
}

/** The request-log rows of one scope ($1), a key's optionally with those of every key it made. */
function rowsOf(column: Column, withDescendants: boolean): { withClause: string; where: string } {
  if (!withDescendants) return { withClause: '', where: `${column} = $1` };
  return { withClause: `WITH RECURSIVE ${keyTree('$1')} `, where: `${column} IN (SELECT id FROM key_tree)` };
}

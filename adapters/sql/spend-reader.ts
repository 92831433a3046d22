import type { Queryable } from '../../core/ports/database.ts';
import type { SpendReader, SpendWindows } from '../../core/ports/identity.ts';
import { keyTree } from './key-tree.ts';
import { bigintOf } from './rows.ts';
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

  private async windows(column: Column, id: string, now: Date, withDescendants = false): Promise<SpendWindows> {
    const { rows } = await this.db.query(
      `${withDescendants ? `WITH RECURSIVE ${keyTree('$1')} ` : ''}SELECT COALESCE(sum(cost_micros), 0)::bigint AS total,
              COALESCE(sum(cost_micros) FILTER (WHERE created_at >= $2), 0)::bigint AS today,
              COALESCE(sum(cost_micros) FILTER (WHERE created_at >= $3), 0)::bigint AS week,
              COALESCE(sum(cost_micros) FILTER (WHERE created_at >= $4), 0)::bigint AS month
       FROM request_logs WHERE ${withDescendants ? `${column} IN (SELECT id FROM key_tree)` : `${column} = $1`}`,
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

import type { Database, Queryable } from '../../core/ports/database.ts';
import type { LongRunningOperation, LongRunningStore, OperationOutcome, OperationStarter, OperationStatus, ProgressFilter } from '../../core/ports/long-running.ts';
import type { PageRequest } from '../../core/vocabulary/pagination.ts';
import { Conditions } from './conditions.ts';
import { type KeysetOrder, selectPage } from './keyset.ts';
import { date, dateOrNull, str, strOrNull, type Row } from './rows.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const ORDER: KeysetOrder = { at: 'o.created_at', id: 'o.id', idType: 'uuid' };

function toOperation(row: Row): LongRunningOperation {
  const starterKind = strOrNull(row, 'started_by_kind') as OperationStarter['kind'] | null;
  const error = strOrNull(row, 'error');
  return {
    id: str(row, 'id'),
    organizationId: str(row, 'organization_id'),
    projectId: strOrNull(row, 'project_id'),
    kind: str(row, 'kind'),
    status: str(row, 'status') as OperationStatus,
    jobId: String(row['job_id']),
    runAt: date(row, 'run_at'),
    startedBy: starterKind ? { kind: starterKind, id: str(row, 'started_by_id') } : null,
    result: row['result'] ?? null,
    error: error === null ? null : { message: error },
    createdAt: date(row, 'created_at'),
    updatedAt: date(row, 'updated_at'),
    finishedAt: dateOrNull(row, 'finished_at'),
  };
}

/**
 * What one viewer's progress list may show: the organisation's operations of the projects it sees
 * (and those of no project), unfinished or finished recently, and not hidden by it.
 */
function listed(where: Conditions, organizationId: string, filter: ProgressFilter): void {
  where.add(`o.organization_id = ${where.param(organizationId)}::uuid`);
  if (filter.projectIds !== null) where.add(`(o.project_id IS NULL OR o.project_id = ANY(${where.param(filter.projectIds)}::uuid[]))`);
  where.add(`(o.finished_at IS NULL OR o.finished_at >= ${where.param(filter.finishedSince)}::timestamptz)`);
  where.add(`NOT EXISTS (SELECT 1 FROM long_running_hidden h WHERE h.viewer = ${where.param(filter.viewer)} AND h.operation_id = o.id)`);
}

/** Long-running operations on the SQL port: one implementation for PostgreSQL and PGlite. */
export class SqlLongRunningStore implements LongRunningStore {
  constructor(private readonly db: Database) {}

  async insert(db: Queryable, operation: LongRunningOperation): Promise<void> {
    await db.query(
      `INSERT INTO long_running_operations (id, organization_id, project_id, kind, status, job_id, run_at, started_by_kind, started_by_id,
         result, error, created_at, updated_at, finished_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11, $12, $13, $14)`,
      [
        operation.id,
        operation.organizationId,
        operation.projectId,
        operation.kind,
        operation.status,
        operation.jobId,
        operation.runAt,
        operation.startedBy?.kind ?? null,
        operation.startedBy?.id ?? null,
        operation.result === null ? null : JSON.stringify(operation.result),
        operation.error?.message ?? null,
        operation.createdAt,
        operation.updatedAt,
        operation.finishedAt,
      ],
    );
  }

  async get(organizationId: string, id: string, db: Queryable = this.db): Promise<LongRunningOperation | null> {
    if (!UUID.test(id)) return null;
    const { rows } = await db.query('SELECT * FROM long_running_operations WHERE id = $1 AND organization_id = $2', [id, organizationId]);
    return rows[0] ? toOperation(rows[0]) : null;
  }

  async markRunning(id: string, now: Date): Promise<LongRunningOperation | null> {
    const { rows } = await this.db.query(
      `UPDATE long_running_operations SET status = 'running', updated_at = $2
       WHERE id = $1 AND status IN ('queued', 'running') RETURNING *`,
      [id, now],
    );
    return rows[0] ? toOperation(rows[0]) : null;
  }

  async finish(db: Queryable, id: string, outcome: OperationOutcome, now: Date): Promise<boolean> {
    const succeeded = outcome.status === 'succeeded';
    const { rowCount } = await db.query(
      `UPDATE long_running_operations SET status = $2, result = $3::jsonb, error = $4, updated_at = $5, finished_at = $5
       WHERE id = $1 AND status IN ('queued', 'running')`,
      [id, outcome.status, succeeded ? JSON.stringify(outcome.result ?? null) : null, succeeded ? null : outcome.error, now],
    );
    return rowCount > 0;
  }

  async cancelQueued(db: Queryable, id: string, error: string, now: Date): Promise<boolean> {
    const { rowCount } = await db.query(
      `UPDATE long_running_operations SET status = 'cancelled', error = $2, updated_at = $3, finished_at = $3
       WHERE id = $1 AND status = 'queued'`,
      [id, error, now],
    );
    return rowCount > 0;
  }

  page(organizationId: string, filter: ProgressFilter, page: PageRequest) {
    const where = new Conditions();
    listed(where, organizationId, filter);
    return selectPage(this.db, { columns: 'o.*', from: 'long_running_operations o', where, order: ORDER, page, toItem: toOperation });
  }

  async hide(organizationId: string, filter: ProgressFilter, which: readonly string[] | 'all', now: Date): Promise<number> {
    const where = new Conditions();
    const viewer = where.param(filter.viewer);
    const at = where.param(now);
    listed(where, organizationId, filter);
    if (which !== 'all') where.add(`o.id = ANY(${where.param(which.filter((id) => UUID.test(id)))}::uuid[])`);
    const { rowCount } = await this.db.query(
      `INSERT INTO long_running_hidden (viewer, operation_id, hidden_at)
       SELECT ${viewer}, o.id, ${at}::timestamptz FROM long_running_operations o WHERE ${where.sql}
       ON CONFLICT DO NOTHING`,
      where.params,
    );
    return rowCount;
  }

  async eraseForOrganization(db: Queryable, organizationId: string, keep: readonly string[]): Promise<number> {
    const { rowCount } = await db.query('DELETE FROM long_running_operations WHERE organization_id = $1 AND NOT (id = ANY($2::uuid[]))', [organizationId, keep]);
    return rowCount;
  }
}

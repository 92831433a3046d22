import type { Queryable } from '../../core/ports/database.ts';
import { Conditions } from '../../adapters/sql/conditions.ts';
import { type KeysetOrder, selectPage } from '../../adapters/sql/keyset.ts';
import { bigintOrNull, date, dateOrNull, str, strOrNull, type Row } from '../../adapters/sql/rows.ts';
import type { Page, PageRequest } from '../../core/vocabulary/pagination.ts';

export type BatchStatus = 'validating' | 'in_progress' | 'finalizing' | 'completed' | 'failed' | 'cancelling' | 'cancelled' | 'expired';
/** The statuses a batch ends in; `outcome` names the one it is heading for once it stops starting lines. */
export type BatchOutcome = 'completed' | 'failed' | 'cancelled' | 'expired';

const ENDED: ReadonlySet<BatchStatus> = new Set(['completed', 'cancelled', 'expired', 'failed']);

/** Whether a batch has reached its final status: its output and error files exist then. */
export const hasEnded = (batch: { status: BatchStatus }): boolean => ENDED.has(batch.status);

/** A batch-level error (OpenAI's `errors.data[]`). */
export interface BatchError {
  code: string;
  message: string;
  param: string | null;
  line: number | null;
}

export interface Batch {
  id: string;
  organizationId: string;
  projectId: string;
  keyId: string;
  endpoint: string;
  inputFileId: string;
  completionWindow: string;
  metadata: Record<string, string> | null;
  status: BatchStatus;
  outcome: BatchOutcome | null;
  holdId: string | null;
  /** The worst case held at submission (null: nothing held, or a batch older than the column). */
  heldMicros: bigint | null;
  /** The models its lines call, in first-use order (empty for a batch older than the column). */
  models: string[];
  total: number;
  completed: number;
  failed: number;
  outputFileId: string | null;
  errorFileId: string | null;
  errors: BatchError[] | null;
  createdAt: Date;
  inProgressAt: Date | null;
  expiresAt: Date;
  finalizingAt: Date | null;
  completedAt: Date | null;
  failedAt: Date | null;
  expiredAt: Date | null;
  cancellingAt: Date | null;
  cancelledAt: Date | null;
}

export type NewBatch = Pick<
  Batch,
  'id' | 'organizationId' | 'projectId' | 'keyId' | 'endpoint' | 'inputFileId' | 'completionWindow' | 'metadata' | 'holdId' | 'total' | 'createdAt' | 'expiresAt'
> &
  Partial<Pick<Batch, 'heldMicros' | 'models'>>;

/** What the organisation-wide list filters on (GET /client/batches). */
export interface BatchFilter {
  organizationId: string;
  /** The projects the caller sees; null: every project of the organisation. */
  visibleProjectIds: readonly string[] | null;
  projectId?: string | undefined;
  keyId?: string | undefined;
  status?: BatchStatus | undefined;
}

const BATCH_ORDER: KeysetOrder = { at: 'created_at', id: 'id', idType: 'uuid' };

export interface NewLine {
  line: number;
  customId: string;
  body: unknown;
}

export type LineState = 'pending' | 'running' | 'succeeded' | 'failed';

export interface BatchLine {
  line: number;
  customId: string;
  body: unknown;
  state: LineState;
  statusCode: number | null;
  /** The answer's request id and body, as the output line shows them. */
  response: { requestId: string; body: unknown } | null;
}

/** How a line's run ended, recorded once. */
export interface LineResult {
  succeeded: boolean;
  statusCode: number;
  requestId: string;
  body: unknown;
}

const TIMESTAMPS = ['in_progress_at', 'finalizing_at', 'completed_at', 'failed_at', 'expired_at', 'cancelling_at', 'cancelled_at'] as const;
const COLUMNS = `id, organization_id, project_id, key_id, endpoint, input_file_id, completion_window, metadata, status, outcome,
  hold_id, held_micros, models, total, completed, failed, output_file_id, error_file_id, errors, created_at, expires_at, ${TIMESTAMPS.join(', ')}`;
/** Lines written per INSERT: 5 parameters each, well under PostgreSQL's 65,535. */
const LINES_PER_INSERT = 2_000;

function toBatch(row: Row): Batch {
  return {
    id: str(row, 'id'),
    organizationId: str(row, 'organization_id'),
    projectId: str(row, 'project_id'),
    keyId: str(row, 'key_id'),
    endpoint: str(row, 'endpoint'),
    inputFileId: str(row, 'input_file_id'),
    completionWindow: str(row, 'completion_window'),
    metadata: (row.metadata as Record<string, string> | null) ?? null,
    status: str(row, 'status') as BatchStatus,
    outcome: strOrNull(row, 'outcome') as BatchOutcome | null,
    holdId: strOrNull(row, 'hold_id'),
    heldMicros: bigintOrNull(row, 'held_micros'),
    models: (row.models as string[] | null) ?? [],
    total: Number(row.total),
    completed: Number(row.completed),
    failed: Number(row.failed),
    outputFileId: strOrNull(row, 'output_file_id'),
    errorFileId: strOrNull(row, 'error_file_id'),
    errors: (row.errors as BatchError[] | null) ?? null,
    createdAt: date(row, 'created_at'),
    expiresAt: date(row, 'expires_at'),
    inProgressAt: dateOrNull(row, 'in_progress_at'),
    finalizingAt: dateOrNull(row, 'finalizing_at'),
    completedAt: dateOrNull(row, 'completed_at'),
    failedAt: dateOrNull(row, 'failed_at'),
    expiredAt: dateOrNull(row, 'expired_at'),
    cancellingAt: dateOrNull(row, 'cancelling_at'),
    cancelledAt: dateOrNull(row, 'cancelled_at'),
  };
}

function toLine(row: Row): BatchLine {
  const statusCode = row.status_code === null || row.status_code === undefined ? null : Number(row.status_code);
  return {
    line: Number(row.line),
    customId: str(row, 'custom_id'),
    body: row.body,
    state: str(row, 'state') as LineState,
    statusCode,
    response: (row.response as BatchLine['response']) ?? null,
  };
}

/** The batches and batch_lines tables (owned by this plugin). */
export class BatchStore {
  constructor(private readonly db: Queryable) {}

  /** The batch and its lines, in `tx` (the transaction its spend hold is placed in). */
  async insert(tx: Queryable, batch: NewBatch, lines: readonly NewLine[]): Promise<void> {
    await tx.query(
      `INSERT INTO batches (id, organization_id, project_id, key_id, endpoint, input_file_id, completion_window, metadata, status,
         hold_id, total, created_at, in_progress_at, expires_at, held_micros, models)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'in_progress', $9, $10, $11, $11, $12, $13, $14::text[])`,
      [
        batch.id,
        batch.organizationId,
        batch.projectId,
        batch.keyId,
        batch.endpoint,
        batch.inputFileId,
        batch.completionWindow,
        batch.metadata === null ? null : JSON.stringify(batch.metadata),
        batch.holdId,
        batch.total,
        batch.createdAt,
        batch.expiresAt,
        batch.heldMicros ?? null,
        batch.models ?? [],
      ],
    );
    for (let start = 0; start < lines.length; start += LINES_PER_INSERT) {
      const chunk = lines.slice(start, start + LINES_PER_INSERT);
      const values: unknown[] = [];
      const rows = chunk.map((line, i) => {
        values.push(batch.id, line.line, line.customId, JSON.stringify(line.body));
        const p = i * 4;
        return `($${p + 1}, $${p + 2}, $${p + 3}, $${p + 4}::jsonb, 'pending')`;
      });
      await tx.query(`INSERT INTO batch_lines (batch_id, line, custom_id, body, state) VALUES ${rows.join(', ')}`, values);
    }
  }

  async get(id: string, db: Queryable = this.db): Promise<Batch | null> {
    const result = await db.query(`SELECT ${COLUMNS} FROM batches WHERE id = $1`, [id]);
    return result.rows[0] ? toBatch(result.rows[0]) : null;
  }

  /** The organisation's batch with this id, with its project: what the batch kind resolves. */
  async find(organizationId: string, id: string): Promise<Batch | null> {
    const result = await this.db.query(`SELECT ${COLUMNS} FROM batches WHERE id = $1 AND organization_id = $2`, [id, organizationId]);
    return result.rows[0] ? toBatch(result.rows[0]) : null;
  }

  /**
   * A project's batches, newest first, after the batch `after` (OpenAI's cursor: the last id of the
   * previous page). One more than `limit` is read to tell whether more follow.
   */
  async list(projectId: string, page: { after?: string | undefined; limit: number }): Promise<{ batches: Batch[]; hasMore: boolean }> {
    const params: unknown[] = [projectId, page.limit + 1];
    let after = '';
    if (page.after !== undefined) {
      params.push(page.after);
      // Compared in the database, so created_at keeps its microseconds.
      after = 'AND (created_at, id) < (SELECT created_at, id FROM batches WHERE id = $3 AND project_id = $1)';
    }
    const result = await this.db.query(`SELECT ${COLUMNS} FROM batches WHERE project_id = $1 ${after} ORDER BY created_at DESC, id DESC LIMIT $2`, params);
    const batches = result.rows.map(toBatch);
    const hasMore = batches.length > page.limit;
    return { batches: hasMore ? batches.slice(0, page.limit) : batches, hasMore };
  }

  /** One page of the organisation's batches, newest first, within what the caller sees (its filter is part of the query). */
  async page(filter: BatchFilter, page: PageRequest): Promise<Page<Batch>> {
    const where = new Conditions();
    where.add(`organization_id = ${where.param(filter.organizationId)}::uuid`);
    if (filter.visibleProjectIds !== null) where.add(`project_id = ANY(${where.param(filter.visibleProjectIds)}::uuid[])`);
    if (filter.projectId !== undefined) where.add(`project_id = ${where.param(filter.projectId)}::uuid`);
    if (filter.keyId !== undefined) where.add(`key_id = ${where.param(filter.keyId)}::uuid`);
    if (filter.status !== undefined) where.add(`status = ${where.param(filter.status)}`);
    return selectPage(this.db, { columns: COLUMNS, from: 'batches', where, order: BATCH_ORDER, page, toItem: toBatch });
  }

  async line(batchId: string, line: number): Promise<BatchLine | null> {
    const result = await this.db.query('SELECT line, custom_id, body, state, status_code, response FROM batch_lines WHERE batch_id = $1 AND line = $2', [batchId, line]);
    return result.rows[0] ? toLine(result.rows[0]) : null;
  }

  /**
   * Marks a line running, only while its batch still starts lines (in_progress): the check and the
   * mark are one statement, so a cancel either comes first (the line never starts) or finds it
   * running (the finalizer waits for it). A line found running already is a run cut off by a crash.
   */
  async start(batchId: string, line: number, now: Date): Promise<boolean> {
    const result = await this.db.query(
      `UPDATE batch_lines SET state = 'running', started_at = $3 WHERE batch_id = $1 AND line = $2 AND state IN ('pending', 'running')
         AND EXISTS (SELECT 1 FROM batches WHERE id = $1 AND status = 'in_progress')`,
      [batchId, line, now],
    );
    return result.rowCount === 1;
  }

  /** A line that will not run after all (its batch stopped starting lines): pending again, for the error file. */
  async unstart(batchId: string, line: number): Promise<void> {
    await this.db.query(`UPDATE batch_lines SET state = 'pending' WHERE batch_id = $1 AND line = $2 AND state = 'running'`, [batchId, line]);
  }

  /**
   * Records a line's result once, and counts it on the batch; returns the batch's counts after it, or
   * null when the line was recorded already (a repeated run). In the job's fenced transaction.
   */
  async record(tx: Queryable, batchId: string, line: number, result: LineResult): Promise<Batch | null> {
    const updated = await tx.query(
      `UPDATE batch_lines SET state = $3, status_code = $4, response = $5::jsonb
         WHERE batch_id = $1 AND line = $2 AND state IN ('pending', 'running')`,
      [batchId, line, result.succeeded ? 'succeeded' : 'failed', result.statusCode, JSON.stringify({ requestId: result.requestId, body: result.body })],
    );
    if (updated.rowCount !== 1) return null;
    const counted = await tx.query(`UPDATE batches SET completed = completed + $2, failed = failed + $3 WHERE id = $1 RETURNING ${COLUMNS}`, [
      batchId,
      result.succeeded ? 1 : 0,
      result.succeeded ? 0 : 1,
    ]);
    return counted.rows[0] ? toBatch(counted.rows[0]) : null;
  }

  /**
   * Stops a batch starting lines, heading for `outcome` (from in_progress only): `cancelling` for a
   * cancel, `finalizing` otherwise. Null when the batch had already stopped.
   */
  async stop(tx: Queryable, id: string, outcome: BatchOutcome, now: Date, errors: BatchError[] | null = null): Promise<Batch | null> {
    const status: BatchStatus = outcome === 'cancelled' ? 'cancelling' : 'finalizing';
    const stamp = status === 'cancelling' ? 'cancelling_at' : 'finalizing_at';
    const result = await tx.query(
      `UPDATE batches SET status = $2, outcome = $3, ${stamp} = $4, errors = COALESCE($5::jsonb, errors)
         WHERE id = $1 AND status = 'in_progress' RETURNING ${COLUMNS}`,
      [id, status, outcome, now, errors === null ? null : JSON.stringify(errors)],
    );
    return result.rows[0] ? toBatch(result.rows[0]) : null;
  }

  /**
   * How many lines started since `since` are still running (the finalizer waits for them). One
   * started earlier is a run that died or hung past its timeout: it will never be recorded.
   */
  async running(batchId: string, since: Date): Promise<number> {
    const result = await this.db.query(`SELECT count(*)::int AS n FROM batch_lines WHERE batch_id = $1 AND state = 'running' AND started_at > $2`, [batchId, since]);
    return Number(result.rows[0]?.n ?? 0);
  }

  /** The lines in order, `size` at a time (what the output and error files are written from). */
  async *lines(batchId: string, size = 1_000, db: Queryable = this.db): AsyncGenerator<BatchLine> {
    let after = 0;
    for (;;) {
      const result = await db.query('SELECT line, custom_id, body, state, status_code, response FROM batch_lines WHERE batch_id = $1 AND line > $2 ORDER BY line LIMIT $3', [
        batchId,
        after,
        size,
      ]);
      for (const row of result.rows) yield toLine(row);
      if (result.rows.length < size) return;
      after = Number(result.rows[result.rows.length - 1]!.line);
    }
  }

  /** The batch's end: its final status, files and time; its lines are deleted (the files hold them now). */
  async finish(tx: Queryable, batch: Batch, outcome: BatchOutcome, files: { output: string | null; error: string | null }, now: Date): Promise<Batch | null> {
    const stamp = `${outcome === 'completed' ? 'completed' : outcome === 'failed' ? 'failed' : outcome === 'cancelled' ? 'cancelled' : 'expired'}_at`;
    const result = await tx.query(
      `UPDATE batches SET status = $2, output_file_id = $3, error_file_id = $4, ${stamp} = $5
         WHERE id = $1 AND status IN ('finalizing', 'cancelling') RETURNING ${COLUMNS}`,
      [batch.id, outcome, files.output, files.error, now],
    );
    await tx.query('DELETE FROM batch_lines WHERE batch_id = $1', [batch.id]);
    return result.rows[0] ? toBatch(result.rows[0]) : null;
  }

  /** Running batches past their completion window. */
  async overdue(now: Date, limit: number): Promise<string[]> {
    const result = await this.db.query(`SELECT id FROM batches WHERE status = 'in_progress' AND expires_at <= $1 ORDER BY expires_at LIMIT $2`, [now, limit]);
    return result.rows.map((row) => str(row, 'id'));
  }

  /** An organisation's batches (its account's erasure); their lines go with them. */
  async eraseForOrganization(tx: Queryable, organizationId: string): Promise<number> {
    const result = await tx.query('DELETE FROM batches WHERE organization_id = $1', [organizationId]);
    return result.rowCount ?? 0;
  }
}

import { Conditions } from '../../adapters/sql/conditions.ts';
import { type KeysetOrder, selectPage } from '../../adapters/sql/keyset.ts';
import { date, type Row, str, strOrNull } from '../../adapters/sql/rows.ts';
import type { Queryable } from '../../core/ports/database.ts';
import type { Page, PageRequest } from '../../core/vocabulary/pagination.ts';

/** How a tool call at /mcp/gateway ended. */
export const CALL_STATUSES = ['ok', 'tool_error', 'upstream_error', 'rate_limited', 'approval_pending', 'denied', 'expired', 'cancelled'] as const;
export type CallStatus = (typeof CALL_STATUSES)[number];
/** Statuses counted as errors in the totals: everything but ok and a pending approval (a wait, not a failure). */
export const ERROR_STATUSES: readonly CallStatus[] = ['tool_error', 'upstream_error', 'rate_limited', 'denied', 'expired', 'cancelled'];

export interface ToolCallRow {
  id: string;
  organizationId: string;
  projectId: string;
  keyId: string;
  groupId: string | null;
  upstreamId: string | null;
  upstreamSlug: string;
  toolId: string | null;
  toolName: string;
  gatewayName: string;
  status: CallStatus;
  errorKind: string | null;
  durationMs: number;
  requestBytes: number;
  responseBytes: number;
  approvalId: string | null;
  argumentsSha256: string;
  requestId: string;
  createdAt: Date;
}

const COLUMNS = `id, organization_id, project_id, key_id, group_id, upstream_id, upstream_slug, tool_id, tool_name, gateway_name, status,
  error_kind, duration_ms, request_bytes, response_bytes, approval_id, arguments_sha256, request_id, created_at`;

const ORDER: KeysetOrder = { at: 'created_at', id: 'id', idType: 'uuid' };

function toCall(row: Row): ToolCallRow {
  return {
    id: str(row, 'id'),
    organizationId: str(row, 'organization_id'),
    projectId: str(row, 'project_id'),
    keyId: str(row, 'key_id'),
    groupId: strOrNull(row, 'group_id'),
    upstreamId: strOrNull(row, 'upstream_id'),
    upstreamSlug: str(row, 'upstream_slug'),
    toolId: strOrNull(row, 'tool_id'),
    toolName: str(row, 'tool_name'),
    gatewayName: str(row, 'gateway_name'),
    status: str(row, 'status') as CallStatus,
    errorKind: strOrNull(row, 'error_kind'),
    durationMs: Number(row.duration_ms),
    requestBytes: Number(row.request_bytes),
    responseBytes: Number(row.response_bytes),
    approvalId: strOrNull(row, 'approval_id'),
    argumentsSha256: str(row, 'arguments_sha256'),
    requestId: str(row, 'request_id'),
    createdAt: date(row, 'created_at'),
  };
}

/** Which rows: an organisation's, in the projects given (null: all of them), narrowed by the filters. */
export interface CallFilter {
  organizationId: string;
  projectIds: readonly string[] | null;
  keyId?: string | undefined;
  toolId?: string | undefined;
  upstreamId?: string | undefined;
  status?: CallStatus | undefined;
  from?: Date | undefined;
  to?: Date | undefined;
}

/** Calls, errors, durations and bytes of a set of calls. */
export interface CallTotals {
  calls: number;
  errors: number;
  durationP50Ms: number | null;
  durationAvgMs: number | null;
  requestBytes: number;
  responseBytes: number;
}

export type CallDimension = 'tool' | 'upstream' | 'key' | 'day';

const TOTALS = `count(*)::int AS calls,
  count(*) FILTER (WHERE status = ANY($ERRORS::text[]))::int AS errors,
  (percentile_disc(0.5) WITHIN GROUP (ORDER BY duration_ms))::float8 AS p50,
  avg(duration_ms)::float8 AS avg,
  coalesce(sum(request_bytes), 0)::float8 AS request_bytes,
  coalesce(sum(response_bytes), 0)::float8 AS response_bytes`;

/** A dimension's grouping: its key columns and what the row answers them as. */
const DIMENSIONS: Record<CallDimension, string> = {
  // A tool deleted since keeps its rows under its last gateway name (tool_id null).
  tool: 'tool_id::text AS id, max(gateway_name) AS label, max(upstream_slug) AS extra',
  upstream: 'upstream_id::text AS id, max(upstream_slug) AS label, NULL::text AS extra',
  key: 'key_id::text AS id, NULL::text AS label, NULL::text AS extra',
  day: "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS id, NULL::text AS label, NULL::text AS extra",
};
const GROUP_BY: Record<CallDimension, string> = {
  tool: 'tool_id, CASE WHEN tool_id IS NULL THEN gateway_name END',
  upstream: 'upstream_id',
  key: 'key_id',
  day: "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
};

function totalsOf(row: Row): CallTotals {
  const number = (column: string) => (row[column] === null ? null : Number(row[column]));
  return {
    calls: Number(row.calls),
    errors: Number(row.errors),
    durationP50Ms: number('p50'),
    durationAvgMs: number('avg'),
    requestBytes: Number(row.request_bytes),
    responseBytes: Number(row.response_bytes),
  };
}

/** The mcp_tool_calls table (owned by this plugin): one row per call, written once, never changed. */
export class CallStore {
  constructor(private readonly db: Queryable) {}

  async insert(call: ToolCallRow): Promise<void> {
    await this.db.query(`INSERT INTO mcp_tool_calls (${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`, [
      call.id,
      call.organizationId,
      call.projectId,
      call.keyId,
      call.groupId,
      call.upstreamId,
      call.upstreamSlug,
      call.toolId,
      call.toolName,
      call.gatewayName,
      call.status,
      call.errorKind,
      Math.round(call.durationMs),
      call.requestBytes,
      call.responseBytes,
      call.approvalId,
      call.argumentsSha256,
      call.requestId,
      call.createdAt,
    ]);
  }

  async page(filter: CallFilter, page: PageRequest): Promise<Page<ToolCallRow>> {
    return selectPage(this.db, { columns: COLUMNS, from: 'mcp_tool_calls', where: this.where(filter), order: ORDER, page, toItem: toCall });
  }

  /** The totals of the filtered calls, and per value of `dimension` (largest count first; days in order). */
  async totals(filter: CallFilter): Promise<CallTotals> {
    const where = this.where(filter);
    const errors = where.param(ERROR_STATUSES);
    const { rows } = await this.db.query(`SELECT ${TOTALS.replace('$ERRORS', errors)} FROM mcp_tool_calls WHERE ${where.sql}`, where.params);
    return totalsOf(rows[0]!);
  }

  async totalsBy(filter: CallFilter, dimension: CallDimension): Promise<{ id: string | null; label: string | null; extra: string | null; totals: CallTotals }[]> {
    const where = this.where(filter);
    const errors = where.param(ERROR_STATUSES);
    const order = dimension === 'day' ? 'id' : 'calls DESC, id';
    const { rows } = await this.db.query(
      `SELECT ${DIMENSIONS[dimension]}, ${TOTALS.replace('$ERRORS', errors)} FROM mcp_tool_calls WHERE ${where.sql} GROUP BY ${GROUP_BY[dimension]} ORDER BY ${order}`,
      where.params,
    );
    return rows.map((row) => ({ id: strOrNull(row, 'id'), label: strOrNull(row, 'label'), extra: strOrNull(row, 'extra'), totals: totalsOf(row) }));
  }

  /** Per project: calls and errors since `since`. */
  async countsByProject(organizationId: string, projectIds: readonly string[], since: Date): Promise<Map<string, { calls: number; errors: number }>> {
    const { rows } = await this.db.query(
      `SELECT project_id::text AS project_id, count(*)::int AS calls, count(*) FILTER (WHERE status = ANY($4::text[]))::int AS errors
       FROM mcp_tool_calls WHERE organization_id = $1 AND project_id = ANY($2::uuid[]) AND created_at >= $3 GROUP BY project_id`,
      [organizationId, projectIds, since, ERROR_STATUSES],
    );
    return new Map(rows.map((row) => [str(row, 'project_id'), { calls: Number(row.calls), errors: Number(row.errors) }]));
  }

  async eraseOrganization(tx: Queryable, organizationId: string): Promise<number> {
    const { rowCount } = await tx.query('DELETE FROM mcp_tool_calls WHERE organization_id = $1', [organizationId]);
    return rowCount;
  }

  private where(filter: CallFilter): Conditions {
    const where = new Conditions();
    where.add(`organization_id = ${where.param(filter.organizationId)}::uuid`);
    if (filter.projectIds !== null) where.add(`project_id = ANY(${where.param(filter.projectIds)}::uuid[])`);
    if (filter.keyId !== undefined) where.add(`key_id = ${where.param(filter.keyId)}::uuid`);
    if (filter.toolId !== undefined) where.add(`tool_id = ${where.param(filter.toolId)}::uuid`);
    if (filter.upstreamId !== undefined) where.add(`upstream_id = ${where.param(filter.upstreamId)}::uuid`);
    if (filter.status !== undefined) where.add(`status = ${where.param(filter.status)}`);
    if (filter.from !== undefined) where.add(`created_at >= ${where.param(filter.from)}`);
    if (filter.to !== undefined) where.add(`created_at < ${where.param(filter.to)}`);
    return where;
  }
}

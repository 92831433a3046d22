import { Conditions } from '../../adapters/sql/conditions.ts';
import { type KeysetOrder, selectPage } from '../../adapters/sql/keyset.ts';
import { date, dateOrNull, type Row, str, strOrNull } from '../../adapters/sql/rows.ts';
import type { Queryable } from '../../core/ports/database.ts';
import type { Page, PageRequest } from '../../core/vocabulary/pagination.ts';

export type ApprovalStatus = 'pending' | 'approved' | 'denied' | 'expired';

/** A person's decision (to come, or made) on one exact tool call. */
export interface McpApproval {
  id: string;
  organizationId: string;
  projectId: string;
  keyId: string;
  toolId: string;
  upstreamId: string;
  gatewayName: string;
  argumentsHash: string;
  policyVersion: number;
  requestId: string;
  status: ApprovalStatus;
  requestedAt: Date;
  expiresAt: Date;
  decidedAt: Date | null;
  decidedBy: string | null;
  reason: string | null;
  usedAt: Date | null;
}

/** The exact call an approval is bound to. */
export interface ApprovalBinding {
  keyId: string;
  toolId: string;
  argumentsHash: string;
  policyVersion: number;
}

const COLUMNS = `id, organization_id, project_id, key_id, tool_id, upstream_id, gateway_name, arguments_hash, policy_version, request_id,
  status, requested_at, expires_at, decided_at, decided_by, reason, used_at`;
const ORDER: KeysetOrder = { at: 'requested_at', id: 'id', idType: 'uuid' };
/** The partial unique index's predicate: ON CONFLICT names it to infer that index. */
const LIVE = "(status = 'pending' OR (status = 'approved' AND used_at IS NULL))";

function toApproval(row: Row): McpApproval {
  return {
    id: str(row, 'id'),
    organizationId: str(row, 'organization_id'),
    projectId: str(row, 'project_id'),
    keyId: str(row, 'key_id'),
    toolId: str(row, 'tool_id'),
    upstreamId: str(row, 'upstream_id'),
    gatewayName: str(row, 'gateway_name'),
    argumentsHash: str(row, 'arguments_hash'),
    policyVersion: Number(row.policy_version),
    requestId: str(row, 'request_id'),
    status: str(row, 'status') as ApprovalStatus,
    requestedAt: date(row, 'requested_at'),
    expiresAt: date(row, 'expires_at'),
    decidedAt: dateOrNull(row, 'decided_at'),
    decidedBy: strOrNull(row, 'decided_by'),
    reason: strOrNull(row, 'reason'),
    usedAt: dateOrNull(row, 'used_at'),
  };
}

export interface ApprovalFilter {
  organizationId: string;
  visibleProjectIds: readonly string[] | null;
  status?: ApprovalStatus | undefined;
  projectId?: string | undefined;
  keyId?: string | undefined;
  toolId?: string | undefined;
}

/** A pending approval in the queue people work through, with the names they decide by. */
export interface WaitingApproval extends McpApproval {
  toolName: string;
  upstreamName: string;
}

/** The mcp_approvals table (owned by this plugin), and the policy version of mcp_tools it binds. */
export class ApprovalStore {
  constructor(private readonly db: Queryable) {}

  async get(organizationId: string, id: string, tx: Queryable = this.db): Promise<McpApproval | null> {
    const { rows } = await tx.query(`SELECT ${COLUMNS} FROM mcp_approvals WHERE organization_id = $1 AND id = $2`, [organizationId, id]);
    return rows[0] ? toApproval(rows[0]) : null;
  }

  /** The tool's current policy version; null when the tool is gone. */
  async policyVersion(organizationId: string, toolId: string): Promise<number | null> {
    const { rows } = await this.db.query('SELECT policy_version FROM mcp_tools WHERE organization_id = $1 AND id = $2', [organizationId, toolId]);
    return rows[0] ? Number(rows[0].policy_version) : null;
  }

  async page(filter: ApprovalFilter, page: PageRequest): Promise<Page<McpApproval>> {
    const where = new Conditions();
    where.add(`organization_id = ${where.param(filter.organizationId)}::uuid`);
    if (filter.visibleProjectIds !== null) where.add(`project_id = ANY(${where.param(filter.visibleProjectIds)}::uuid[])`);
    if (filter.status !== undefined) where.add(`status = ${where.param(filter.status)}`);
    if (filter.projectId !== undefined) where.add(`project_id = ${where.param(filter.projectId)}::uuid`);
    if (filter.keyId !== undefined) where.add(`key_id = ${where.param(filter.keyId)}::uuid`);
    if (filter.toolId !== undefined) where.add(`tool_id = ${where.param(filter.toolId)}::uuid`);
    return selectPage(this.db, { columns: COLUMNS, from: 'mcp_approvals', where, order: ORDER, page, toItem: toApproval });
  }

  /** Pending and unexpired, oldest first, at most `limit` (plus one, to tell whether more wait). */
  async waiting(organizationId: string, visibleProjectIds: readonly string[] | null, projectId: string | undefined, now: Date, limit: number): Promise<WaitingApproval[]> {
    const { rows } = await this.db.query(
      `SELECT ${COLUMNS.replace(/(\w+)/g, 'a.$1')}, t.name AS tool_name, u.name AS upstream_name
       FROM mcp_approvals a JOIN mcp_tools t ON t.id = a.tool_id JOIN mcp_upstreams u ON u.id = a.upstream_id
       WHERE a.organization_id = $1 AND a.status = 'pending' AND a.expires_at > $2
         AND ($3::uuid[] IS NULL OR a.project_id = ANY($3::uuid[])) AND ($4::uuid IS NULL OR a.project_id = $4::uuid)
       ORDER BY a.requested_at, a.id LIMIT $5`,
      [organizationId, now, visibleProjectIds, projectId ?? null, limit + 1],
    );
    return rows.map((row) => ({ ...toApproval(row), toolName: str(row, 'tool_name'), upstreamName: str(row, 'upstream_name') }));
  }

  async countPending(organizationId: string, projectIds: readonly string[], now: Date): Promise<number> {
    const { rows } = await this.db.query<{ count: string | number }>(
      "SELECT count(*) AS count FROM mcp_approvals WHERE organization_id = $1 AND project_id = ANY($2::uuid[]) AND status = 'pending' AND expires_at > $3",
      [organizationId, projectIds, now],
    );
    return Number(rows[0]?.count ?? 0);
  }

  /**
   * Marks the approved, unused, unexpired approval of this exact call used, atomically: of two
   * replicas asking at once, one gets its id and the other nothing.
   */
  async consume(binding: ApprovalBinding, now: Date): Promise<McpApproval | null> {
    const { rows } = await this.db.query(
      `UPDATE mcp_approvals SET used_at = $5
       WHERE key_id = $1 AND tool_id = $2 AND arguments_hash = $3 AND policy_version = $4 AND status = 'approved' AND used_at IS NULL AND expires_at > $5
       RETURNING ${COLUMNS}`,
      [binding.keyId, binding.toolId, binding.argumentsHash, binding.policyVersion, now],
    );
    return rows[0] ? toApproval(rows[0]) : null;
  }

  /** The same, for the approval a waiter waited on. */
  async consumeById(id: string, now: Date): Promise<boolean> {
    const { rowCount } = await this.db.query("UPDATE mcp_approvals SET used_at = $2 WHERE id = $1 AND status = 'approved' AND used_at IS NULL AND expires_at > $2", [id, now]);
    return rowCount > 0;
  }

  /** A new pending approval, unless one is live for this exact call already (then null: read that one). */
  async insertPending(tx: Queryable, approval: Omit<McpApproval, 'status' | 'decidedAt' | 'decidedBy' | 'reason' | 'usedAt'>): Promise<McpApproval | null> {
    const { rows } = await tx.query(
      `INSERT INTO mcp_approvals (id, organization_id, project_id, key_id, tool_id, upstream_id, gateway_name, arguments_hash, policy_version, request_id,
         status, requested_at, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'pending', $11, $12)
       ON CONFLICT (key_id, tool_id, arguments_hash, policy_version) WHERE ${LIVE} DO NOTHING
       RETURNING ${COLUMNS}`,
      [
        approval.id,
        approval.organizationId,
        approval.projectId,
        approval.keyId,
        approval.toolId,
        approval.upstreamId,
        approval.gatewayName,
        approval.argumentsHash,
        approval.policyVersion,
        approval.requestId,
        approval.requestedAt,
        approval.expiresAt,
      ],
    );
    return rows[0] ? toApproval(rows[0]) : null;
  }

  /** The live approval of this exact call, if any. */
  async live(binding: ApprovalBinding, tx: Queryable = this.db): Promise<McpApproval | null> {
    const { rows } = await tx.query(`SELECT ${COLUMNS} FROM mcp_approvals WHERE key_id = $1 AND tool_id = $2 AND arguments_hash = $3 AND policy_version = $4 AND ${LIVE}`, [
      binding.keyId,
      binding.toolId,
      binding.argumentsHash,
      binding.policyVersion,
    ]);
    return rows[0] ? toApproval(rows[0]) : null;
  }

  /** A person's decision on a pending, unexpired approval; null when it is not (any longer) that. */
  async decide(
    tx: Queryable,
    organizationId: string,
    id: string,
    decision: { status: 'approved' | 'denied'; by: string; reason: string | null; now: Date; expiresAt: Date },
  ): Promise<McpApproval | null> {
    const { rows } = await tx.query(
      `UPDATE mcp_approvals SET status = $3, decided_by = $4, reason = $5, decided_at = $6, expires_at = $7
       WHERE organization_id = $1 AND id = $2 AND status = 'pending' AND expires_at > $6 RETURNING ${COLUMNS}`,
      [organizationId, id, decision.status, decision.by, decision.reason, decision.now, decision.expiresAt],
    );
    return rows[0] ? toApproval(rows[0]) : null;
  }

  /**
   * Lapses live approvals past their expiry (pending ones never decided, approved ones never used),
   * at most `limit`, and those of `binding`'s call bound to another policy version (`reason` says
   * which); answers them as they were before, so the caller can tell what lapsed.
   */
  async lapse(tx: Queryable, where: { due: Date; limit: number } | { binding: ApprovalBinding; now: Date }): Promise<Array<McpApproval & { reason: string | null }>> {
    const expired = "status = 'expired', decided_at = coalesce(decided_at, $1)";
    if ('due' in where) {
      const { rows } = await tx.query(
        `UPDATE mcp_approvals SET ${expired} WHERE id IN (
           SELECT id FROM mcp_approvals WHERE ${LIVE} AND expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING ${COLUMNS}`,
        [where.due, where.limit],
      );
      return rows.map(toApproval);
    }
    const { binding, now } = where;
    const { rows } = await tx.query(
      `UPDATE mcp_approvals SET ${expired}, reason = CASE WHEN policy_version <> $5 THEN $6 ELSE reason END
       WHERE key_id = $2 AND tool_id = $3 AND arguments_hash = $4 AND ${LIVE} AND (expires_at <= $1 OR policy_version <> $5)
       RETURNING ${COLUMNS}`,
      [now, binding.keyId, binding.toolId, binding.argumentsHash, binding.policyVersion, POLICY_CHANGED],
    );
    return rows.map(toApproval);
  }

  async eraseOrganization(tx: Queryable, organizationId: string): Promise<number> {
    const { rowCount } = await tx.query('DELETE FROM mcp_approvals WHERE organization_id = $1', [organizationId]);
    return rowCount;
  }
}

/** Why an approval lapsed before its expiry: what it was given for changed. */
export const POLICY_CHANGED = "The tool's approval policy, input schema or annotations changed since it was requested";

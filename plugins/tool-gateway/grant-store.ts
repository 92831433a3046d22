import { Conditions } from '../../adapters/sql/conditions.ts';
import { type KeysetOrder, selectPage } from '../../adapters/sql/keyset.ts';
import { date, dateOrNull, type Row, str, strOrNull } from '../../adapters/sql/rows.ts';
import type { Queryable } from '../../core/ports/database.ts';
import type { Page, PageRequest } from '../../core/vocabulary/pagination.ts';

/** A group given to a key of the group's project. */
export interface McpGrant {
  id: string;
  organizationId: string;
  projectId: string;
  groupId: string;
  keyId: string;
  note: string | null;
  expiresAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

const COLUMNS = 'id, organization_id, project_id, group_id, key_id, note, expires_at, created_at, updated_at';
const ORDER: KeysetOrder = { at: 'created_at', id: 'id', idType: 'uuid' };

function toGrant(row: Row): McpGrant {
  return {
    id: str(row, 'id'),
    organizationId: str(row, 'organization_id'),
    projectId: str(row, 'project_id'),
    groupId: str(row, 'group_id'),
    keyId: str(row, 'key_id'),
    note: strOrNull(row, 'note'),
    expiresAt: dateOrNull(row, 'expires_at'),
    createdAt: date(row, 'created_at'),
    updatedAt: date(row, 'updated_at'),
  };
}

export interface GrantFilter {
  organizationId: string;
  visibleProjectIds: string[] | null;
  groupId?: string | undefined;
  keyId?: string | undefined;
}

/** The mcp_grants and mcp_app_tool_groups tables (owned by this plugin). */
export class GrantStore {
  constructor(private readonly db: Queryable) {}

  async get(organizationId: string, id: string, tx: Queryable = this.db): Promise<McpGrant | null> {
    const { rows } = await tx.query(`SELECT ${COLUMNS} FROM mcp_grants WHERE organization_id = $1 AND id = $2`, [organizationId, id]);
    return rows[0] ? toGrant(rows[0]) : null;
  }

  async page(filter: GrantFilter, page: PageRequest): Promise<Page<McpGrant>> {
    const where = new Conditions();
    where.add(`organization_id = ${where.param(filter.organizationId)}::uuid`);
    if (filter.visibleProjectIds !== null) where.add(`project_id = ANY(${where.param(filter.visibleProjectIds)}::uuid[])`);
    if (filter.groupId !== undefined) where.add(`group_id = ${where.param(filter.groupId)}::uuid`);
    if (filter.keyId !== undefined) where.add(`key_id = ${where.param(filter.keyId)}::uuid`);
    return selectPage(this.db, { columns: COLUMNS, from: 'mcp_grants', where, order: ORDER, page, toItem: toGrant });
  }

  /** Creates the grant; null when the key holds this group already. */
  async create(tx: Queryable, grant: Omit<McpGrant, 'createdAt' | 'updatedAt'>, now: Date): Promise<McpGrant | null> {
    const { rows } = await tx.query(
      `INSERT INTO mcp_grants (id, organization_id, project_id, group_id, key_id, note, expires_at, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) ON CONFLICT (group_id, key_id) DO NOTHING RETURNING ${COLUMNS}`,
      [grant.id, grant.organizationId, grant.projectId, grant.groupId, grant.keyId, grant.note, grant.expiresAt, now],
    );
    return rows[0] ? toGrant(rows[0]) : null;
  }

  async update(tx: Queryable, organizationId: string, id: string, change: { note: string | null; expiresAt: Date | null }, now: Date): Promise<McpGrant | null> {
    const { rows } = await tx.query(`UPDATE mcp_grants SET note = $3, expires_at = $4, updated_at = $5 WHERE organization_id = $1 AND id = $2 RETURNING ${COLUMNS}`, [
      organizationId,
      id,
      change.note,
      change.expiresAt,
      now,
    ]);
    return rows[0] ? toGrant(rows[0]) : null;
  }

  async delete(tx: Queryable, organizationId: string, id: string): Promise<boolean> {
    const { rowCount } = await tx.query('DELETE FROM mcp_grants WHERE organization_id = $1 AND id = $2', [organizationId, id]);
    return rowCount > 0;
  }

  /**
   * The ids of the switched-on tools a key's grants give it: grants not expired at `now`, of groups
   * in `projectId` (the key's project now: a key moved elsewhere leaves its old grants inert), with
   * the groups giving each tool.
   */
  async grantedTools(keyId: string, projectId: string, now: Date, tx: Queryable = this.db): Promise<Map<string, string[]>> {
    const { rows } = await tx.query<{ tool_id: string; group_ids: string[] }>(
      `SELECT gt.tool_id, array_agg(DISTINCT g.group_id::text ORDER BY g.group_id::text) AS group_ids
       FROM mcp_grants g
       JOIN mcp_group_tools gt ON gt.group_id = g.group_id
       JOIN mcp_tools t ON t.id = gt.tool_id
       WHERE g.key_id = $1 AND g.project_id = $2 AND t.project_id = $2 AND t.enabled
         AND (g.expires_at IS NULL OR g.expires_at > $3)
       GROUP BY gt.tool_id`,
      [keyId, projectId, now],
    );
    return new Map(rows.map((row) => [row.tool_id, row.group_ids]));
  }

  /** The groups chosen for an app, in the order they were given. */
  async appGroups(organizationId: string, appId: string, tx: Queryable = this.db): Promise<{ groupIds: string[]; updatedAt: Date | null }> {
    const { rows } = await tx.query<{ group_id: string; updated_at: Date }>(
      'SELECT group_id, updated_at FROM mcp_app_tool_groups WHERE organization_id = $1 AND app_id = $2 ORDER BY position',
      [organizationId, appId],
    );
    return { groupIds: rows.map((row) => row.group_id), updatedAt: rows[0]?.updated_at ?? null };
  }

  /** Replaces the app's groups whole. */
  async setAppGroups(tx: Queryable, organizationId: string, appId: string, groupIds: readonly string[], now: Date): Promise<void> {
    await tx.query('DELETE FROM mcp_app_tool_groups WHERE organization_id = $1 AND app_id = $2', [organizationId, appId]);
    if (groupIds.length === 0) return;
    await tx.query(
      `INSERT INTO mcp_app_tool_groups (organization_id, app_id, group_id, position, updated_at)
       SELECT $1, $2, chosen.group_id, chosen.position, $4 FROM unnest($3::uuid[]) WITH ORDINALITY AS chosen(group_id, position)`,
      [organizationId, appId, groupIds, now],
    );
  }

  /** Per project: how many grants are in force (unexpired) at `now`. */
  async countsByProject(organizationId: string, now: Date): Promise<Map<string, number>> {
    const { rows } = await this.db.query<{ project_id: string; n: number }>(
      'SELECT project_id::text AS project_id, count(*)::int AS n FROM mcp_grants WHERE organization_id = $1 AND (expires_at IS NULL OR expires_at > $2) GROUP BY project_id',
      [organizationId, now],
    );
    return new Map(rows.map((row) => [row.project_id, Number(row.n)]));
  }

  async eraseOrganization(tx: Queryable, organizationId: string): Promise<number> {
    const apps = await tx.query('DELETE FROM mcp_app_tool_groups WHERE organization_id = $1', [organizationId]);
    const grants = await tx.query('DELETE FROM mcp_grants WHERE organization_id = $1', [organizationId]);
    return apps.rowCount + grants.rowCount;
  }
}

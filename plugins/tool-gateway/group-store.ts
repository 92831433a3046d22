import { Conditions } from '../../adapters/sql/conditions.ts';
import { type KeysetOrder, selectPage } from '../../adapters/sql/keyset.ts';
import { date, type Row, str, strOrNull } from '../../adapters/sql/rows.ts';
import type { Queryable } from '../../core/ports/database.ts';
import type { Page, PageRequest } from '../../core/vocabulary/pagination.ts';

/** A bundle of tools of one project. */
export interface McpGroup {
  id: string;
  organizationId: string;
  projectId: string;
  name: string;
  description: string | null;
  createdAt: Date;
  updatedAt: Date;
}

const COLUMNS = 'id, organization_id, project_id, name, description, created_at, updated_at';
const ORDER: KeysetOrder = { at: 'created_at', id: 'id', idType: 'uuid' };

function toGroup(row: Row): McpGroup {
  return {
    id: str(row, 'id'),
    organizationId: str(row, 'organization_id'),
    projectId: str(row, 'project_id'),
    name: str(row, 'name'),
    description: strOrNull(row, 'description'),
    createdAt: date(row, 'created_at'),
    updatedAt: date(row, 'updated_at'),
  };
}

export interface GroupFilter {
  organizationId: string;
  visibleProjectIds: string[] | null;
  projectId?: string | undefined;
}

/** The mcp_groups and mcp_group_tools tables (owned by this plugin). */
export class GroupStore {
  constructor(private readonly db: Queryable) {}

  async get(organizationId: string, id: string, tx: Queryable = this.db): Promise<McpGroup | null> {
    const { rows } = await tx.query(`SELECT ${COLUMNS} FROM mcp_groups WHERE organization_id = $1 AND id = $2`, [organizationId, id]);
    return rows[0] ? toGroup(rows[0]) : null;
  }

  async page(filter: GroupFilter, page: PageRequest): Promise<Page<McpGroup>> {
    const where = new Conditions();
    where.add(`organization_id = ${where.param(filter.organizationId)}::uuid`);
    if (filter.visibleProjectIds !== null) where.add(`project_id = ANY(${where.param(filter.visibleProjectIds)}::uuid[])`);
    if (filter.projectId !== undefined) where.add(`project_id = ${where.param(filter.projectId)}::uuid`);
    return selectPage(this.db, { columns: COLUMNS, from: 'mcp_groups', where, order: ORDER, page, toItem: toGroup });
  }

  /** Of these ids, the organisation's groups, in no particular order. */
  async some(organizationId: string, ids: readonly string[], tx: Queryable = this.db): Promise<McpGroup[]> {
    const { rows } = await tx.query(`SELECT ${COLUMNS} FROM mcp_groups WHERE organization_id = $1 AND id = ANY($2::uuid[])`, [organizationId, ids]);
    return rows.map(toGroup);
  }

  async create(tx: Queryable, group: Omit<McpGroup, 'createdAt' | 'updatedAt'>, now: Date): Promise<McpGroup> {
    const { rows } = await tx.query(
      `INSERT INTO mcp_groups (id, organization_id, project_id, name, description, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING ${COLUMNS}`,
      [group.id, group.organizationId, group.projectId, group.name, group.description, now],
    );
    return toGroup(rows[0]!);
  }

  async update(tx: Queryable, organizationId: string, id: string, change: { name: string; description: string | null }, now: Date): Promise<McpGroup | null> {
    const { rows } = await tx.query(`UPDATE mcp_groups SET name = $3, description = $4, updated_at = $5 WHERE organization_id = $1 AND id = $2 RETURNING ${COLUMNS}`, [
      organizationId,
      id,
      change.name,
      change.description,
      now,
    ]);
    return rows[0] ? toGroup(rows[0]) : null;
  }

  /** Deletes the group; its members, grants and app choices go with it (cascade). */
  async delete(tx: Queryable, organizationId: string, id: string): Promise<boolean> {
    const { rowCount } = await tx.query('DELETE FROM mcp_groups WHERE organization_id = $1 AND id = $2', [organizationId, id]);
    return rowCount > 0;
  }

  /** Each group's tool ids, ordered by tool id (the order is the view's, not a ranking). */
  async toolIdsOf(groupIds: readonly string[], tx: Queryable = this.db): Promise<Map<string, string[]>> {
    const byGroup = new Map<string, string[]>(groupIds.map((id) => [id, []]));
    if (groupIds.length === 0) return byGroup;
    const { rows } = await tx.query<{ group_id: string; tool_id: string }>('SELECT group_id, tool_id FROM mcp_group_tools WHERE group_id = ANY($1::uuid[]) ORDER BY group_id, tool_id', [
      groupIds,
    ]);
    for (const row of rows) byGroup.get(row.group_id)?.push(row.tool_id);
    return byGroup;
  }

  /** Replaces the group's tools whole (the group row is locked: one replacement at a time). */
  async replaceTools(tx: Queryable, organizationId: string, groupId: string, toolIds: readonly string[], now: Date): Promise<void> {
    await tx.query('SELECT 1 FROM mcp_groups WHERE id = $1 FOR UPDATE', [groupId]);
    await tx.query('DELETE FROM mcp_group_tools WHERE group_id = $1', [groupId]);
    if (toolIds.length > 0) {
      await tx.query('INSERT INTO mcp_group_tools (group_id, tool_id, organization_id) SELECT $1, unnest($2::uuid[]), $3 ON CONFLICT DO NOTHING', [groupId, toolIds, organizationId]);
    }
    await tx.query('UPDATE mcp_groups SET updated_at = $2 WHERE id = $1', [groupId, now]);
  }

  /** Per project: how many groups. */
  async countsByProject(organizationId: string): Promise<Map<string, number>> {
    const { rows } = await this.db.query<{ project_id: string; n: number }>(
      'SELECT project_id::text AS project_id, count(*)::int AS n FROM mcp_groups WHERE organization_id = $1 GROUP BY project_id',
      [organizationId],
    );
    return new Map(rows.map((row) => [row.project_id, Number(row.n)]));
  }

  async eraseOrganization(tx: Queryable, organizationId: string): Promise<number> {
    const members = await tx.query('DELETE FROM mcp_group_tools WHERE organization_id = $1', [organizationId]);
    const groups = await tx.query('DELETE FROM mcp_groups WHERE organization_id = $1', [organizationId]);
    return members.rowCount + groups.rowCount;
  }
}

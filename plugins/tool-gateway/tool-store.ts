import { Conditions } from '../../adapters/sql/conditions.ts';
import { type KeysetOrder, selectPage } from '../../adapters/sql/keyset.ts';
import { bool, date, type Row, str, strOrNull } from '../../adapters/sql/rows.ts';
import type { Queryable } from '../../core/ports/database.ts';
import type { Page, PageRequest } from '../../core/vocabulary/pagination.ts';

export type ApprovalPolicy = 'never' | 'always' | 'destructive';

/** What the server says of a tool (tools/list), as cached. */
export interface ToolDefinition {
  name: string;
  title: string | null;
  description: string | null;
  inputSchema: Record<string, unknown>;
  outputSchema: Record<string, unknown> | null;
  annotations: Record<string, unknown> | null;
}

/** What the customer decides of a tool. */
export interface ToolSettings {
  enabled: boolean;
  alias: string | null;
  descriptionOverride: string | null;
  approval: ApprovalPolicy;
}

export interface McpTool extends ToolDefinition, ToolSettings {
  id: string;
  upstreamId: string;
  organizationId: string;
  projectId: string;
  discoveredAt: Date;
  changedAt: Date;
  createdAt: Date;
  updatedAt: Date;
}

const COLUMNS = `id, upstream_id, organization_id, project_id, name, title, description, input_schema, output_schema, annotations,
  enabled, alias, description_override, approval, discovered_at, changed_at, created_at, updated_at`;

const ORDER: KeysetOrder = { at: 'created_at', id: 'id', idType: 'uuid' };

const json = (value: unknown): Record<string, unknown> | null =>
  value === null || value === undefined ? null : ((typeof value === 'string' ? JSON.parse(value) : value) as Record<string, unknown>);

function toTool(row: Row): McpTool {
  return {
    id: str(row, 'id'),
    upstreamId: str(row, 'upstream_id'),
    organizationId: str(row, 'organization_id'),
    projectId: str(row, 'project_id'),
    name: str(row, 'name'),
    title: strOrNull(row, 'title'),
    description: strOrNull(row, 'description'),
    inputSchema: json(row.input_schema) ?? { type: 'object' },
    outputSchema: json(row.output_schema),
    annotations: json(row.annotations),
    enabled: bool(row, 'enabled'),
    alias: strOrNull(row, 'alias'),
    descriptionOverride: strOrNull(row, 'description_override'),
    approval: str(row, 'approval') as ApprovalPolicy,
    discoveredAt: date(row, 'discovered_at'),
    changedAt: date(row, 'changed_at'),
    createdAt: date(row, 'created_at'),
    updatedAt: date(row, 'updated_at'),
  };
}

export interface ToolFilter {
  organizationId: string;
  visibleProjectIds: string[] | null;
  upstreamId?: string | undefined;
  enabled?: boolean | undefined;
}

const jsonParam = (value: Record<string, unknown> | null) => (value === null ? null : JSON.stringify(value));

/** The mcp_tools table (owned by this plugin). */
export class ToolStore {
  constructor(private readonly db: Queryable) {}

  async get(organizationId: string, id: string, tx: Queryable = this.db): Promise<McpTool | null> {
    const { rows } = await tx.query(`SELECT ${COLUMNS} FROM mcp_tools WHERE organization_id = $1 AND id = $2`, [organizationId, id]);
    return rows[0] ? toTool(rows[0]) : null;
  }

  async page(filter: ToolFilter, page: PageRequest): Promise<Page<McpTool>> {
    const where = new Conditions();
    where.add(`organization_id = ${where.param(filter.organizationId)}::uuid`);
    if (filter.visibleProjectIds !== null) where.add(`project_id = ANY(${where.param(filter.visibleProjectIds)}::uuid[])`);
    if (filter.upstreamId !== undefined) where.add(`upstream_id = ${where.param(filter.upstreamId)}::uuid`);
    if (filter.enabled !== undefined) where.add(`enabled = ${where.param(filter.enabled)}::boolean`);
    return selectPage(this.db, { columns: COLUMNS, from: 'mcp_tools', where, order: ORDER, page, toItem: toTool });
  }

  /** An upstream's tools, locked: one refresh at a time writes them. */
  async ofUpstreamLocked(tx: Queryable, upstreamId: string): Promise<McpTool[]> {
    const { rows } = await tx.query(`SELECT ${COLUMNS} FROM mcp_tools WHERE upstream_id = $1 ORDER BY name FOR UPDATE`, [upstreamId]);
    return rows.map(toTool);
  }

  /** Of these ids, the organisation's tools in the projects given (null: any project). */
  async some(organizationId: string, ids: readonly string[], visibleProjectIds: string[] | null, tx: Queryable = this.db): Promise<McpTool[]> {
    const { rows } = await tx.query(
      `SELECT ${COLUMNS} FROM mcp_tools WHERE organization_id = $1 AND id = ANY($2::uuid[]) AND ($3::uuid[] IS NULL OR project_id = ANY($3::uuid[])) ORDER BY created_at, id`,
      [organizationId, ids, visibleProjectIds],
    );
    return rows.map(toTool);
  }

  /** The project's switched-on tools: what any key of a `full` project gets. */
  async enabledOfProject(organizationId: string, projectId: string, tx: Queryable = this.db): Promise<McpTool[]> {
    const { rows } = await tx.query(`SELECT ${COLUMNS} FROM mcp_tools WHERE organization_id = $1 AND project_id = $2 AND enabled`, [organizationId, projectId]);
    return rows.map(toTool);
  }

  async insert(tx: Queryable, tool: { id: string; upstreamId: string; organizationId: string; projectId: string; enabled: boolean } & ToolDefinition, now: Date): Promise<void> {
    await tx.query(
      `INSERT INTO mcp_tools (id, upstream_id, organization_id, project_id, name, title, description, input_schema, output_schema, annotations, enabled,
         discovered_at, changed_at, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9::jsonb, $10::jsonb, $11, $12, $12, $12, $12)`,
      [
        tool.id,
        tool.upstreamId,
        tool.organizationId,
        tool.projectId,
        tool.name,
        tool.title,
        tool.description,
        JSON.stringify(tool.inputSchema),
        jsonParam(tool.outputSchema),
        jsonParam(tool.annotations),
        tool.enabled,
        now,
      ],
    );
  }

  /**
   * The server changed what it says of the tool; the customer's settings stay. A changed input schema
   * or annotations (what the arguments mean, whether it is destructive) bumps the policy version, so
   * approvals given before no longer release calls.
   */
  async redefine(tx: Queryable, id: string, definition: ToolDefinition, now: Date): Promise<void> {
    await tx.query(
      `UPDATE mcp_tools SET title = $2, description = $3, input_schema = $4::jsonb, output_schema = $5::jsonb, annotations = $6::jsonb,
         policy_version = policy_version + CASE WHEN input_schema IS DISTINCT FROM $4::jsonb OR annotations IS DISTINCT FROM $6::jsonb THEN 1 ELSE 0 END,
         discovered_at = $7, changed_at = $7, updated_at = $7 WHERE id = $1`,
      [id, definition.title, definition.description, JSON.stringify(definition.inputSchema), jsonParam(definition.outputSchema), jsonParam(definition.annotations), now],
    );
  }

  async seen(tx: Queryable, upstreamId: string, now: Date): Promise<void> {
    await tx.query('UPDATE mcp_tools SET discovered_at = $2 WHERE upstream_id = $1', [upstreamId, now]);
  }

  async deleteMany(tx: Queryable, ids: readonly string[]): Promise<void> {
    if (ids.length > 0) await tx.query('DELETE FROM mcp_tools WHERE id = ANY($1::uuid[])', [ids]);
  }

  /** A changed approval policy bumps the policy version: approvals given under the old one release nothing. */
  async updateSettings(tx: Queryable, organizationId: string, id: string, settings: ToolSettings, now: Date): Promise<McpTool | null> {
    const { rows } = await tx.query(
      `UPDATE mcp_tools SET enabled = $3, alias = $4, description_override = $5, approval = $6, updated_at = $7,
         policy_version = policy_version + CASE WHEN approval <> $6 THEN 1 ELSE 0 END
       WHERE organization_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
      [organizationId, id, settings.enabled, settings.alias, settings.descriptionOverride, settings.approval, now],
    );
    return rows[0] ? toTool(rows[0]) : null;
  }

  /** Switches these tools on; answers those that were off. */
  async switchOn(tx: Queryable, ids: readonly string[], now: Date): Promise<string[]> {
    const { rows } = await tx.query<{ id: string }>('UPDATE mcp_tools SET enabled = true, updated_at = $2 WHERE id = ANY($1::uuid[]) AND NOT enabled RETURNING id', [ids, now]);
    return rows.map((row) => row.id);
  }

  /** Whether another tool of the upstream is named or aliased `name` at the gateway. */
  async nameTaken(tx: Queryable, upstreamId: string, name: string, exceptId: string): Promise<boolean> {
    const { rows } = await tx.query('SELECT 1 FROM mcp_tools WHERE upstream_id = $1 AND id <> $3 AND (coalesce(alias, name) = $2 OR alias = $2)', [upstreamId, name, exceptId]);
    return rows.length > 0;
  }

  /** Per project: how many tools, and how many switched on. */
  async countsByProject(organizationId: string): Promise<Map<string, { total: number; enabled: number }>> {
    const { rows } = await this.db.query<{ project_id: string; total: string | number; enabled: string | number }>(
      'SELECT project_id, count(*) AS total, count(*) FILTER (WHERE enabled) AS enabled FROM mcp_tools WHERE organization_id = $1 GROUP BY project_id',
      [organizationId],
    );
    return new Map(rows.map((row) => [row.project_id, { total: Number(row.total), enabled: Number(row.enabled) }]));
  }

  async eraseOrganization(tx: Queryable, organizationId: string): Promise<number> {
    const { rowCount } = await tx.query('DELETE FROM mcp_tools WHERE organization_id = $1', [organizationId]);
    return rowCount;
  }
}

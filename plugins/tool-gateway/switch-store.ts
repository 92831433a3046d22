import type { Queryable } from '../../core/ports/database.ts';

/**
 * A project's tool gateway mode:
 * - `off`: the project's keys get no tools at /mcp/gateway;
 * - `governed` (a project without a row): keys get what their grants give, approvals apply;
 * - `full`: any key of the project gets every switched-on tool of the project, without approval,
 *   which is why no key may be created in such a project.
 */
export type ProjectMode = 'off' | 'governed' | 'full';
export const DEFAULT_MODE: ProjectMode = 'governed';

/** The mcp_project_switches table (owned by this plugin). */
export class SwitchStore {
  constructor(private readonly db: Queryable) {}

  async modeOf(projectId: string, tx: Queryable = this.db): Promise<ProjectMode> {
    const { rows } = await tx.query<{ mode: ProjectMode }>('SELECT mode FROM mcp_project_switches WHERE project_id = $1', [projectId]);
    return rows[0]?.mode ?? DEFAULT_MODE;
  }

  async modes(organizationId: string): Promise<Map<string, { mode: ProjectMode; updatedAt: Date }>> {
    const { rows } = await this.db.query<{ project_id: string; mode: ProjectMode; updated_at: Date }>(
      'SELECT project_id, mode, updated_at FROM mcp_project_switches WHERE organization_id = $1',
      [organizationId],
    );
    return new Map(rows.map((row) => [row.project_id, { mode: row.mode, updatedAt: row.updated_at }]));
  }

  /** Sets the mode; answers the one before. */
  async set(tx: Queryable, organizationId: string, projectId: string, mode: ProjectMode, now: Date): Promise<ProjectMode> {
    const { rows } = await tx.query<{ mode: ProjectMode }>('SELECT mode FROM mcp_project_switches WHERE project_id = $1 FOR UPDATE', [projectId]);
    await tx.query(
      `INSERT INTO mcp_project_switches (project_id, organization_id, mode, updated_at) VALUES ($1, $2, $3, $4)
       ON CONFLICT (project_id) DO UPDATE SET mode = EXCLUDED.mode, updated_at = EXCLUDED.updated_at`,
      [projectId, organizationId, mode, now],
    );
    return rows[0]?.mode ?? DEFAULT_MODE;
  }

  async eraseOrganization(tx: Queryable, organizationId: string): Promise<number> {
    const { rowCount } = await tx.query('DELETE FROM mcp_project_switches WHERE organization_id = $1', [organizationId]);
    return rowCount;
  }
}

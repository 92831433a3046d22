import { Conditions } from '../../adapters/sql/conditions.ts';
import { type KeysetOrder, selectPage } from '../../adapters/sql/keyset.ts';
import { date, type Row, str } from '../../adapters/sql/rows.ts';
import type { Queryable } from '../../core/ports/database.ts';
import type { Page, PageRequest } from '../../core/vocabulary/pagination.ts';

/** A customer's own OAuth client at an authorization server; its secret is in the vault. */
export interface OAuthApp {
  id: string;
  organizationId: string;
  projectId: string;
  name: string;
  clientId: string;
  hasClientSecret: boolean;
  authorizationServerUrl: string;
  scopes: string[] | null;
  createdAt: Date;
  updatedAt: Date;
}

export type OAuthAppSettings = Pick<OAuthApp, 'name' | 'clientId' | 'hasClientSecret' | 'authorizationServerUrl' | 'scopes'>;

const COLUMNS = 'a.id, a.organization_id, a.project_id, a.name, a.client_id, a.has_client_secret, a.authorization_server_url, a.scopes, a.created_at, a.updated_at';
const ORDER: KeysetOrder = { at: 'a.created_at', id: 'a.id', idType: 'uuid' };

function toApp(row: Row): OAuthApp {
  return {
    id: str(row, 'id'),
    organizationId: str(row, 'organization_id'),
    projectId: str(row, 'project_id'),
    name: str(row, 'name'),
    clientId: str(row, 'client_id'),
    hasClientSecret: row.has_client_secret === true,
    authorizationServerUrl: str(row, 'authorization_server_url'),
    scopes: (row.scopes as string[] | null) ?? null,
    createdAt: date(row, 'created_at'),
    updatedAt: date(row, 'updated_at'),
  };
}

/** The mcp_oauth_apps table (owned by this plugin). */
export class OAuthAppStore {
  constructor(private readonly db: Queryable) {}

  async get(organizationId: string, id: string, tx: Queryable = this.db): Promise<OAuthApp | null> {
    const { rows } = await tx.query(`SELECT ${COLUMNS} FROM mcp_oauth_apps a WHERE a.organization_id = $1 AND a.id = $2`, [organizationId, id]);
    return rows[0] ? toApp(rows[0]) : null;
  }

  async page(filter: { organizationId: string; visibleProjectIds: string[] | null; projectId?: string | undefined }, page: PageRequest): Promise<Page<OAuthApp>> {
    const where = new Conditions();
    where.add(`a.organization_id = ${where.param(filter.organizationId)}::uuid`);
    if (filter.visibleProjectIds !== null) where.add(`a.project_id = ANY(${where.param(filter.visibleProjectIds)}::uuid[])`);
    if (filter.projectId !== undefined) where.add(`a.project_id = ${where.param(filter.projectId)}::uuid`);
    return selectPage(this.db, { columns: COLUMNS, from: 'mcp_oauth_apps a', where, order: ORDER, page, toItem: toApp });
  }

  async create(tx: Queryable, app: OAuthAppSettings & { id: string; organizationId: string; projectId: string }, now: Date): Promise<OAuthApp> {
    await tx.query(
      `INSERT INTO mcp_oauth_apps (id, organization_id, project_id, name, client_id, has_client_secret, authorization_server_url, scopes, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)`,
      [app.id, app.organizationId, app.projectId, app.name, app.clientId, app.hasClientSecret, app.authorizationServerUrl, app.scopes === null ? null : JSON.stringify(app.scopes), now],
    );
    return (await this.get(app.organizationId, app.id, tx)) as OAuthApp;
  }

  async update(tx: Queryable, organizationId: string, id: string, settings: OAuthAppSettings, now: Date): Promise<OAuthApp | null> {
    const { rowCount } = await tx.query(
      `UPDATE mcp_oauth_apps SET name = $3, client_id = $4, has_client_secret = $5, authorization_server_url = $6, scopes = $7, updated_at = $8
       WHERE organization_id = $1 AND id = $2`,
      [
        organizationId,
        id,
        settings.name,
        settings.clientId,
        settings.hasClientSecret,
        settings.authorizationServerUrl,
        settings.scopes === null ? null : JSON.stringify(settings.scopes),
        now,
      ],
    );
    return rowCount > 0 ? this.get(organizationId, id, tx) : null;
  }

  /** Names of the upstreams using the app (locking the app's row, so no upstream takes it up while it is deleted). */
  async usersLocked(tx: Queryable, id: string): Promise<string[]> {
    await tx.query('SELECT id FROM mcp_oauth_apps WHERE id = $1 FOR UPDATE', [id]);
    const { rows } = await tx.query<{ name: string }>('SELECT name FROM mcp_upstreams WHERE auth_oauth_app_id = $1 ORDER BY name', [id]);
    return rows.map((row) => row.name);
  }

  async delete(tx: Queryable, organizationId: string, id: string): Promise<boolean> {
    const { rowCount } = await tx.query('DELETE FROM mcp_oauth_apps WHERE organization_id = $1 AND id = $2', [organizationId, id]);
    return rowCount > 0;
  }

  /** Every app of an organisation being erased (after its upstreams); answers their ids, whose secrets go too. */
  async eraseOrganization(tx: Queryable, organizationId: string): Promise<string[]> {
    const { rows } = await tx.query<{ id: string }>('DELETE FROM mcp_oauth_apps WHERE organization_id = $1 RETURNING id', [organizationId]);
    return rows.map((row) => row.id);
  }
}

import { Conditions } from '../../adapters/sql/conditions.ts';
import { type KeysetOrder, selectPage } from '../../adapters/sql/keyset.ts';
import { date, dateOrNull, type Row, str, strOrNull } from '../../adapters/sql/rows.ts';
import type { Queryable } from '../../core/ports/database.ts';
import type { Page, PageRequest } from '../../core/vocabulary/pagination.ts';

/** `demo`: the service's own demo tools, reached in process (demo-tools.ts); its url is the DEMO_URL marker. */
export type UpstreamTransport = 'streamable-http' | 'sse' | 'demo';
export type NewToolsPolicy = 'enabled' | 'disabled';
export type HealthStatus = 'unknown' | 'ok' | 'error';

/**
 * How the gateway authenticates to the server; a header's value, OAuth tokens and a registered
 * client's secret are in the secret vault. OAuth with an `oauthAppId` uses the customer's own client.
 */
export type UpstreamAuth = { type: 'none' } | { type: 'header'; name: string } | { type: 'oauth'; oauthAppId: string | null; scopes: string[] | null };

/** The outcome of the last discovery. */
export interface UpstreamHealth {
  status: HealthStatus;
  checkedAt: Date | null;
  latencyMs: number | null;
  errorKind: string | null;
  error: string | null;
  serverName: string | null;
  serverVersion: string | null;
  protocolVersion: string | null;
  discoveredAt: Date | null;
}

export interface Upstream {
  id: string;
  organizationId: string;
  projectId: string;
  name: string;
  slug: string;
  url: string;
  transport: UpstreamTransport;
  auth: UpstreamAuth;
  timeoutMs: number;
  newTools: NewToolsPolicy;
  health: UpstreamHealth;
  /** Tools cached from its last successful discovery. */
  toolCount: number;
  createdAt: Date;
  updatedAt: Date;
}

export interface UpstreamSettings {
  name: string;
  slug: string;
  url: string;
  transport: UpstreamTransport;
  auth: UpstreamAuth;
  timeoutMs: number;
  newTools: NewToolsPolicy;
}

export interface NewUpstream extends UpstreamSettings {
  id: string;
  organizationId: string;
  projectId: string;
}

/** A discovery's outcome as stored: what the server said of itself, or why it failed. */
export type HealthReport =
  | { ok: true; checkedAt: Date; latencyMs: number; serverName: string | null; serverVersion: string | null; protocolVersion: string | null }
  | { ok: false; checkedAt: Date; latencyMs: number; errorKind: string; error: string };

const COLUMNS = `u.id, u.organization_id, u.project_id, u.name, u.slug, u.url, u.transport, u.auth_type, u.auth_header_name, u.auth_oauth_app_id, u.auth_oauth_scopes, u.timeout_ms,
  u.new_tools, u.health, u.checked_at, u.latency_ms, u.error_kind, u.error_message, u.server_name, u.server_version, u.protocol_version,
  u.discovered_at, u.created_at, u.updated_at,
  (SELECT count(*) FROM mcp_tools t WHERE t.upstream_id = u.id) AS tool_count`;

const ORDER: KeysetOrder = { at: 'u.created_at', id: 'u.id', idType: 'uuid' };

const intOrNull = (row: Row, column: string): number | null => (row[column] === null || row[column] === undefined ? null : Number(row[column]));

function authOf(row: Row): UpstreamAuth {
  const headerName = strOrNull(row, 'auth_header_name');
  const type = str(row, 'auth_type');
  if (type === 'header' && headerName !== null) return { type: 'header', name: headerName };
  if (type === 'oauth') return { type: 'oauth', oauthAppId: strOrNull(row, 'auth_oauth_app_id'), scopes: (row.auth_oauth_scopes as string[] | null) ?? null };
  return { type: 'none' };
}

/** The auth columns as written: header name, OAuth app, OAuth scopes. */
function authColumns(auth: UpstreamAuth): [string | null, string | null, string | null] {
  if (auth.type === 'header') return [auth.name, null, null];
  if (auth.type === 'oauth') return [null, auth.oauthAppId, auth.scopes === null ? null : JSON.stringify(auth.scopes)];
  return [null, null, null];
}

function toUpstream(row: Row): Upstream {
  return {
    id: str(row, 'id'),
    organizationId: str(row, 'organization_id'),
    projectId: str(row, 'project_id'),
    name: str(row, 'name'),
    slug: str(row, 'slug'),
    url: str(row, 'url'),
    transport: str(row, 'transport') as UpstreamTransport,
    auth: authOf(row),
    timeoutMs: Number(row.timeout_ms),
    newTools: str(row, 'new_tools') as NewToolsPolicy,
    health: {
      status: str(row, 'health') as HealthStatus,
      checkedAt: dateOrNull(row, 'checked_at'),
      latencyMs: intOrNull(row, 'latency_ms'),
      errorKind: strOrNull(row, 'error_kind'),
      error: strOrNull(row, 'error_message'),
      serverName: strOrNull(row, 'server_name'),
      serverVersion: strOrNull(row, 'server_version'),
      protocolVersion: strOrNull(row, 'protocol_version'),
      discoveredAt: dateOrNull(row, 'discovered_at'),
    },
    toolCount: Number(row.tool_count ?? 0),
    createdAt: date(row, 'created_at'),
    updatedAt: date(row, 'updated_at'),
  };
}

export interface UpstreamFilter {
  organizationId: string;
  /** The projects the caller sees, or null for all. */
  visibleProjectIds: string[] | null;
  projectId?: string | undefined;
}

/** The mcp_upstreams table (owned by this plugin). */
export class UpstreamStore {
  constructor(private readonly db: Queryable) {}

  async get(organizationId: string, id: string, tx: Queryable = this.db): Promise<Upstream | null> {
    const { rows } = await tx.query(`SELECT ${COLUMNS} FROM mcp_upstreams u WHERE u.organization_id = $1 AND u.id = $2`, [organizationId, id]);
    return rows[0] ? toUpstream(rows[0]) : null;
  }

  /** By id alone: for the refresh job, which carries no caller. */
  async byId(id: string, tx: Queryable = this.db): Promise<Upstream | null> {
    const { rows } = await tx.query(`SELECT ${COLUMNS} FROM mcp_upstreams u WHERE u.id = $1`, [id]);
    return rows[0] ? toUpstream(rows[0]) : null;
  }

  async page(filter: UpstreamFilter, page: PageRequest): Promise<Page<Upstream>> {
    const where = new Conditions();
    where.add(`u.organization_id = ${where.param(filter.organizationId)}::uuid`);
    if (filter.visibleProjectIds !== null) where.add(`u.project_id = ANY(${where.param(filter.visibleProjectIds)}::uuid[])`);
    if (filter.projectId !== undefined) where.add(`u.project_id = ${where.param(filter.projectId)}::uuid`);
    return selectPage(this.db, { columns: COLUMNS, from: 'mcp_upstreams u', where, order: ORDER, page, toItem: toUpstream });
  }

  /** Counts the organisation's upstreams with its row locked, so two creates racing for the last place cannot both take it. */
  async countLocked(tx: Queryable, organizationId: string): Promise<number> {
    await tx.query('SELECT id FROM organizations WHERE id = $1 FOR UPDATE', [organizationId]);
    const { rows } = await tx.query<{ count: string | number }>('SELECT count(*) AS count FROM mcp_upstreams WHERE organization_id = $1', [organizationId]);
    return Number(rows[0]?.count ?? 0);
  }

  async slugTaken(tx: Queryable, organizationId: string, slug: string, exceptId: string | null = null): Promise<boolean> {
    const { rows } = await tx.query('SELECT 1 FROM mcp_upstreams WHERE organization_id = $1 AND slug = $2 AND id IS DISTINCT FROM $3::uuid', [organizationId, slug, exceptId]);
    return rows.length > 0;
  }

  async create(tx: Queryable, upstream: NewUpstream, now: Date): Promise<Upstream> {
    await tx.query(
      `INSERT INTO mcp_upstreams (id, organization_id, project_id, name, slug, url, transport, auth_type, auth_header_name, timeout_ms, new_tools, created_at, updated_at,
         auth_oauth_app_id, auth_oauth_scopes)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13, $14)`,
      [
        upstream.id,
        upstream.organizationId,
        upstream.projectId,
        upstream.name,
        upstream.slug,
        upstream.url,
        upstream.transport,
        upstream.auth.type,
        authColumns(upstream.auth)[0],
        upstream.timeoutMs,
        upstream.newTools,
        now,
        authColumns(upstream.auth)[1],
        authColumns(upstream.auth)[2],
      ],
    );
    return (await this.get(upstream.organizationId, upstream.id, tx)) as Upstream;
  }

  async update(tx: Queryable, organizationId: string, id: string, settings: UpstreamSettings, now: Date): Promise<Upstream | null> {
    const { rowCount } = await tx.query(
      `UPDATE mcp_upstreams SET name = $3, slug = $4, url = $5, transport = $6, auth_type = $7, auth_header_name = $8, timeout_ms = $9, new_tools = $10, updated_at = $11,
         auth_oauth_app_id = $12, auth_oauth_scopes = $13
       WHERE organization_id = $1 AND id = $2`,
      [
        organizationId,
        id,
        settings.name,
        settings.slug,
        settings.url,
        settings.transport,
        settings.auth.type,
        authColumns(settings.auth)[0],
        settings.timeoutMs,
        settings.newTools,
        now,
        authColumns(settings.auth)[1],
        authColumns(settings.auth)[2],
      ],
    );
    return rowCount > 0 ? this.get(organizationId, id, tx) : null;
  }

  /** Records a discovery's outcome; answers the status the upstream had before it (null: it is gone). */
  async recordHealth(tx: Queryable, id: string, report: HealthReport): Promise<HealthStatus | null> {
    const { rows } = await tx.query<{ health: HealthStatus }>('SELECT health FROM mcp_upstreams WHERE id = $1 FOR UPDATE', [id]);
    if (!rows[0]) return null;
    if (report.ok) {
      await tx.query(
        `UPDATE mcp_upstreams SET health = 'ok', checked_at = $2, latency_ms = $3, error_kind = NULL, error_message = NULL,
           server_name = $4, server_version = $5, protocol_version = $6, discovered_at = $2 WHERE id = $1`,
        [id, report.checkedAt, Math.round(report.latencyMs), report.serverName, report.serverVersion, report.protocolVersion],
      );
    } else {
      await tx.query(`UPDATE mcp_upstreams SET health = 'error', checked_at = $2, latency_ms = $3, error_kind = $4, error_message = $5 WHERE id = $1`, [
        id,
        report.checkedAt,
        Math.round(report.latencyMs),
        report.errorKind,
        report.error,
      ]);
    }
    return rows[0].health;
  }

  /** Upstreams whose last check is older than `before` (never checked first), for the periodic refresh. */
  async dueForRefresh(before: Date, limit: number): Promise<string[]> {
    const { rows } = await this.db.query<{ id: string }>('SELECT id FROM mcp_upstreams WHERE checked_at IS NULL OR checked_at < $1 ORDER BY checked_at NULLS FIRST LIMIT $2', [
      before,
      limit,
    ]);
    return rows.map((row) => row.id);
  }

  async delete(tx: Queryable, organizationId: string, id: string): Promise<boolean> {
    const { rowCount } = await tx.query('DELETE FROM mcp_upstreams WHERE organization_id = $1 AND id = $2', [organizationId, id]);
    return rowCount > 0;
  }

  /** Every upstream of an organisation whose account is being deleted (their tools go with them); returns their ids, whose secrets go too. */
  async eraseOrganization(tx: Queryable, organizationId: string): Promise<string[]> {
    const { rows } = await tx.query<{ id: string }>('DELETE FROM mcp_upstreams WHERE organization_id = $1 RETURNING id', [organizationId]);
    return rows.map((row) => row.id);
  }
}

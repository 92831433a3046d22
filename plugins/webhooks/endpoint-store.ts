import type { Queryable } from '../../core/ports/database.ts';
import type { Page, PageRequest } from '../../core/vocabulary/pagination.ts';
import { Conditions } from '../../adapters/sql/conditions.ts';
import { type KeysetOrder, selectPage } from '../../adapters/sql/keyset.ts';
import { bool, date, dateOrNull, str, strOrNull, type Row } from '../../adapters/sql/rows.ts';

/** An endpoint as stored; its signing secrets are in the secret vault. */
export interface WebhookEndpoint {
  id: string;
  organizationId: string;
  /** Null: an endpoint of the whole organisation. */
  projectId: string | null;
  url: string;
  description: string;
  /** Public event types, or `['*']` for every one. */
  eventTypes: string[];
  enabled: boolean;
  disabledReason: string | null;
  disabledAt: Date | null;
  failingSince: Date | null;
  previousSecretExpiresAt: Date | null;
  secretRotatedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface NewEndpoint {
  id: string;
  organizationId: string;
  projectId: string | null;
  url: string;
  description: string;
  eventTypes: string[];
  enabled: boolean;
}

export interface EndpointChanges {
  url?: string;
  description?: string;
  eventTypes?: string[];
  /** Switching on clears the reason and the failure streak; switching off records the reason. */
  enabled?: { enabled: true } | { enabled: false; reason: string };
}

export interface EndpointFilter {
  organizationId: string;
  /** The projects the caller sees, or null for all (and then the organisation's own endpoints too). */
  visibleProjectIds: string[] | null;
  projectId?: string | undefined;
}

/** What matches every public type. */
export const EVERY_TYPE = '*';

const COLUMNS = `id, organization_id, project_id, url, description, event_types, enabled, disabled_reason, disabled_at, failing_since,
  previous_secret_expires_at, secret_rotated_at, created_at, updated_at`;

const ORDER: KeysetOrder = { at: 'created_at', id: 'id', idType: 'uuid' };

export function toEndpoint(row: Row, prefix = ''): WebhookEndpoint {
  const column = (name: string) => prefix + name;
  return {
    id: str(row, column('id')),
    organizationId: str(row, column('organization_id')),
    projectId: strOrNull(row, column('project_id')),
    url: str(row, column('url')),
    description: str(row, column('description')),
    eventTypes: row[column('event_types')] as string[],
    enabled: bool(row, column('enabled')),
    disabledReason: strOrNull(row, column('disabled_reason')),
    disabledAt: dateOrNull(row, column('disabled_at')),
    failingSince: dateOrNull(row, column('failing_since')),
    previousSecretExpiresAt: dateOrNull(row, column('previous_secret_expires_at')),
    secretRotatedAt: dateOrNull(row, column('secret_rotated_at')),
    createdAt: date(row, column('created_at')),
    updatedAt: date(row, column('updated_at')),
  };
}

/** The webhook_endpoints table (owned by this plugin). */
export class EndpointStore {
  constructor(private readonly db: Queryable) {}

  async get(organizationId: string, id: string, tx: Queryable = this.db): Promise<WebhookEndpoint | null> {
    const { rows } = await tx.query(`SELECT ${COLUMNS} FROM webhook_endpoints WHERE organization_id = $1 AND id = $2`, [organizationId, id]);
    return rows[0] ? toEndpoint(rows[0]) : null;
  }

  /** Newest first; a caller confined to some projects never sees the organisation's own endpoints. */
  async page(filter: EndpointFilter, page: PageRequest): Promise<Page<WebhookEndpoint>> {
    const where = new Conditions();
    where.add(`organization_id = ${where.param(filter.organizationId)}::uuid`);
    if (filter.visibleProjectIds !== null) where.add(`project_id = ANY(${where.param(filter.visibleProjectIds)}::uuid[])`);
    if (filter.projectId !== undefined) where.add(`project_id = ${where.param(filter.projectId)}::uuid`);
    return selectPage(this.db, { columns: COLUMNS, from: 'webhook_endpoints', where, order: ORDER, page, toItem: (row) => toEndpoint(row) });
  }

  /** Counts the organisation's endpoints with its row locked, so two creates racing for the last place cannot both take it. */
  async countLocked(tx: Queryable, organizationId: string): Promise<number> {
    await tx.query('SELECT id FROM organizations WHERE id = $1 FOR UPDATE', [organizationId]);
    const { rows } = await tx.query<{ count: string | number }>('SELECT count(*) AS count FROM webhook_endpoints WHERE organization_id = $1', [organizationId]);
    return Number(rows[0]?.count ?? 0);
  }

  async create(tx: Queryable, endpoint: NewEndpoint, now: Date): Promise<WebhookEndpoint> {
    const { rows } = await tx.query(
      `INSERT INTO webhook_endpoints (id, organization_id, project_id, url, description, event_types, enabled, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6::text[], $7, $8, $8) RETURNING ${COLUMNS}`,
      [endpoint.id, endpoint.organizationId, endpoint.projectId, endpoint.url, endpoint.description, endpoint.eventTypes, endpoint.enabled, now],
    );
    return toEndpoint(rows[0] as Row);
  }

  async update(tx: Queryable, organizationId: string, id: string, changes: EndpointChanges, now: Date): Promise<WebhookEndpoint | null> {
    const switching = changes.enabled;
    const { rows } = await tx.query(
      `UPDATE webhook_endpoints SET
         url = coalesce($3::text, url),
         description = coalesce($4::text, description),
         event_types = coalesce($5::text[], event_types),
         enabled = coalesce($6::boolean, enabled),
         disabled_reason = CASE WHEN $6::boolean IS NULL THEN disabled_reason WHEN $6::boolean THEN NULL ELSE $7::text END,
         disabled_at = CASE WHEN $6::boolean IS NULL THEN disabled_at WHEN $6::boolean THEN NULL WHEN enabled THEN $8::timestamptz ELSE disabled_at END,
         failing_since = CASE WHEN $6::boolean THEN NULL ELSE failing_since END,
         updated_at = $8::timestamptz
       WHERE organization_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
      [
        organizationId,
        id,
        changes.url ?? null,
        changes.description ?? null,
        changes.eventTypes ?? null,
        switching ? switching.enabled : null,
        switching && !switching.enabled ? switching.reason : null,
        now,
      ],
    );
    return rows[0] ? toEndpoint(rows[0]) : null;
  }

  /** Every endpoint of an organisation whose account is being deleted; returns their ids, whose secrets go too. */
  async eraseOrganization(tx: Queryable, organizationId: string): Promise<string[]> {
    const { rows } = await tx.query<{ id: string }>('DELETE FROM webhook_endpoints WHERE organization_id = $1 RETURNING id', [organizationId]);
    return rows.map((row) => row.id);
  }

  async delete(tx: Queryable, organizationId: string, id: string): Promise<boolean> {
    const { rowCount } = await tx.query('DELETE FROM webhook_endpoints WHERE organization_id = $1 AND id = $2', [organizationId, id]);
    return rowCount > 0;
  }

  /** The enabled endpoints that want an event of this type from this project (null: about no project). */
  async subscribed(tx: Queryable, organizationId: string, type: string, projectId: string | null): Promise<WebhookEndpoint[]> {
    const { rows } = await tx.query(
      `SELECT ${COLUMNS} FROM webhook_endpoints
       WHERE organization_id = $1 AND enabled AND ($2 = ANY(event_types) OR $3 = ANY(event_types))
         AND (project_id IS NULL OR project_id = $4::uuid)
       ORDER BY created_at, id`,
      [organizationId, type, EVERY_TYPE, projectId],
    );
    return rows.map((row) => toEndpoint(row));
  }

  async secretRotated(tx: Queryable, id: string, now: Date, previousExpiresAt: Date | null): Promise<WebhookEndpoint> {
    const { rows } = await tx.query(`UPDATE webhook_endpoints SET secret_rotated_at = $2, previous_secret_expires_at = $3, updated_at = $2 WHERE id = $1 RETURNING ${COLUMNS}`, [
      id,
      now,
      previousExpiresAt,
    ]);
    return toEndpoint(rows[0] as Row);
  }

  /** An attempt succeeded: the failure streak ends. */
  async succeeded(tx: Queryable, id: string): Promise<void> {
    await tx.query('UPDATE webhook_endpoints SET failing_since = NULL WHERE id = $1 AND failing_since IS NOT NULL', [id]);
  }

  /** An attempt failed: the streak starts now unless it is already running. Returns when it started. */
  async failed(tx: Queryable, id: string, now: Date): Promise<Date | null> {
    const { rows } = await tx.query('UPDATE webhook_endpoints SET failing_since = coalesce(failing_since, $2) WHERE id = $1 RETURNING failing_since', [id, now]);
    return rows[0] ? date(rows[0], 'failing_since') : null;
  }

  /** Switched off by the service; false when it was off already. */
  async disable(tx: Queryable, id: string, reason: string, now: Date): Promise<boolean> {
    const { rowCount } = await tx.query('UPDATE webhook_endpoints SET enabled = false, disabled_reason = $2, disabled_at = $3, updated_at = $3 WHERE id = $1 AND enabled', [id, reason, now]);
    return rowCount > 0;
  }
}

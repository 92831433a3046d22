import type { Queryable } from '../../core/ports/database.ts';
import type { Page, PageRequest } from '../../core/vocabulary/pagination.ts';
import { Conditions } from '../../adapters/sql/conditions.ts';
import { type KeysetOrder, selectPage } from '../../adapters/sql/keyset.ts';
import { date, str, strOrNull, type Row } from '../../adapters/sql/rows.ts';

export interface AuditEntry {
  eventId: string;
  organizationId: string;
  occurredAt: Date;
  operation: string;
  method: string;
  path: string;
  params: Record<string, string>;
  targetId: string | null;
  actor: { kind: 'person' | 'key'; id: string; label: string };
  credential: { kind: 'session' | 'key' | 'connector'; id: string };
  status: number;
  errorCode: string | null;
  requestId: string;
}

export interface AuditFilter {
  organizationId: string;
  operation?: string;
  actorId?: string;
}

/** Entries are numbered by the database; occurred_at is when the operation ran. */
const AUDIT_ORDER: KeysetOrder = { at: 'occurred_at', id: 'id', idType: 'bigint' };

const COLUMNS = `id, event_id, organization_id, occurred_at, operation, method, path, params, target_id, actor_kind, actor_id, actor_label,
  credential_kind, credential_id, status, error_code, request_id`;

function toEntry(row: Row): AuditEntry {
  return {
    eventId: str(row, 'event_id'),
    organizationId: str(row, 'organization_id'),
    occurredAt: date(row, 'occurred_at'),
    operation: str(row, 'operation'),
    method: str(row, 'method'),
    path: str(row, 'path'),
    params: row['params'] as Record<string, string>,
    targetId: strOrNull(row, 'target_id'),
    actor: { kind: str(row, 'actor_kind') as 'person' | 'key', id: str(row, 'actor_id'), label: str(row, 'actor_label') },
    credential: { kind: str(row, 'credential_kind') as 'session' | 'key' | 'connector', id: str(row, 'credential_id') },
    status: Number(row['status']),
    errorCode: strOrNull(row, 'error_code'),
    requestId: str(row, 'request_id'),
  };
}

/** The audit log's table (owned by this plugin). */
export class AuditStore {
  constructor(private readonly db: Queryable) {}

  /** Idempotent on the event id. */
  async record(tx: Queryable, entry: AuditEntry): Promise<void> {
    await tx.query(
      `INSERT INTO audit_log (event_id, organization_id, occurred_at, operation, method, path, params, target_id, actor_kind, actor_id,
         actor_label, credential_kind, credential_id, status, error_code, request_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11, $12, $13, $14, $15, $16)
       ON CONFLICT (event_id) DO NOTHING`,
      [
        entry.eventId,
        entry.organizationId,
        entry.occurredAt,
        entry.operation,
        entry.method,
        entry.path,
        JSON.stringify(entry.params),
        entry.targetId,
        entry.actor.kind,
        entry.actor.id,
        entry.actor.label,
        entry.credential.kind,
        entry.credential.id,
        entry.status,
        entry.errorCode,
        entry.requestId,
      ],
    );
  }

  /** Every entry of an organisation whose account is being deleted: they name its people. */
  async eraseOrganization(tx: Queryable, organizationId: string): Promise<number> {
    const { rowCount } = await tx.query('DELETE FROM audit_log WHERE organization_id = $1', [organizationId]);
    return rowCount;
  }

  /** Newest first, on the indexes of audit-migrations.ts. */
  async page(filter: AuditFilter, page: PageRequest): Promise<Page<AuditEntry>> {
    const where = new Conditions();
    where.add(`organization_id = ${where.param(filter.organizationId)}::uuid`);
    if (filter.operation !== undefined) where.add(`operation = ${where.param(filter.operation)}`);
    if (filter.actorId !== undefined) where.add(`actor_id = ${where.param(filter.actorId)}`);
    return selectPage(this.db, { columns: COLUMNS, from: 'audit_log', where, order: AUDIT_ORDER, page, toItem: toEntry });
  }
}

import type { Queryable } from '../../core/ports/database.ts';
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
  credential: { kind: 'session' | 'key'; id: string };
  status: number;
  errorCode: string | null;
  requestId: string;
}

/** Newest first: entries before this position. */
export interface AuditPosition {
  at: Date;
  id: string;
}

export interface AuditFilter {
  organizationId: string;
  operation?: string;
  actorId?: string;
  before?: AuditPosition;
}

const COLUMNS = `id, event_id, organization_id, occurred_at, operation, method, path, params, target_id, actor_kind, actor_id, actor_label,
  credential_kind, credential_id, status, error_code, request_id`;

function toEntry(row: Row): AuditEntry & { position: AuditPosition } {
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
    credential: { kind: str(row, 'credential_kind') as 'session' | 'key', id: str(row, 'credential_id') },
    status: Number(row['status']),
    errorCode: strOrNull(row, 'error_code'),
    requestId: str(row, 'request_id'),
    position: { at: date(row, 'occurred_at'), id: String(row['id']) },
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

  async list(filter: AuditFilter, limit: number): Promise<Array<AuditEntry & { position: AuditPosition }>> {
    const params: unknown[] = [filter.organizationId];
    const where = ['organization_id = $1'];
    if (filter.operation !== undefined) where.push(`operation = $${params.push(filter.operation)}`);
    if (filter.actorId !== undefined) where.push(`actor_id = $${params.push(filter.actorId)}`);
    if (filter.before !== undefined) {
      where.push(`(occurred_at, id) < ($${params.push(filter.before.at)}::timestamptz, $${params.push(filter.before.id)}::bigint)`);
    }
    const { rows } = await this.db.query(`SELECT ${COLUMNS} FROM audit_log WHERE ${where.join(' AND ')} ORDER BY occurred_at DESC, id DESC LIMIT $${params.push(limit)}`, params);
    return rows.map(toEntry);
  }
}

import type { Database, Queryable } from '../../core/ports/database.ts';
import type { EventActor, EventStore, StoredEvent } from '../../core/ports/events.ts';
import { date, str, strOrNull } from './rows.ts';
import { jsonForStorage } from './jsonb.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The domain-event outbox on the SQL port. */
export class SqlEventStore implements EventStore {
  constructor(private readonly db: Database) {}

  async insert(tx: Queryable, event: StoredEvent): Promise<void> {
    await tx.query(
      `INSERT INTO events (id, type, organization_id, subject, data, actor, occurred_at)
       VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7)`,
      [event.id, event.type, event.organizationId, event.subject, jsonForStorage(event.data), event.actor === null ? null : jsonForStorage(event.actor), event.occurredAt],
    );
  }

  async get(id: string): Promise<StoredEvent | null> {
    if (!UUID.test(id)) return null;
    const { rows } = await this.db.query('SELECT id, type, organization_id, subject, data, actor, occurred_at FROM events WHERE id = $1', [id]);
    const row = rows[0];
    if (!row) return null;
    return {
      id: str(row, 'id'),
      type: str(row, 'type'),
      organizationId: strOrNull(row, 'organization_id'),
      subject: strOrNull(row, 'subject'),
      data: row['data'],
      actor: (row['actor'] as EventActor | null) ?? null,
      occurredAt: date(row, 'occurred_at'),
    };
  }

  async eraseForOrganization(tx: Queryable, organizationId: string): Promise<number> {
    const { rowCount } = await tx.query('DELETE FROM events WHERE organization_id = $1', [organizationId]);
    return rowCount;
  }

  async prune(before: Date): Promise<number> {
    const { rowCount } = await this.db.query('DELETE FROM events WHERE occurred_at < $1', [before]);
    return rowCount;
  }
}

import type { Queryable } from '../../core/ports/database.ts';
import type { Page, PageRequest } from '../../core/vocabulary/pagination.ts';
import { Conditions } from '../../adapters/sql/conditions.ts';
import { type KeysetOrder, selectPage } from '../../adapters/sql/keyset.ts';
import { bool, date, dateOrNull, str, strOrNull, type Row } from '../../adapters/sql/rows.ts';
import { toEndpoint, type WebhookEndpoint } from './endpoint-store.ts';

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed' | 'cancelled';

/** Why an attempt failed: the receiver's answer, or the transport (the outbound client's kinds). */
export type AttemptErrorKind = 'http_status' | 'redirect' | 'timeout' | 'connect' | 'refused_address' | 'too_large' | 'protocol';

export interface WebhookDelivery {
  id: string;
  endpointId: string;
  organizationId: string;
  /** Null for a test delivery. */
  eventId: string | null;
  eventType: string;
  /** The webhook-id header. */
  messageId: string;
  /** The body exactly as signed and sent. */
  body: string;
  test: boolean;
  status: DeliveryStatus;
  attemptCount: number;
  nextAttemptAt: Date | null;
  createdAt: Date;
  finishedAt: Date | null;
}

export interface NewDelivery {
  id: string;
  endpointId: string;
  organizationId: string;
  eventId: string | null;
  eventType: string;
  messageId: string;
  body: string;
  test: boolean;
}

/** One attempt's outcome, as kept. */
export interface AttemptRecord {
  attemptedAt: Date;
  succeeded: boolean;
  statusCode: number | null;
  durationMs: number;
  responseBody: string | null;
  responseTruncated: boolean;
  errorKind: AttemptErrorKind | null;
  errorMessage: string | null;
  /** When it is tried again; null when this attempt ended the delivery. */
  nextAttemptAt: Date | null;
}

export interface StoredAttempt extends AttemptRecord {
  /** 1 for a delivery's first attempt; resends go on counting. */
  attempt: number;
}

export interface DeliveryFilter {
  endpointId: string;
  status?: DeliveryStatus | undefined;
  eventType?: string | undefined;
}

const COLUMNS = `id, endpoint_id, organization_id, event_id, event_type, message_id, body, test, status, attempt_count, next_attempt_at, created_at, finished_at`;
const ENDPOINT_COLUMNS = `e.id AS e_id, e.organization_id AS e_organization_id, e.project_id AS e_project_id, e.url AS e_url,
  e.description AS e_description, e.event_types AS e_event_types, e.enabled AS e_enabled, e.disabled_reason AS e_disabled_reason,
  e.disabled_at AS e_disabled_at, e.failing_since AS e_failing_since, e.previous_secret_expires_at AS e_previous_secret_expires_at,
  e.secret_rotated_at AS e_secret_rotated_at, e.created_at AS e_created_at, e.updated_at AS e_updated_at`;
const ORDER: KeysetOrder = { at: 'created_at', id: 'id', idType: 'uuid' };

function toDelivery(row: Row): WebhookDelivery {
  return {
    id: str(row, 'id'),
    endpointId: str(row, 'endpoint_id'),
    organizationId: str(row, 'organization_id'),
    eventId: strOrNull(row, 'event_id'),
    eventType: str(row, 'event_type'),
    messageId: str(row, 'message_id'),
    body: str(row, 'body'),
    test: bool(row, 'test'),
    status: str(row, 'status') as DeliveryStatus,
    attemptCount: Number(row['attempt_count']),
    nextAttemptAt: dateOrNull(row, 'next_attempt_at'),
    createdAt: date(row, 'created_at'),
    finishedAt: dateOrNull(row, 'finished_at'),
  };
}

function toAttempt(row: Row): StoredAttempt {
  return {
    attempt: Number(row['attempt']),
    attemptedAt: date(row, 'attempted_at'),
    succeeded: bool(row, 'succeeded'),
    statusCode: row['status_code'] === null ? null : Number(row['status_code']),
    durationMs: Number(row['duration_ms']),
    responseBody: strOrNull(row, 'response_body'),
    responseTruncated: bool(row, 'response_truncated'),
    errorKind: strOrNull(row, 'error_kind') as AttemptErrorKind | null,
    errorMessage: strOrNull(row, 'error_message'),
    nextAttemptAt: dateOrNull(row, 'next_attempt_at'),
  };
}

/** The webhook_deliveries and webhook_attempts tables (owned by this plugin). */
export class DeliveryStore {
  constructor(private readonly db: Queryable) {}

  /** False when the endpoint already has a delivery of this event (the fan-out ran again). */
  async create(tx: Queryable, delivery: NewDelivery, now: Date): Promise<boolean> {
    const { rowCount } = await tx.query(
      `INSERT INTO webhook_deliveries (id, endpoint_id, organization_id, event_id, event_type, message_id, body, test, status, next_attempt_at, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $9)
       ON CONFLICT (endpoint_id, event_id) DO NOTHING`,
      [delivery.id, delivery.endpointId, delivery.organizationId, delivery.eventId, delivery.eventType, delivery.messageId, delivery.body, delivery.test, now],
    );
    return rowCount > 0;
  }

  /** A delivery with its endpoint, as an attempt needs them; null when either is gone. */
  async withEndpoint(id: string): Promise<{ delivery: WebhookDelivery; endpoint: WebhookEndpoint } | null> {
    const { rows } = await this.db.query(
      `SELECT d.${COLUMNS.split(', ').join(', d.')}, ${ENDPOINT_COLUMNS}
       FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE d.id = $1`,
      [id],
    );
    const row = rows[0];
    return row ? { delivery: toDelivery(row), endpoint: toEndpoint(row, 'e_') } : null;
  }

  async get(endpointId: string, id: string, tx: Queryable = this.db): Promise<WebhookDelivery | null> {
    const { rows } = await tx.query(`SELECT ${COLUMNS} FROM webhook_deliveries WHERE endpoint_id = $1 AND id = $2`, [endpointId, id]);
    return rows[0] ? toDelivery(rows[0]) : null;
  }

  /**
   * Keeps one attempt: numbered after the delivery's earlier ones, and the delivery moved on with
   * it (pending until `nextAttemptAt`, or finished: succeeded, or failed when nothing follows).
   */
  async recordAttempt(tx: Queryable, deliveryId: string, attempt: AttemptRecord): Promise<StoredAttempt> {
    const status: DeliveryStatus = attempt.succeeded ? 'succeeded' : attempt.nextAttemptAt ? 'pending' : 'failed';
    const { rows } = await tx.query<{ attempt_count: number }>(
      `UPDATE webhook_deliveries SET attempt_count = attempt_count + 1, status = $2, next_attempt_at = $3,
         finished_at = CASE WHEN $2 = 'pending' THEN NULL ELSE $4::timestamptz END
       WHERE id = $1 RETURNING attempt_count`,
      [deliveryId, status, attempt.nextAttemptAt, attempt.attemptedAt],
    );
    const number = Number(rows[0]?.attempt_count ?? 0);
    await tx.query(
      `INSERT INTO webhook_attempts (delivery_id, attempt, attempted_at, succeeded, status_code, duration_ms, response_body, response_truncated,
         error_kind, error_message, next_attempt_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
      [
        deliveryId,
        number,
        attempt.attemptedAt,
        attempt.succeeded,
        attempt.statusCode,
        Math.round(attempt.durationMs),
        attempt.responseBody,
        attempt.responseTruncated,
        attempt.errorKind,
        attempt.errorMessage,
        attempt.nextAttemptAt,
      ],
    );
    return { ...attempt, attempt: number };
  }

  /** The endpoint was switched off before the delivery was sent: it ends without an attempt. */
  async cancel(tx: Queryable, id: string, now: Date): Promise<void> {
    await tx.query(`UPDATE webhook_deliveries SET status = 'cancelled', next_attempt_at = NULL, finished_at = $2 WHERE id = $1 AND status = 'pending'`, [id, now]);
  }

  /** A finished delivery is pending again (a resend); null when it is pending already or gone. */
  async reopen(tx: Queryable, endpointId: string, id: string, now: Date): Promise<WebhookDelivery | null> {
    const { rows } = await tx.query(
      `UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $3, finished_at = NULL
       WHERE endpoint_id = $1 AND id = $2 AND status <> 'pending' RETURNING ${COLUMNS}`,
      [endpointId, id, now],
    );
    return rows[0] ? toDelivery(rows[0]) : null;
  }

  /** Newest first, each with its latest attempts (newest first, at most `attemptsEach`). */
  async page(filter: DeliveryFilter, page: PageRequest, attemptsEach: number): Promise<Page<WebhookDelivery & { attempts: StoredAttempt[] }>> {
    const where = new Conditions();
    where.add(`endpoint_id = ${where.param(filter.endpointId)}::uuid`);
    if (filter.status !== undefined) where.add(`status = ${where.param(filter.status)}`);
    if (filter.eventType !== undefined) where.add(`event_type = ${where.param(filter.eventType)}`);
    const deliveries = await selectPage(this.db, { columns: COLUMNS, from: 'webhook_deliveries', where, order: ORDER, page, toItem: toDelivery });
    return { items: await this.withAttempts(deliveries.items, attemptsEach), next: deliveries.next };
  }

  /** One delivery with its latest attempts (newest first, at most `attemptsEach`). */
  async one(endpointId: string, id: string, attemptsEach: number): Promise<(WebhookDelivery & { attempts: StoredAttempt[] }) | null> {
    const delivery = await this.get(endpointId, id);
    return delivery ? ((await this.withAttempts([delivery], attemptsEach))[0] ?? null) : null;
  }

  private async withAttempts(deliveries: WebhookDelivery[], attemptsEach: number): Promise<Array<WebhookDelivery & { attempts: StoredAttempt[] }>> {
    const ids = deliveries.map((delivery) => delivery.id);
    const attempts = new Map<string, StoredAttempt[]>(ids.map((id) => [id, []]));
    if (ids.length > 0) {
      const { rows } = await this.db.query(
        `SELECT * FROM (
           SELECT delivery_id, attempt, attempted_at, succeeded, status_code, duration_ms, response_body, response_truncated, error_kind, error_message,
             next_attempt_at, row_number() OVER (PARTITION BY delivery_id ORDER BY attempt DESC) AS position
           FROM webhook_attempts WHERE delivery_id = ANY($1::uuid[])
         ) latest WHERE position <= $2 ORDER BY delivery_id, attempt DESC`,
        [ids, attemptsEach],
      );
      for (const row of rows) attempts.get(str(row, 'delivery_id'))?.push(toAttempt(row));
    }
    return deliveries.map((delivery) => ({ ...delivery, attempts: attempts.get(delivery.id) ?? [] }));
  }

  /** Deletes deliveries created before `before`, at most `limit` of them; answers how many. */
  /** Every delivery of an organisation whose account is being deleted (its attempts go with it): their bodies describe it. */
  async eraseOrganization(tx: Queryable, organizationId: string): Promise<number> {
    const { rowCount } = await tx.query('DELETE FROM webhook_deliveries WHERE organization_id = $1', [organizationId]);
    return rowCount;
  }

  async prune(before: Date, limit: number): Promise<number> {
    const { rowCount } = await this.db.query('DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries WHERE created_at < $1 ORDER BY created_at LIMIT $2)', [
      before,
      limit,
    ]);
    return rowCount;
  }
}

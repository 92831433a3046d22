import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../core/ports/database.ts';
import type { Page, PageRequest } from '../../core/vocabulary/pagination.ts';
import { Conditions } from '../../adapters/sql/conditions.ts';
import { type KeysetOrder, selectPage } from '../../adapters/sql/keyset.ts';
import { date, dateOrNull, str, strOrNull, type Row } from '../../adapters/sql/rows.ts';

export type SupportStatus = 'open' | 'answered' | 'solved';
export const SUPPORT_STATUSES: readonly SupportStatus[] = ['open', 'answered', 'solved'];

export interface SupportRequest {
  readonly id: string;
  readonly organizationId: string;
  readonly requester: { readonly id: string; readonly name: string; readonly email: string };
  readonly subject: string;
  readonly status: SupportStatus;
  readonly messageCount: number;
  readonly lastMessageAt: Date;
  readonly solvedAt: Date | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

/** Who wrote a message: a person of the organisation, or support (an operator, under the name they gave). */
export interface MessageAuthor {
  readonly kind: 'person' | 'support';
  readonly id: string | null;
  readonly name: string;
}

export interface SupportAttachment {
  readonly id: string;
  readonly organizationId: string;
  readonly requestId: string;
  readonly messageId: string;
  readonly blobKey: string;
  readonly filename: string;
  /** Sniffed from the file's bytes. */
  readonly contentType: string;
  readonly declaredContentType: string;
  readonly size: number;
  readonly sha256: string;
  readonly createdAt: Date;
}

export interface SupportMessage {
  readonly id: string;
  readonly requestId: string;
  readonly author: MessageAuthor;
  readonly body: string;
  readonly createdAt: Date;
  readonly attachments: readonly SupportAttachment[];
}

/** A file to record with a message: a stored blob and what the uploader called it. */
export interface NewAttachment {
  readonly blobKey: string;
  readonly filename: string;
  readonly contentType: string;
  readonly declaredContentType: string;
  readonly size: number;
  readonly sha256: string;
}

export interface NewMessage {
  readonly author: MessageAuthor;
  readonly body: string;
  readonly attachments: readonly NewAttachment[];
}

export interface RequestFilter {
  readonly organizationId: string;
  /** Only this person's requests (a member sees their own). */
  readonly requesterId?: string | undefined;
  readonly status?: SupportStatus | undefined;
}

const REQUEST_ORDER: KeysetOrder = { at: 'r.created_at', id: 'r.id', idType: 'uuid' };
const REQUEST_COLUMNS = `r.id, r.organization_id, r.requester_id, p.name AS requester_name, p.email AS requester_email, r.subject, r.status,
  r.message_count, r.last_message_at, r.solved_at, r.created_at, r.updated_at`;
const REQUEST_FROM = 'support_requests r JOIN people p ON p.id = r.requester_id';
const ATTACHMENT_COLUMNS = 'id, organization_id, request_id, message_id, blob_key, filename, content_type, declared_content_type, size, sha256, created_at';

function toRequest(row: Row): SupportRequest {
  return {
    id: str(row, 'id'),
    organizationId: str(row, 'organization_id'),
    requester: { id: str(row, 'requester_id'), name: str(row, 'requester_name'), email: str(row, 'requester_email') },
    subject: str(row, 'subject'),
    status: str(row, 'status') as SupportStatus,
    messageCount: Number(row['message_count']),
    lastMessageAt: date(row, 'last_message_at'),
    solvedAt: dateOrNull(row, 'solved_at'),
    createdAt: date(row, 'created_at'),
    updatedAt: date(row, 'updated_at'),
  };
}

function toAttachment(row: Row): SupportAttachment {
  return {
    id: str(row, 'id'),
    organizationId: str(row, 'organization_id'),
    requestId: str(row, 'request_id'),
    messageId: str(row, 'message_id'),
    blobKey: str(row, 'blob_key'),
    filename: str(row, 'filename'),
    contentType: str(row, 'content_type'),
    declaredContentType: str(row, 'declared_content_type'),
    size: Number(row['size']),
    sha256: str(row, 'sha256'),
    createdAt: date(row, 'created_at'),
  };
}

/** The support tables (owned by this plugin). Writes take the caller's transaction. */
export class SupportStore {
  constructor(private readonly db: Queryable) {}

  /**
   * Every request of an organisation whose account is being deleted, with its messages and the
   * attachments' rows (their blobs go after the commit: support-erasure.ts); returns how many requests.
   */
  async eraseOrganization(tx: Queryable, organizationId: string): Promise<number> {
    await tx.query('DELETE FROM support_attachments WHERE organization_id = $1', [organizationId]);
    const { rowCount } = await tx.query('DELETE FROM support_requests WHERE organization_id = $1', [organizationId]);
    return rowCount;
  }

  /** Newest first (core/vocabulary/pagination.ts), on the indexes of support-migrations.ts. */
  page(filter: RequestFilter, page: PageRequest): Promise<Page<SupportRequest>> {
    const where = new Conditions();
    where.add(`r.organization_id = ${where.param(filter.organizationId)}::uuid`);
    if (filter.requesterId !== undefined) where.add(`r.requester_id = ${where.param(filter.requesterId)}::uuid`);
    if (filter.status !== undefined) where.add(`r.status = ${where.param(filter.status)}`);
    return selectPage(this.db, { columns: REQUEST_COLUMNS, from: REQUEST_FROM, where, order: REQUEST_ORDER, page, toItem: toRequest });
  }

  /** A request of the organisation; with `forUpdate`, locked for the rest of `tx` (a message and its status change together). */
  async get(organizationId: string, id: string, options: { tx?: Queryable; forUpdate?: boolean } = {}): Promise<SupportRequest | null> {
    const lock = options.forUpdate ? ' FOR UPDATE OF r' : '';
    const { rows } = await (options.tx ?? this.db).query(`SELECT ${REQUEST_COLUMNS} FROM ${REQUEST_FROM} WHERE r.organization_id = $1 AND r.id = $2${lock}`, [organizationId, id]);
    return rows[0] ? toRequest(rows[0]) : null;
  }

  /** Any organisation's request: for the operator, who answers them all. */
  async getForOperator(id: string, tx?: Queryable): Promise<SupportRequest | null> {
    const lock = tx ? ' FOR UPDATE OF r' : '';
    const { rows } = await (tx ?? this.db).query(`SELECT ${REQUEST_COLUMNS} FROM ${REQUEST_FROM} WHERE r.id = $1${lock}`, [id]);
    return rows[0] ? toRequest(rows[0]) : null;
  }

  /** The operator's queue across organisations: oldest last message first (who has waited longest). */
  async queue(filter: { status?: SupportStatus | undefined; limit: number }): Promise<SupportRequest[]> {
    const where = new Conditions();
    if (filter.status !== undefined) where.add(`r.status = ${where.param(filter.status)}`);
    const { rows } = await this.db.query(
      `SELECT ${REQUEST_COLUMNS} FROM ${REQUEST_FROM} WHERE ${where.sql} ORDER BY r.last_message_at, r.id LIMIT ${where.param(filter.limit)}::int`,
      where.params,
    );
    return rows.map(toRequest);
  }

  /** Every message of a request with its attachments, in the order they were written. */
  async messages(requestId: string, tx?: Queryable): Promise<SupportMessage[]> {
    const db = tx ?? this.db;
    const { rows } = await db.query('SELECT id, request_id, author_kind, author_id, author_name, body, created_at FROM support_messages WHERE request_id = $1 ORDER BY position', [
      requestId,
    ]);
    const files = await db.query(`SELECT ${ATTACHMENT_COLUMNS} FROM support_attachments WHERE request_id = $1 ORDER BY position`, [requestId]);
    const byMessage = new Map<string, SupportAttachment[]>();
    for (const attachment of files.rows.map(toAttachment)) byMessage.set(attachment.messageId, [...(byMessage.get(attachment.messageId) ?? []), attachment]);
    return rows.map((row) => ({
      id: str(row, 'id'),
      requestId: str(row, 'request_id'),
      author: { kind: str(row, 'author_kind') as MessageAuthor['kind'], id: strOrNull(row, 'author_id'), name: str(row, 'author_name') },
      body: str(row, 'body'),
      createdAt: date(row, 'created_at'),
      attachments: byMessage.get(str(row, 'id')) ?? [],
    }));
  }

  async message(requestId: string, messageId: string): Promise<SupportMessage | null> {
    return (await this.messages(requestId)).find((message) => message.id === messageId) ?? null;
  }

  async attachment(organizationId: string, id: string): Promise<SupportAttachment | null> {
    const { rows } = await this.db.query(`SELECT ${ATTACHMENT_COLUMNS} FROM support_attachments WHERE organization_id = $1 AND id = $2`, [organizationId, id]);
    return rows[0] ? toAttachment(rows[0]) : null;
  }

  /** A new request with its first message; returns the request's id. */
  async create(tx: Queryable, input: { organizationId: string; requesterId: string; subject: string; message: NewMessage; now: Date }): Promise<string> {
    const id = randomUUID();
    await tx.query(
      `INSERT INTO support_requests (id, organization_id, requester_id, subject, status, last_message_at, created_at, updated_at)
       VALUES ($1, $2, $3, $4, 'open', $5, $5, $5)`,
      [id, input.organizationId, input.requesterId, input.subject, input.now],
    );
    await this.addMessage(tx, { organizationId: input.organizationId, requestId: id, message: input.message, status: 'open', now: input.now });
    return id;
  }

  /**
   * Adds a message and moves the request to `status` (a person's message: open, support's: answered),
   * reopening a solved request. Returns the message's id.
   */
  async addMessage(tx: Queryable, input: { organizationId: string; requestId: string; message: NewMessage; status: SupportStatus; now: Date }): Promise<string> {
    const messageId = randomUUID();
    const { message, now } = input;
    await tx.query('INSERT INTO support_messages (id, request_id, author_kind, author_id, author_name, body, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
      messageId,
      input.requestId,
      message.author.kind,
      message.author.id,
      message.author.name,
      message.body,
      now,
    ]);
    for (const [position, file] of message.attachments.entries()) {
      await tx.query(
        `INSERT INTO support_attachments (id, organization_id, request_id, message_id, blob_key, filename, content_type, declared_content_type, size, sha256, created_at, position)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
        [randomUUID(), input.organizationId, input.requestId, messageId, file.blobKey, file.filename, file.contentType, file.declaredContentType, file.size, file.sha256, now, position],
      );
    }
    await tx.query(`UPDATE support_requests SET status = $2, message_count = message_count + 1, last_message_at = $3, updated_at = $3, solved_at = NULL WHERE id = $1`, [
      input.requestId,
      input.status,
      now,
    ]);
    return messageId;
  }

  async markSolved(tx: Queryable, requestId: string, now: Date): Promise<void> {
    await tx.query(`UPDATE support_requests SET status = 'solved', solved_at = $2, updated_at = $2 WHERE id = $1`, [requestId, now]);
  }
}

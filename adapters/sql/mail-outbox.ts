import { randomUUID } from 'node:crypto';
import { checkMailMessage, fillPlaceholders } from '../../core/services/mail-messages.ts';
import type { Queryable } from '../../core/ports/database.ts';
import type { MailMessage, MailOutbox, Mailer, OutboxMail } from '../../core/ports/mail.ts';
import type { Row } from './rows.ts';

const INSERT_MAIL = `INSERT INTO mail_outbox (id, sender, recipient, subject, text_body, html_body, secrets)
VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb)`;

/**
 * Empties the secrets of the given messages to their names and returns what they held, in one
 * statement. The row lock in the subquery makes a concurrent reader wait, then find them taken.
 */
const TAKE_SECRETS = `UPDATE mail_outbox AS m
   SET secrets = (SELECT jsonb_object_agg(name, 'null'::jsonb) FROM jsonb_object_keys(before.secrets) AS name),
       secrets_read_at = now()
  FROM (SELECT id, secrets FROM mail_outbox WHERE id = ANY($1::uuid[]) AND secrets_read_at IS NULL FOR UPDATE) AS before
 WHERE m.id = before.id
RETURNING m.id, before.secrets`;

/** `revealed`: the secrets this read took, if it was the first to include the message. */
function mailOf(row: Row, revealed: Record<string, string> | undefined): OutboxMail {
  const names = row.secrets === null ? [] : Object.keys(row.secrets as Record<string, unknown>);
  const readAt = row.secrets_read_at as Date | null;
  const gone = `[shown once already${readAt === null ? '' : `, ${readAt.toISOString()}`}]`;
  const filled = (body: string) => fillPlaceholders(body, names, (name) => revealed?.[name] ?? gone);
  return {
    id: row.id as string,
    from: row.sender as string,
    to: row.recipient as string,
    subject: row.subject as string,
    text: filled(row.text_body as string),
    ...(row.html_body === null ? {} : { html: filled(row.html_body as string) }),
    createdAt: row.created_at as Date,
  };
}

/**
 * The development mailer: every message is a row of `mail_outbox` instead of a delivery, so
 * invitations work on `npm start` with no mail server. A message's secrets are a column of their
 * own, emptied (to their names) by the first read: the operator reading the outbox is its delivery.
 */
export class SqlMailOutbox implements Mailer, MailOutbox {
  constructor(
    private readonly db: Queryable,
    private readonly from: string,
  ) {}

  async send(message: MailMessage): Promise<{ id: string }> {
    checkMailMessage(message);
    const id = randomUUID();
    const secrets = Object.keys(message.secrets ?? {}).length > 0 ? JSON.stringify(message.secrets) : null;
    await this.db.query(INSERT_MAIL, [id, this.from, message.to, message.subject, message.text, message.html ?? null, secrets]);
    return { id };
  }

  async read(options: { to?: string; limit?: number } = {}): Promise<OutboxMail[]> {
    const limit = options.limit ?? 50;
    const { rows } =
      options.to === undefined
        ? await this.db.query('SELECT * FROM mail_outbox ORDER BY seq DESC LIMIT $1', [limit])
        : await this.db.query('SELECT * FROM mail_outbox WHERE lower(recipient) = lower($1) ORDER BY seq DESC LIMIT $2', [options.to, limit]);
    const waiting = rows.filter((row) => row.secrets !== null && row.secrets_read_at === null).map((row) => row.id);
    const taken = new Map<string, Record<string, string>>();
    if (waiting.length > 0) {
      const took = await this.db.query<{ id: string; secrets: Record<string, string> }>(TAKE_SECRETS, [waiting]);
      for (const row of took.rows) taken.set(row.id, row.secrets);
    }
    return rows.map((row) => mailOf(row, taken.get(row.id as string)));
  }
}

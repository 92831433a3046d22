import { randomUUID } from 'node:crypto';
import { checkMailMessage } from '../../core/mail.ts';
import type { Queryable } from '../../core/ports/database.ts';
import type { MailMessage, MailOutbox, Mailer, OutboxMail } from '../../core/ports/mail.ts';
import type { Row } from './rows.ts';

function mailOf(row: Row): OutboxMail {
  return {
    id: row.id as string,
    from: row.sender as string,
    to: row.recipient as string,
    subject: row.subject as string,
    text: row.text_body as string,
    ...(row.html_body === null ? {} : { html: row.html_body as string }),
    createdAt: row.created_at as Date,
  };
}

/**
 * The development mailer: every message is a row of `mail_outbox` instead of a delivery, so
 * sign-in codes and invitations work on `npm start` with no mail server.
 */
export class SqlMailOutbox implements Mailer, MailOutbox {
  constructor(
    private readonly db: Queryable,
    private readonly from: string,
  ) {}

  async send(message: MailMessage): Promise<{ id: string }> {
    checkMailMessage(message);
    const id = randomUUID();
    await this.db.query('INSERT INTO mail_outbox (id, sender, recipient, subject, text_body, html_body) VALUES ($1, $2, $3, $4, $5, $6)', [
      id,
      this.from,
      message.to,
      message.subject,
      message.text,
      message.html ?? null,
    ]);
    return { id };
  }

  async list(options: { to?: string; limit?: number } = {}): Promise<OutboxMail[]> {
    const limit = options.limit ?? 50;
    const { rows } =
      options.to === undefined
        ? await this.db.query('SELECT * FROM mail_outbox ORDER BY seq DESC LIMIT $1', [limit])
        : await this.db.query('SELECT * FROM mail_outbox WHERE lower(recipient) = lower($1) ORDER BY seq DESC LIMIT $2', [options.to, limit]);
    return rows.map(mailOf);
  }
}

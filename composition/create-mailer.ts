import type { AppConfig } from '../config/schema.ts';
import type { Queryable } from '../core/ports/database.ts';
import type { Mailer } from '../core/ports/mail.ts';
import { SmtpMailer } from '../adapters/smtp/smtp-mailer.ts';
import { SqlMailOutbox } from '../adapters/sql/mail-outbox.ts';

export function createMailer(config: AppConfig['mail'], database: Queryable): Mailer & { close?(): void } {
  return config.driver === 'smtp' ? new SmtpMailer(config) : new SqlMailOutbox(database, config.from);
}

/**
 * Outgoing mail (sign-in codes, invitations, notifications). One message to one recipient; a
 * sender either hands it to an SMTP server or, by default, keeps it in a local outbox that an
 * operator reads with `npm run cli -- mail list`. core/mail.ts checks messages and types failures.
 */
export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  html?: string;
}

export interface Mailer {
  /** Resolves once the message is accepted (by the SMTP server, or stored in the outbox). */
  send(message: MailMessage): Promise<{ id: string }>;
}

export interface OutboxMail extends MailMessage {
  id: string;
  from: string;
  createdAt: Date;
}

export interface MailOutbox {
  /** Newest first; `to` matches the recipient whatever its case. */
  list(options?: { to?: string; limit?: number }): Promise<OutboxMail[]>;
}

/**
 * Outgoing mail (sign-in codes, invitations, notifications). One message to one recipient; a
 * sender either hands it to an SMTP server or, by default, keeps it in a local outbox that an
 * operator reads with `npm run cli -- mail list`. core/services/mail-messages.ts checks messages and types failures.
 */
export interface MailMessage {
  to: string;
  subject: string;
  /** The body; a secret appears in it (and in `html`) only as its placeholder, `{{name}}`. */
  text: string;
  html?: string;
  /**
   * What the message must carry but nothing should keep (a set-password token, a sign-in code),
   * by the name its placeholder uses. A mailer that delivers puts each in place as it sends; the
   * outbox stores them apart from the body and only until the message is first read.
   */
  secrets?: Record<string, string>;
}

export interface Mailer {
  /** Resolves once the message is accepted (by the SMTP server, or stored in the outbox). */
  send(message: MailMessage): Promise<{ id: string }>;
}

/** A message as the outbox shows it: its secrets in place the first time, a note where they were after. */
export interface OutboxMail {
  id: string;
  from: string;
  to: string;
  subject: string;
  text: string;
  html?: string;
  createdAt: Date;
}

export interface MailOutbox {
  /**
   * Newest first; `to` matches the recipient whatever its case. Reading is delivery: each message's
   * secrets are shown in place by the first read that includes it and forgotten in the same
   * statement, so two readers at once never both see them; later reads show where they were.
   */
  read(options?: { to?: string; limit?: number }): Promise<OutboxMail[]>;
}

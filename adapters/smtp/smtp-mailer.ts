import type { Transporter } from 'nodemailer';
import type { AppConfig } from '../../config/schema.ts';
import { checkMailMessage, fillPlaceholders, MailDeliveryError } from '../../core/services/mail-messages.ts';
import type { MailMessage, Mailer } from '../../core/ports/mail.ts';

type SmtpConfig = Extract<AppConfig['mail'], { driver: 'smtp' }>;

/** Connection-level failures nodemailer reports by code; a later attempt may well work. */
const TRANSIENT_CODES = new Set(['ECONNECTION', 'ETIMEDOUT', 'ESOCKET', 'EDNS', 'ECONNRESET', 'ECONNREFUSED']);

interface NodemailerError {
  code?: string;
  responseCode?: number;
  command?: string;
}

/** Mail through the operator's SMTP server (nodemailer: STARTTLS when offered, or TLS from the first byte with `secure`). */
export class SmtpMailer implements Mailer {
  /**
   * nodemailer (some 80 modules) is imported with the first message, not at start: the mailer is
   * made by every process, and most of them send mail rarely, if ever.
   */
  private transport: Promise<Transporter> | undefined;

  constructor(private readonly config: SmtpConfig) {}

  private transporter(): Promise<Transporter> {
    const config = this.config;
    const timeouts = { connectionTimeout: config.timeoutMs, greetingTimeout: config.timeoutMs, socketTimeout: config.timeoutMs };
    this.transport ??= import('nodemailer').then(({ default: nodemailer }) =>
      nodemailer.createTransport({
        ...(config.url !== undefined ? { url: config.url } : { host: config.host, port: config.port, secure: config.secure, auth: config.auth }),
        requireTLS: config.requireTls,
        ...timeouts,
      }),
    );
    return this.transport;
  }

  async send(message: MailMessage): Promise<{ id: string }> {
    checkMailMessage(message);
    const transport = await this.transporter();
    // Delivery is the one place the secrets are put in place; nothing here keeps the message.
    const secrets = message.secrets ?? {};
    const filled = (body: string) => fillPlaceholders(body, Object.keys(secrets), (name) => secrets[name]!);
    try {
      const info = await transport.sendMail({
        from: this.config.from,
        to: message.to,
        subject: message.subject,
        text: filled(message.text),
        ...(message.html === undefined ? {} : { html: filled(message.html) }),
      });
      return { id: String(info.messageId) };
    } catch (error) {
      const failure = error as NodemailerError;
      const status = failure.responseCode;
      const retryable = status !== undefined ? status >= 400 && status < 500 : TRANSIENT_CODES.has(failure.code ?? '');
      // nodemailer's messages carry the server's reply, never the password; the command adds where it failed.
      const where = failure.command ? ` (${failure.command.split(' ')[0]})` : '';
      throw new MailDeliveryError(`SMTP delivery failed${where}: ${(error as Error).message}`, retryable, { cause: error });
    }
  }

  close(): void {
    // A transport that never loaded has nothing to close.
    void this.transport?.then(
      (transport) => transport.close(),
      () => undefined,
    );
  }
}

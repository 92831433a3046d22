import type { MailMessage } from './ports/mail.ts';

/**
 * Why a message was not sent. `retryable` says whether sending the same message later can work
 * (the server was unreachable or answered 4xx) or not (a bad address, a 5xx refusal, bad credentials).
 */
export class MailDeliveryError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'MailDeliveryError';
  }
}

/** One plain address: no display name, list or line break that could smuggle in another header or recipient. */
const ADDRESS = /^[^\s@<>,;:"()[\]\\]+@[A-Za-z0-9.-]+$/;
const MAX_SUBJECT = 998;

export function checkMailMessage(message: MailMessage): void {
  if (typeof message.to !== 'string' || !ADDRESS.test(message.to) || message.to.length > 320) {
    throw new MailDeliveryError(`not a single plain e-mail address: ${JSON.stringify(String(message.to).slice(0, 80))}`, false);
  }
  if (typeof message.subject !== 'string' || /[\r\n]/.test(message.subject) || message.subject.length > MAX_SUBJECT) {
    throw new MailDeliveryError('a subject is one line of at most 998 characters', false);
  }
  if (typeof message.text !== 'string') throw new MailDeliveryError('a message needs a text body', false);
}

import type { MailMessage } from '../ports/mail.ts';

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

/** A secret's name, as its placeholder `{{name}}` spells it. */
const SECRET_NAME = /^[A-Za-z][A-Za-z0-9_]{0,39}$/;

export function secretPlaceholder(name: string): string {
  return `{{${name}}}`;
}

/** `text` with the placeholder of each of `names` replaced by what `shown` gives for that name. */
export function fillPlaceholders(text: string, names: readonly string[], shown: (name: string) => string): string {
  return names.reduce((body, name) => body.replaceAll(secretPlaceholder(name), shown(name)), text);
}

export function checkMailMessage(message: MailMessage): void {
  if (typeof message.to !== 'string' || !ADDRESS.test(message.to) || message.to.length > 320) {
    throw new MailDeliveryError(`not a single plain e-mail address: ${JSON.stringify(String(message.to).slice(0, 80))}`, false);
  }
  if (typeof message.subject !== 'string' || /[\r\n]/.test(message.subject) || message.subject.length > MAX_SUBJECT) {
    throw new MailDeliveryError('a subject is one line of at most 998 characters', false);
  }
  if (typeof message.text !== 'string') throw new MailDeliveryError('a message needs a text body', false);
  checkSecrets(message);
}

/**
 * A secret must be named by a placeholder in the text, and must not also sit in the subject or
 * body in clear: the outbox would keep that copy (the sender forgot the placeholder).
 */
function checkSecrets(message: MailMessage): void {
  for (const [name, value] of Object.entries(message.secrets ?? {})) {
    const refuse = (why: string) => new MailDeliveryError(`secret ${JSON.stringify(name.slice(0, 40))}: ${why}`, false);
    if (!SECRET_NAME.test(name)) throw refuse('a name is a letter, then letters, digits or _');
    if (typeof value !== 'string' || value === '') throw refuse('empty');
    if (!message.text.includes(secretPlaceholder(name))) throw refuse(`the text never names it as ${secretPlaceholder(name)}`);
    const inClear = [message.subject, message.text, message.html ?? ''].some((part) => part.includes(value));
    if (inClear) throw refuse('it is also in the message in clear; use only its placeholder');
  }
}

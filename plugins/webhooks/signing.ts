import { createHmac, randomBytes } from 'node:crypto';

/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): a secret is `whsec_` and the
 * base64 of random bytes; a signature is `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body`,
 * keyed by the secret's decoded bytes. Several signatures go space-separated in one header, which
 * is how a rotation's overlap signs with the new secret and the previous one.
 */
export const SECRET_PREFIX = 'whsec_';

/** 32 random bytes: the full strength of an HMAC-SHA256 key. */
const SECRET_BYTES = 32;

export function generateSigningSecret(): string {
  return SECRET_PREFIX + randomBytes(SECRET_BYTES).toString('base64');
}

export function signatureOf(secret: string, messageId: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${messageId}.${timestampSeconds}.${body}`).digest('base64')}`;
}

/** The three headers of one attempt: the message id, the attempt's time, and one signature per secret. */
export function signedHeaders(secrets: readonly string[], messageId: string, at: Date, body: string): Record<string, string> {
  const timestamp = Math.floor(at.getTime() / 1000);
  return {
    'webhook-id': messageId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets.map((secret) => signatureOf(secret, messageId, timestamp, body)).join(' '),
  };
}

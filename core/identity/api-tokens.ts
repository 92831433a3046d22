import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

export const KEY_PREFIX = 'svc_live_';
export const SESSION_PREFIX = 'svc_sess_';
/** OAuth access and refresh tokens issued to connectors (plugins/oauth). */
export const CONNECTOR_ACCESS_PREFIX = 'svc_oat_';
export const CONNECTOR_REFRESH_PREFIX = 'svc_ort_';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** 43 base62 characters: about 256 bits of entropy, so a plain SHA-256 is a sufficient hash. */
export function generateToken(prefix: string, length = 43): string {
  let out = '';
  // Rejection sampling keeps every character uniformly likely (248 = 4 * 62).
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += ALPHABET[byte % 62];
    }
  }
  return prefix + out;
}

/**
 * Tokens are stored only as this hash. The secrets are random and long, so a slow password hash
 * would add latency to every call and no safety.
 */
export function hashToken(token: string): string {
  return hash('sha256', token, 'hex');
}

/** What lists show to tell keys apart: the prefix and the last four characters. */
export function tokenHint(token: string): string {
  return `${KEY_PREFIX}…${token.slice(-4)}`;
}

/**
 * A check of presented secrets against one expected secret (an operator token in config) in time
 * that tells nothing about either: both sides are SHA-256 digests, so timingSafeEqual compares
 * equal lengths, and neither the secret's length nor where a guess first differs shows.
 */
export function secretMatcher(expected: string): (given: string | undefined) => boolean {
  const want = hash('sha256', expected, 'buffer');
  return (given) => given !== undefined && timingSafeEqual(hash('sha256', given, 'buffer'), want);
}

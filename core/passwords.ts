import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { ApiError } from './errors.ts';

/**
 * People's passwords, hashed with scrypt (memory-hard, in node:crypto: no dependency). Each hash
 * carries its own salt and cost parameters — `scrypt$N=32768,r=8,p=1$<salt>$<hash>` (base64url) —
 * so raising the cost later leaves existing hashes verifiable. N=2^15, r=8 takes 128·N·r = 32 MiB
 * per hash, exactly Node's default maxmem, so maxmem is raised to leave room for its bookkeeping.
 */
const COST = { N: 2 ** 15, r: 8, p: 1 } as const;
const KEY_LENGTH = 32;
const SALT_BYTES = 16;
/** Refuses stored parameters that would cost more than twice today's memory (a tampered row is no DoS). */
const MAX_MEMORY = 128 * COST.N * COST.r * 2 + 1024 * 1024;

export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 256;

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const derived = await derive(password, salt, COST);
  return `scrypt$N=${COST.N},r=${COST.r},p=${COST.p}$${salt.toString('base64url')}$${derived.toString('base64url')}`;
}

/** Constant-time comparison; false for anything that is not one of our hashes. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const match = /^scrypt\$N=(\d+),r=(\d+),p=(\d+)\$([A-Za-z0-9_-]+)\$([A-Za-z0-9_-]+)$/.exec(stored);
  if (!match) return false;
  const cost = { N: Number(match[1]), r: Number(match[2]), p: Number(match[3]) };
  if (128 * cost.N * cost.r > MAX_MEMORY || cost.p < 1 || cost.p > 16) return false;
  const expected = Buffer.from(match[5]!, 'base64url');
  if (expected.length !== KEY_LENGTH) return false;
  const derived = await derive(password, Buffer.from(match[4]!, 'base64url'), cost);
  return timingSafeEqual(derived, expected);
}

let dummy: Promise<string> | null = null;
/**
 * A hash of nothing anyone knows, verified against when an email has no account (or no password
 * yet), so the answer takes as long as for a real one and timing does not tell which emails exist.
 */
export function dummyPasswordHash(): Promise<string> {
  dummy ??= hashPassword(randomBytes(32).toString('base64url'));
  return dummy;
}

/** Length 12 to 256 (characters as a person counts them), and not the email address itself. */
export function checkPasswordRules(password: string, email: string): void {
  const length = [...password].length;
  if (length < PASSWORD_MIN_LENGTH) {
    throw new ApiError('password_too_short', `A password has at least ${PASSWORD_MIN_LENGTH} characters`, { param: 'password' });
  }
  if (length > PASSWORD_MAX_LENGTH) {
    throw new ApiError('password_too_long', `A password has at most ${PASSWORD_MAX_LENGTH} characters`, { param: 'password' });
  }
  if (password.trim().toLowerCase() === email.trim().toLowerCase()) {
    throw new ApiError('password_is_email', undefined, { param: 'password' });
  }
}

function derive(password: string, salt: Buffer, cost: { N: number; r: number; p: number }): Promise<Buffer> {
  const options: ScryptOptions = { ...cost, maxmem: MAX_MEMORY };
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, KEY_LENGTH, options, (error, key) => (error ? reject(error) : resolve(key)));
  });
}

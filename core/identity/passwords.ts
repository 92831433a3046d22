import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { BoundedConcurrency } from '../kernel/bounded-concurrency.ts';
import { ApiError } from '../kernel/errors.ts';

export interface ScryptCost {
  N: number;
  r: number;
  p: number;
}

/**
 * OWASP's scrypt setting for 32 MiB: N=2^15, r=8, p=3. Memory is 128·N·r = 32 MiB whatever p is
 * (Node runs the p lanes one after another over the same block), so p=3 triples the work of a
 * guess, not the memory of a hash. Hashes made with N=2^15, r=8, p=1 before still verify and are
 * upgraded at the owner's next sign-in.
 */
export const PASSWORD_COST: ScryptCost = { N: 2 ** 15, r: 8, p: 3 };
const KEY_LENGTH = 32;
const SALT_BYTES = 16;
/** Refuses stored parameters that would cost more than twice today's memory (a tampered row is no DoS). */
const MAX_MEMORY = 128 * PASSWORD_COST.N * PASSWORD_COST.r * 2 + 1024 * 1024;
const STORED_FORMAT = /^scrypt\$N=(\d+),r=(\d+),p=(\d+)\$([A-Za-z0-9_-]+)\$([A-Za-z0-9_-]+)$/;

export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 256;

/** The key derivation itself; tests hand in one they can watch. */
export type DeriveKey = (password: string, salt: Buffer, cost: ScryptCost) => Promise<Buffer>;

export interface PasswordHasherOptions {
  /** Hashes computed at once in this process (each holds 32 MiB on the libuv thread pool). */
  concurrency: number;
  /** Hashes that may wait for a slot; one more is refused with 503 `password_hashing_busy`. */
  maxWaiting: number;
  /** The parameters new hashes get (PASSWORD_COST unless a test asks for others). */
  cost?: ScryptCost;
  derive?: DeriveKey;
}

/**
 * People's passwords, hashed with scrypt (memory-hard, in node:crypto: no dependency). Each hash
 * carries its own salt and cost parameters — `scrypt$N=32768,r=8,p=3$<salt>$<hash>` (base64url) —
 * so a hash is always verified with the parameters it was made with, and `isOutdated` tells which
 * to redo. Every derivation, verification and new hash alike, takes a slot of one bound, so a burst
 * of sign-ins holds at most `concurrency` × 32 MiB and the rest wait (or are refused past the line).
 */
export class PasswordHasher {
  private readonly slots: BoundedConcurrency;
  private readonly cost: ScryptCost;
  private readonly derive: DeriveKey;
  private unmatchable: string | null = null;

  constructor(options: PasswordHasherOptions) {
    this.cost = options.cost ?? PASSWORD_COST;
    this.derive = options.derive ?? scryptKey;
    const busy = () => new ApiError('password_hashing_busy', undefined, { headers: { 'retry-after': '1' } });
    this.slots = new BoundedConcurrency(options.concurrency, options.maxWaiting, busy);
  }

  async hash(password: string): Promise<string> {
    const salt = randomBytes(SALT_BYTES);
    const derived = await this.slots.run(() => this.derive(password, salt, this.cost));
    return format(this.cost, salt, derived);
  }

  /** Constant-time comparison, with the stored hash's own parameters; false for anything that is not one of our hashes. */
  async verify(password: string, stored: string): Promise<boolean> {
    const parsed = parseStored(stored);
    if (!parsed) return false;
    const derived = await this.slots.run(() => this.derive(password, parsed.salt, parsed.cost));
    return derived.length === parsed.expected.length && timingSafeEqual(derived, parsed.expected);
  }

  /** Whether a stored hash was made with other parameters than new hashes get (redo it at the next sign-in). */
  isOutdated(stored: string): boolean {
    const cost = parseStored(stored)?.cost;
    return !cost || cost.N !== this.cost.N || cost.r !== this.cost.r || cost.p !== this.cost.p;
  }

  /**
   * A stored hash no password matches (random salt and random digest, today's parameters), verified
   * against when an email has no account or no password yet: the same work as for a real one, so
   * timing does not tell which emails exist. Made without hashing, so it costs nothing and cannot fail.
   */
  unmatchableHash(): string {
    this.unmatchable ??= format(this.cost, randomBytes(SALT_BYTES), randomBytes(KEY_LENGTH));
    return this.unmatchable;
  }
}

function format({ N, r, p }: ScryptCost, salt: Buffer, derived: Buffer): string {
  return `scrypt$N=${N},r=${r},p=${p}$${salt.toString('base64url')}$${derived.toString('base64url')}`;
}

function parseStored(stored: string): { cost: ScryptCost; salt: Buffer; expected: Buffer } | null {
  const match = STORED_FORMAT.exec(stored);
  if (!match) return null;
  const cost = { N: Number(match[1]), r: Number(match[2]), p: Number(match[3]) };
  if (128 * cost.N * cost.r > MAX_MEMORY || cost.p < 1 || cost.p > 16) return null;
  const expected = Buffer.from(match[5]!, 'base64url');
  if (expected.length !== KEY_LENGTH) return null;
  return { cost, salt: Buffer.from(match[4]!, 'base64url'), expected };
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

function scryptKey(password: string, salt: Buffer, cost: ScryptCost): Promise<Buffer> {
  const options: ScryptOptions = { ...cost, maxmem: MAX_MEMORY };
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, KEY_LENGTH, options, (error, key) => (error ? reject(error) : resolve(key)));
  });
}

import { createHmac } from 'node:crypto';
import { addressBucket } from '../net/address-bucket.ts';
import { throttleAttempts } from '../services/attempt-throttle.ts';
import type { Authenticator } from './authenticator.ts';
import { ApiError } from '../kernel/errors.ts';
import { issueSession, PASSWORD_TOKEN_PREFIX } from './identity-admin.ts';
import { checkPasswordRules, PASSWORD_MAX_LENGTH, type PasswordHasher } from './passwords.ts';
import type { KeyValueCache, RateEntry, RateLimiter } from '../ports/coordination.ts';
import type { Database } from '../ports/database.ts';
import type { IdentityStores, IdentityStoresFactory, Person } from '../ports/identity.ts';
import { generateToken, hashToken, SESSION_PREFIX } from './api-tokens.ts';

export interface SignInSettings {
  sessionTtlDays: number;
  /** Per (client address, email) pair and per address, in each `windowMs`. */
  attemptsPerAddressAndEmail: number;
  attemptsPerIp: number;
  windowMs: number;
  /** Per email from addresses the person has not signed in from, in each `emailWindowMs`. */
  attemptsPerEmail: number;
  emailWindowMs: number;
  /** set-password, per client address and per token prefix, in each `windowMs`. */
  setPasswordAttemptsPerIp: number;
  setPasswordAttemptsPerToken: number;
}

export interface PeopleSignInDeps {
  db: Database;
  storesFor: IdentityStoresFactory;
  rateLimiter: RateLimiter;
  /** Remembers the addresses each person signed in from (the coordination store's cache). */
  cache: KeyValueCache;
  authenticator: Authenticator;
  hasher: PasswordHasher;
  clock: () => Date;
  settings: SignInSettings;
}

export interface SignedIn {
  person: Person;
  /** The cookie's value: a session token, stored hashed. */
  sessionToken: string;
  csrfToken: string;
  expiresAt: Date;
  sessionId: string;
}

type ThrottledCode = 'too_many_sign_in_attempts' | 'too_many_set_password_attempts';

const wrongCredentials = () => new ApiError('invalid_credentials');

/**
 * How much of a set-password token names its throttling bucket: the `svc_pwd_` prefix and six
 * random characters (62^6 buckets), hashed so no part of a secret sits in the coordination store.
 * Every retry of one token shares a bucket whatever address it comes from.
 */
const TOKEN_PREFIX_LENGTH = PASSWORD_TOKEN_PREFIX.length + 6;

/**
 * A browser session's CSRF token, derived from its session token so GET /client/auth/session can
 * hand it out again (the session row keeps only its hash, like every token we store).
 */
export function csrfTokenFor(sessionToken: string): string {
  return createHmac('sha256', sessionToken).update('svc-csrf').digest('base64url');
}

/**
 * People signing in with an email and a password, into a browser session (a cookie the HTTP layer
 * sets). Every attempt, right or wrong, first takes one unit from the coordination store's rate
 * limiter, so guessing and scrypt's cost are bounded on every replica:
 * - per (address, email) pair and per address: a stranger is throttled where they stand;
 * - per email, a slower bucket that only addresses the person has not signed in from draw on, so
 *   guesses spread over many addresses are bounded too, yet cannot lock the person out of the
 *   addresses they use (a successful sign-in remembers its address for `sessionTtlDays` and, from
 *   an address already known, refills the bucket).
 * An unknown email, or one without a password yet, is verified against a hash no password matches
 * and answers the same 401 after the same work.
 */
export class PeopleSignIn {
  constructor(private readonly deps: PeopleSignInDeps) {}

  async signIn(input: { email: string; password: string; ip: string }): Promise<SignedIn> {
    const { db, storesFor, hasher } = this.deps;
    const email = input.email.trim().toLowerCase();
    const client = addressBucket(input.ip);
    const fromKnownAddress = await this.isKnownAddress(email, client);
    await this.throttleSignIn(email, client, fromKnownAddress);
    const stores = storesFor(db);
    const person = await stores.people.getByEmail(email);
    const stored = person ? await stores.people.passwordHashOf(person.id) : null;
    const tooLong = [...input.password].length > PASSWORD_MAX_LENGTH;
    const matches = await hasher.verify(tooLong ? '' : input.password, stored ?? hasher.unmatchableHash());
    if (!person || !stored || tooLong || !matches) throw wrongCredentials();
    if (hasher.isOutdated(stored)) {
      // Only if the hash is still the one just verified: a password set meanwhile is not undone.
      await stores.people.replacePasswordHash(person.id, stored, await hasher.hash(input.password));
    }
    await this.rememberAddress(email, client, fromKnownAddress);
    return this.openSession(person);
  }

  /**
   * Spends a set-password token and sets the password. Replacing a password ends every earlier
   * session of the person (the old one may be what leaked); a first password ends none, since no
   * session can have come from a password yet (the first start's owner token keeps working).
   */
  async setPassword(input: { token: string; password: string; ip: string }): Promise<Person> {
    const { db, storesFor, hasher } = this.deps;
    await this.throttleSetPassword(input.token, input.ip);
    const tokenHash = hashToken(input.token);
    const invalidToken = () => new ApiError('invalid_token', undefined, { param: 'token' });
    // Hashed before the transaction, never inside: on PGlite an open transaction holds the only
    // session, and a hash may wait for a slot behind a burst of sign-ins.
    const passwordHash = await hasher.hash(input.password);
    const found = await db.transaction(async (tx) => {
      const stores = storesFor(tx);
      const personId = await stores.passwordTokens.consume(tokenHash, this.deps.clock());
      if (!personId) throw invalidToken();
      const person = await stores.people.get(personId);
      if (!person) throw invalidToken();
      // Rule failures roll the transaction back: the token stays usable for a better password.
      checkPasswordRules(input.password, person.email);
      const replacing = (await stores.people.passwordHashOf(person.id)) !== null;
      await stores.people.setPasswordHash(person.id, passwordHash);
      return { person, revoked: replacing ? await stores.sessions.revokeAllForPerson(person.id) : [] };
    });
    await this.forget(found.revoked);
    return found.person;
  }

  /**
   * The stored form of a person's first password (someone accepting an invitation), after the
   * password rules; hashed in the caller's time, before any transaction (see setPassword).
   */
  async firstPasswordHash(password: string, email: string): Promise<string> {
    checkPasswordRules(password, email);
    return this.deps.hasher.hash(password);
  }

  /**
   * A browser session for a person who just proved who they are some other way (a new person
   * accepting an invitation): the cookie's token and its CSRF token. `stores` may be bound to an
   * open transaction, so the session exists only if what created the person commits.
   */
  openBrowserSession(person: Person, stores: IdentityStores = this.deps.storesFor(this.deps.db)): Promise<SignedIn> {
    return this.openSession(person, stores);
  }

  async signOut(sessionId: string): Promise<void> {
    await this.deps.storesFor(this.deps.db).sessions.revoke(sessionId);
    await this.deps.authenticator.invalidate({ kind: 'session', id: sessionId });
  }

  /** Ends every session of the person (browser and Bearer alike) on every replica; returns how many. */
  async signOutEverywhere(personId: string): Promise<number> {
    const revoked = await this.deps.storesFor(this.deps.db).sessions.revokeAllForPerson(personId);
    await this.forget(revoked);
    return revoked.length;
  }

  private async openSession(person: Person, stores: IdentityStores = this.deps.storesFor(this.deps.db)): Promise<SignedIn> {
    const sessionToken = generateToken(SESSION_PREFIX);
    const csrfToken = csrfTokenFor(sessionToken);
    const { expiresAt, sessionId } = await issueSession(stores, {
      personId: person.id,
      ttlDays: this.deps.settings.sessionTtlDays,
      now: this.deps.clock(),
      token: sessionToken,
      csrfTokenHash: hashToken(csrfToken),
    });
    return { person, sessionToken, csrfToken, expiresAt, sessionId };
  }

  private async forget(sessionIds: string[]): Promise<void> {
    for (const id of sessionIds) await this.deps.authenticator.invalidate({ kind: 'session', id });
  }

  /** `client` is the address's bucket (core/net/address-bucket.ts: an IPv4 address, an IPv6 /64). */
  private async throttleSignIn(email: string, client: string, fromKnownAddress: boolean): Promise<void> {
    const { attemptsPerAddressAndEmail, attemptsPerIp, windowMs } = this.deps.settings;
    const entries = [
      { key: `signin:pair:${pairId(email, client)}`, limit: attemptsPerAddressAndEmail, periodMs: windowMs, cost: 1 },
      { key: `signin:ip:${client}`, limit: attemptsPerIp, periodMs: windowMs, cost: 1 },
    ];
    if (!fromKnownAddress) entries.push({ ...this.emailBucket(email), cost: 1 });
    await this.consumeOrRefuse(entries, 'too_many_sign_in_attempts');
  }

  private async throttleSetPassword(token: string, ip: string): Promise<void> {
    const { setPasswordAttemptsPerIp, setPasswordAttemptsPerToken, windowMs } = this.deps.settings;
    const tokenBucket = `setpw:token:${hashToken(token.slice(0, TOKEN_PREFIX_LENGTH))}`;
    const entries = [
      { key: `setpw:ip:${addressBucket(ip)}`, limit: setPasswordAttemptsPerIp, periodMs: windowMs, cost: 1 },
      { key: tokenBucket, limit: setPasswordAttemptsPerToken, periodMs: windowMs, cost: 1 },
    ];
    await this.consumeOrRefuse(entries, 'too_many_set_password_attempts');
  }

  private consumeOrRefuse(entries: RateEntry[], code: ThrottledCode): Promise<void> {
    return throttleAttempts(this.deps.rateLimiter, entries, code);
  }

  private emailBucket(email: string): Omit<RateEntry, 'cost'> {
    const { attemptsPerEmail, emailWindowMs } = this.deps.settings;
    return { key: `signin:email:${hashToken(email)}`, limit: attemptsPerEmail, periodMs: emailWindowMs };
  }

  private async isKnownAddress(email: string, client: string): Promise<boolean> {
    return (await this.deps.cache.get(`signin:known:${pairId(email, client)}`)) !== null;
  }

  /**
   * After a successful sign-in: the address is the person's for sessionTtlDays, and when it already
   * was, strangers' guesses at the email from elsewhere are forgiven.
   */
  private async rememberAddress(email: string, client: string, wasKnown: boolean): Promise<void> {
    const { cache, rateLimiter, settings } = this.deps;
    await cache.set(`signin:known:${pairId(email, client)}`, '1', settings.sessionTtlDays * 86_400_000);
    if (wasKnown) {
      const bucket = this.emailBucket(email);
      // A refund never fills a bucket past full, so giving back the whole limit refills it.
      await rateLimiter.adjust([{ ...bucket, cost: -bucket.limit }]);
    }
  }
}

/** One (email, address bucket) pair, hashed: neither appears in the coordination store's keys. */
function pairId(email: string, client: string): string {
  return hashToken(`${email}\n${client}`);
}

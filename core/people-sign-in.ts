import { createHmac } from 'node:crypto';
import type { Authenticator } from './authenticator.ts';
import { ApiError } from './errors.ts';
import { issueSession } from './identity-admin.ts';
import { checkPasswordRules, dummyPasswordHash, hashPassword, PASSWORD_MAX_LENGTH, verifyPassword } from './passwords.ts';
import type { RateLimiter } from './ports/coordination.ts';
import type { Database } from './ports/database.ts';
import type { IdentityStoresFactory, Person } from './ports/identity.ts';
import { generateToken, hashToken, SESSION_PREFIX } from './secrets.ts';

export interface SignInSettings {
  sessionTtlDays: number;
  attemptsPerEmail: number;
  attemptsPerIp: number;
  windowMs: number;
}

export interface SignedIn {
  person: Person;
  /** The cookie's value: a session token, stored hashed. */
  sessionToken: string;
  csrfToken: string;
  expiresAt: Date;
}

const wrongCredentials = () => new ApiError('invalid_credentials');

/**
 * A browser session's CSRF token, derived from its session token so GET /client/auth/session can
 * hand it out again (the session row keeps only its hash, like every token we store).
 */
export function csrfTokenFor(sessionToken: string): string {
  return createHmac('sha256', sessionToken).update('svc-csrf').digest('base64url');
}

/**
 * People signing in with an email and a password, into a browser session (a cookie the HTTP layer
 * sets). Every attempt — right or wrong — first takes one unit from a per-email and a per-IP bucket
 * (so scrypt's cost cannot be spent at will either); an unknown email, or one without a password
 * yet, is verified against a dummy hash and answers the same 401 after the same work.
 */
export class PeopleSignIn {
  constructor(
    private readonly db: Database,
    private readonly storesFor: IdentityStoresFactory,
    private readonly rateLimiter: RateLimiter,
    private readonly authenticator: Authenticator,
    private readonly clock: () => Date,
    private readonly settings: SignInSettings,
  ) {}

  async signIn(input: { email: string; password: string; ip: string }): Promise<SignedIn> {
    const email = input.email.trim().toLowerCase();
    await this.throttle(email, input.ip);
    // Made on the first attempt whatever its email, so no first attempt is slower for an unknown one.
    const dummy = dummyPasswordHash();
    const stores = this.storesFor(this.db);
    const person = await stores.people.getByEmail(email);
    const stored = person ? await stores.people.passwordHashOf(person.id) : null;
    const tooLong = [...input.password].length > PASSWORD_MAX_LENGTH;
    const matches = await verifyPassword(tooLong ? '' : input.password, stored ?? (await dummy));
    if (!person || !stored || tooLong || !matches) throw wrongCredentials();
    return this.openSession(person);
  }

  /** Spends a set-password token and sets the password; every earlier session of the person ends. */
  async setPassword(input: { token: string; password: string }): Promise<Person> {
    const tokenHash = hashToken(input.token);
    const invalidToken = () => new ApiError('invalid_token', undefined, { param: 'token' });
    const found = await this.db.transaction(async (tx) => {
      const stores = this.storesFor(tx);
      const personId = await stores.passwordTokens.consume(tokenHash, this.clock());
      if (!personId) throw invalidToken();
      const person = await stores.people.get(personId);
      if (!person) throw invalidToken();
      // Rule failures roll the transaction back: the token stays usable for a better password.
      checkPasswordRules(input.password, person.email);
      await stores.people.setPasswordHash(person.id, await hashPassword(input.password));
      return { person, revoked: await stores.sessions.revokeAllForPerson(person.id) };
    });
    await this.forget(found.revoked);
    return found.person;
  }

  async signOut(sessionId: string): Promise<void> {
    await this.storesFor(this.db).sessions.revoke(sessionId);
    await this.authenticator.invalidate({ kind: 'session', id: sessionId });
  }

  /** Ends every session of the person (browser and Bearer alike) on every replica; returns how many. */
  async signOutEverywhere(personId: string): Promise<number> {
    const revoked = await this.storesFor(this.db).sessions.revokeAllForPerson(personId);
    await this.forget(revoked);
    return revoked.length;
  }

  private async openSession(person: Person): Promise<SignedIn> {
    const sessionToken = generateToken(SESSION_PREFIX);
    const csrfToken = csrfTokenFor(sessionToken);
    const { expiresAt } = await issueSession(this.storesFor(this.db), {
      personId: person.id,
      ttlDays: this.settings.sessionTtlDays,
      now: this.clock(),
      token: sessionToken,
      csrfTokenHash: hashToken(csrfToken),
    });
    return { person, sessionToken, csrfToken, expiresAt };
  }

  private async forget(sessionIds: string[]): Promise<void> {
    for (const id of sessionIds) await this.authenticator.invalidate({ kind: 'session', id });
  }

  private async throttle(email: string, ip: string): Promise<void> {
    const { attemptsPerEmail, attemptsPerIp, windowMs } = this.settings;
    const result = await this.rateLimiter.consume([
      { key: `signin:email:${hashToken(email)}`, limit: attemptsPerEmail, periodMs: windowMs, cost: 1 },
      { key: `signin:ip:${ip}`, limit: attemptsPerIp, periodMs: windowMs, cost: 1 },
    ]);
    if (result.allowed) return;
    const waitMs = Math.max(...result.decisions.map((d) => d.retryAfterMs));
    throw new ApiError('too_many_sign_in_attempts', undefined, {
      headers: { 'retry-after': String(Math.max(1, Math.ceil(waitMs / 1000))) },
    });
  }
}

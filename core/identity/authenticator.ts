import type { AncestorKey, ConnectorCredential, Credential, KeyCredential, SessionCredential } from './credential.ts';
import type { ConnectorTokenLookup, ConnectorTokenRecord } from './connector-tokens.ts';
import { ApiError } from '../kernel/errors.ts';
import type { PubSub, Unsubscribe } from '../ports/coordination.ts';
import type { CredentialLookup, KeyAuthRecord, MembershipStore, SessionAuthRecord } from '../ports/identity.ts';
import { isScope, scopesForRole, type Scope } from './scopes.ts';
import { CONNECTOR_ACCESS_PREFIX, hashToken, KEY_PREFIX, SESSION_PREFIX } from './api-tokens.ts';

const INVALIDATION_CHANNEL = 'credentials:invalidate';
/** lastUsedAt is for people reading key lists: half a minute late is soon enough. */
const LAST_USED_FLUSH_MS = 30_000;

/**
 * What to forget. `membership`: a person's place in one organisation changed (they joined or left
 * it, their role changed): every cached credential of that person acting in that organisation
 * (sessions, connectors), and their sessions acting in none, whatever replica holds them. Their
 * credentials acting in another organisation stay as they are.
 */
export type Invalidation =
  | { kind: 'key'; id: string }
  | { kind: 'session'; id: string }
  | { kind: 'grant'; id: string }
  | { kind: 'membership'; personId: string; organizationId: string }
  | { kind: 'all' };

interface CachedKey {
  kind: 'key';
  record: KeyAuthRecord;
  credential: KeyCredential;
  /** Why a key that made this one refuses it (revoked or paused), read once per lookup; null when none does. */
  makerRefusal: MakerRefusal | null;
  cachedUntil: number;
}

interface CachedSession {
  kind: 'session';
  record: SessionAuthRecord;
  credential: SessionCredential | null;
  cachedUntil: number;
}

interface CachedConnector {
  kind: 'connector';
  record: ConnectorTokenRecord;
  /** null when the person no longer belongs to the grant's organisation. */
  credential: ConnectorCredential | null;
  cachedUntil: number;
}

interface CachedMiss {
  kind: 'miss';
  cachedUntil: number;
}

type CacheEntry = CachedKey | CachedSession | CachedConnector | CachedMiss;

export interface AuthenticatorOptions {
  cacheTtlMs: number;
  maxEntries: number;
  now?: () => number;
  /** Stores lastUsedAt for a batch of keys (absent: not recorded). */
  recordKeyUse?: (usedAt: ReadonlyMap<string, Date>) => Promise<void>;
}

const invalid = () => new ApiError('invalid_api_key');

/**
 * Turns a bearer token into a Credential. Lookups are cached per token hash for a short TTL
 * (concurrent misses share one query); disabling, revoking or editing a key is pushed to every
 * replica over pub/sub, and the TTL bounds staleness even if a message is lost.
 */
export class Authenticator {
  private readonly cache = new Map<string, CacheEntry>();
  private readonly inFlight = new Map<string, Promise<CacheEntry>>();
  /** A key's cached secrets: its current one and, during a recreate's overlap, the one it replaced. */
  private readonly hashesByKeyId = new Map<string, Set<string>>();
  private readonly hashesBySessionId = new Map<string, string>();
  private unsubscribe: Unsubscribe | null = null;
  private readonly now: () => number;
  /** Key id -> when it was last used (epoch ms), until the next flush writes lastUsedAt in one batch. */
  private usedKeys = new Map<string, number>();
  private usageFlush: NodeJS.Timeout | null = null;
  private connectorTokens: ConnectorTokenLookup | null = null;

  constructor(
    private readonly lookup: CredentialLookup,
    private readonly memberships: MembershipStore,
    private readonly pubsub: PubSub,
    private readonly options: AuthenticatorOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  /** Where connectors' OAuth access tokens are found (the plugin that issues them provides it). */
  useConnectorTokens(lookup: ConnectorTokenLookup | undefined): void {
    this.connectorTokens = lookup ?? null;
  }

  async start(): Promise<void> {
    this.unsubscribe = await this.pubsub.subscribe(INVALIDATION_CHANNEL, (message) => this.applyInvalidation(message));
    this.usageFlush = setInterval(() => void this.flushKeyUsage(), LAST_USED_FLUSH_MS);
    this.usageFlush.unref();
  }

  async stop(): Promise<void> {
    if (this.usageFlush) clearInterval(this.usageFlush);
    await this.flushKeyUsage();
    const unsubscribe = this.unsubscribe;
    this.unsubscribe = null;
    // Closing coordination drops the subscription anyway; an unreachable Redis refusing the
    // UNSUBSCRIBE must not stop the rest of the shutdown (the database still has to close).
    await unsubscribe?.().catch(() => undefined);
  }

  /** Writes lastUsedAt for the keys used since the previous flush. */
  async flushKeyUsage(): Promise<void> {
    if (this.usedKeys.size === 0 || !this.options.recordKeyUse) return;
    const batch = this.usedKeys;
    this.usedKeys = new Map();
    try {
      await this.options.recordKeyUse(new Map([...batch].map(([id, at]) => [id, new Date(at)])));
    } catch {
      // A lost lastUsedAt is cosmetic; the next use records it again.
    }
  }

  /** Tell every replica (this one included) to forget a credential now. */
  async invalidate(message: Invalidation): Promise<void> {
    this.applyInvalidation(JSON.stringify(message));
    await this.pubsub.publish(INVALIDATION_CHANNEL, JSON.stringify(message));
  }

  async authenticate(authorization: string | undefined): Promise<Credential> {
    const entry = await this.entryFor(tokenHash(authorization));
    return this.credentialFrom(entry);
  }

  /**
   * What authenticate would answer, when the cache can answer it now (throwing the same errors);
   * null when the store must be asked, and then authenticate is the way. Lets the request hook
   * skip a promise on nearly every call.
   */
  cachedCredential(authorization: string | undefined): Credential | null {
    const cached = this.cache.get(tokenHash(authorization));
    return cached && cached.cachedUntil > this.now() ? this.credentialFrom(cached) : null;
  }

  /**
   * A key's credential rebuilt from its id, for work done later on the key's behalf (a batch, a
   * job): read fresh from the store, never from the cache, and refused exactly as authenticating
   * its token would be now (revoked, disabled, expired, a maker revoked or paused, the account
   * suspended). An unknown id is invalid_api_key.
   */
  async keyCredentialById(keyId: string): Promise<KeyCredential> {
    const record = await this.lookup.findKeyById(keyId);
    const entry: CacheEntry = record ? keyEntry(record, 0) : { kind: 'miss', cachedUntil: 0 };
    return this.credentialFrom(entry) as KeyCredential;
  }

  /**
   * A browser session's cookie value turned into its credential. Only sessions opened by sign-in
   * (they carry a CSRF token) are accepted from a cookie; Bearer tokens and keys are not.
   */
  async authenticateCookie(token: string): Promise<SessionCredential> {
    return this.browserCredentialFrom(await this.entryFor(cookieHash(token)));
  }

  /** As cachedCredential, for a cookie value. */
  cachedCookieCredential(token: string): SessionCredential | null {
    const cached = this.cache.get(cookieHash(token));
    return cached && cached.cachedUntil > this.now() ? this.browserCredentialFrom(cached) : null;
  }

  private browserCredentialFrom(entry: CacheEntry): SessionCredential {
    if (entry.kind !== 'session' || entry.record.session.csrfTokenHash === null) throw invalidSession();
    return this.credentialFrom(entry) as SessionCredential;
  }

  private credentialFrom(entry: CacheEntry): Credential {
    const now = this.now();
    if (entry.kind === 'miss') throw invalid();
    if (entry.kind === 'key') {
      const { key, organizationStatus, secretExpiresAt } = entry.record;
      // A secret a recreate replaced dies when its overlap ends, on every replica by its own clock:
      // the cached entry carries the instant, so no message has to arrive for it.
      if (secretExpiresAt && secretExpiresAt.getTime() <= now) throw invalid();
      if (key.revokedAt) throw new ApiError('key_revoked');
      if (key.disabled) throw new ApiError('key_disabled');
      if (entry.makerRefusal) throw new ApiError(entry.makerRefusal.code, entry.makerRefusal.message);
      // The credential's expiry is the earliest of the key's and its makers'.
      const { expiresAt } = entry.credential;
      if (expiresAt && expiresAt.getTime() <= now) throw new ApiError('key_expired');
      if (organizationStatus !== 'active') throw new ApiError('account_suspended');
      if (this.options.recordKeyUse) this.usedKeys.set(key.id, now);
      return entry.credential;
    }
    if (entry.kind === 'connector') {
      if (entry.record.revokedAt) throw new ApiError('access_token_revoked');
      if (entry.record.expiresAt.getTime() <= now) throw new ApiError('access_token_expired');
      if (!entry.credential) throw new ApiError('no_organization');
      return entry.credential;
    }
    const { session } = entry.record;
    if (session.revokedAt) throw new ApiError('session_revoked');
    if (session.expiresAt.getTime() <= now) throw new ApiError('session_expired');
    if (!entry.credential) throw new ApiError('no_organization');
    return entry.credential;
  }

  private async entryFor(hash: string): Promise<CacheEntry> {
    const cached = this.cache.get(hash);
    if (cached && cached.cachedUntil > this.now()) return cached;
    const pending = this.inFlight.get(hash);
    if (pending) return pending;
    const load = this.load(hash).finally(() => this.inFlight.delete(hash));
    this.inFlight.set(hash, load);
    return load;
  }

  private async load(hash: string): Promise<CacheEntry> {
    const cachedUntil = this.now() + this.options.cacheTtlMs;
    const keyRecord = await this.lookup.findKeyByTokenHash(hash);
    let entry: CacheEntry;
    if (keyRecord) {
      entry = keyEntry(keyRecord, cachedUntil);
      const hashes = this.hashesByKeyId.get(keyRecord.key.id) ?? new Set<string>();
      this.hashesByKeyId.set(keyRecord.key.id, hashes.add(hash));
    } else {
      const sessionRecord = await this.lookup.findSessionByTokenHash(hash);
      if (sessionRecord) {
        entry = { kind: 'session', record: sessionRecord, credential: await this.sessionCredential(sessionRecord), cachedUntil };
        this.hashesBySessionId.set(sessionRecord.session.id, hash);
      } else {
        const connectorRecord = await this.connectorTokens?.findAccessToken(hash);
        entry = connectorRecord ? { kind: 'connector', record: connectorRecord, credential: await this.connectorCredential(connectorRecord), cachedUntil } : { kind: 'miss', cachedUntil };
      }
    }
    this.remember(hash, entry);
    return entry;
  }

  private remember(hash: string, entry: CacheEntry): void {
    if (this.options.cacheTtlMs <= 0) return;
    this.cache.delete(hash);
    this.cache.set(hash, entry);
    // Maps iterate in insertion order, so the first entry is the oldest.
    while (this.cache.size > this.options.maxEntries) {
      const oldest = this.cache.keys().next().value;
      if (oldest === undefined) break;
      this.cache.delete(oldest);
    }
  }

  private async sessionCredential(record: SessionAuthRecord): Promise<SessionCredential | null> {
    const memberships = (await this.memberships.listForPerson(record.person.id)).filter((m) => m.status === 'active' && m.organizationStatus === 'active');
    const chosen = memberships.find((m) => m.organizationId === record.person.defaultOrganizationId) ?? memberships[0];
    if (!chosen) return null;
    return {
      kind: 'session',
      sessionId: record.session.id,
      personId: record.person.id,
      email: record.person.email,
      organizationId: chosen.organizationId,
      role: chosen.role,
      scopes: scopesForRole(chosen.role),
      csrfTokenHash: record.session.csrfTokenHash,
    };
  }

  /**
   * The person still acts with their current organisation role: the scopes granted on the consent
   * page are narrowed by it, so a demoted person's connectors lose what the role no longer holds.
   */
  private async connectorCredential(record: ConnectorTokenRecord): Promise<ConnectorCredential | null> {
    const memberships = await this.memberships.listForPerson(record.personId);
    const membership = memberships.find((m) => m.organizationId === record.organizationId && m.status === 'active' && m.organizationStatus === 'active');
    if (!membership) return null;
    const held = scopesForRole(membership.role);
    return {
      kind: 'connector',
      grantId: record.grantId,
      clientId: record.clientId,
      personId: record.personId,
      email: record.email,
      organizationId: record.organizationId,
      projectId: record.projectId,
      role: membership.role,
      scopes: new Set(record.scopes.filter(isScope).filter((scope) => held.has(scope))),
      audience: record.audience,
      expiresAt: record.expiresAt,
    };
  }

  private applyInvalidation(message: string): void {
    let parsed: Invalidation;
    try {
      parsed = JSON.parse(message) as Invalidation;
    } catch {
      return;
    }
    if (parsed.kind === 'all') {
      this.cache.clear();
      this.hashesByKeyId.clear();
      this.hashesBySessionId.clear();
      return;
    }
    if (parsed.kind === 'grant') {
      for (const [hash, entry] of this.cache) if (entry.kind === 'connector' && entry.record.grantId === parsed.id) this.cache.delete(hash);
      return;
    }
    if (parsed.kind === 'membership') {
      this.forgetMembership(parsed.personId, parsed.organizationId);
      return;
    }
    if (parsed.kind === 'key') {
      for (const hash of this.hashesByKeyId.get(parsed.id) ?? []) this.cache.delete(hash);
      this.hashesByKeyId.delete(parsed.id);
      this.forgetKeysMadeBy(parsed.id);
      return;
    }
    const hash = this.hashesBySessionId.get(parsed.id);
    if (hash) {
      this.cache.delete(hash);
      this.hashesBySessionId.delete(parsed.id);
    }
  }

  /**
   * A session's organisation is resolved when it is looked up (the person's default, else their
   * first), so its entry is dropped when it acts in the organisation that changed, or in none (the
   * person may just have joined one); the next request resolves it again. Walking the cache is fine
   * here: membership changes are management writes.
   */
  private forgetMembership(personId: string, organizationId: string): void {
    for (const [hash, entry] of this.cache) {
      if (entry.kind === 'session' && entry.record.person.id === personId && (entry.credential === null || entry.credential.organizationId === organizationId)) {
        this.cache.delete(hash);
        this.hashesBySessionId.delete(entry.record.session.id);
      } else if (entry.kind === 'connector' && entry.record.personId === personId && entry.record.organizationId === organizationId) {
        this.cache.delete(hash);
      }
    }
  }

  /**
   * A change to a key reaches every key it made (revoked, paused, expired or narrowed with it), so
   * their entries go too. Walking the cache is fine here: invalidations are management writes.
   */
  private forgetKeysMadeBy(keyId: string): void {
    for (const [hash, entry] of this.cache) {
      if (entry.kind === 'key' && entry.record.ancestors.some((maker) => maker.id === keyId)) {
        this.cache.delete(hash);
        this.hashesByKeyId.get(entry.record.key.id)?.delete(hash);
      }
    }
  }
}

/** The stored form of a bearer token; 401 when there is none or it is not one of ours. */
function tokenHash(authorization: string | undefined): string {
  const token = bearerToken(authorization);
  if (!token) {
    throw new ApiError('missing_api_key');
  }
  if (!token.startsWith(KEY_PREFIX) && !token.startsWith(SESSION_PREFIX) && !token.startsWith(CONNECTOR_ACCESS_PREFIX)) throw invalid();
  return hashToken(token);
}

const invalidSession = () => new ApiError('invalid_session');

function cookieHash(token: string): string {
  if (!token.startsWith(SESSION_PREFIX)) throw invalidSession();
  return hashToken(token);
}

function bearerToken(authorization: string | undefined): string | null {
  if (!authorization) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  return match?.[1] ?? null;
}

/**
 * A key made by a key never holds more than its makers: its scopes and models are narrowed by
 * theirs, and it expires when the first of them does (plugins/keys/key-rules.ts has the rules).
 */
function keyCredential(record: KeyAuthRecord): KeyCredential {
  const { key, ancestors, projectModelAllowList } = record;
  let scopes = key.scopes.filter(isScope) as Scope[];
  let models = intersectAllowLists(key.modelAllowList, projectModelAllowList);
  let expiresAt = key.expiresAt;
  for (const maker of ancestors) {
    const theirs = new Set(maker.scopes);
    scopes = scopes.filter((scope) => theirs.has(scope));
    models = intersectAllowLists(models && [...models], maker.modelAllowList);
    if (maker.expiresAt && (!expiresAt || maker.expiresAt < expiresAt)) expiresAt = maker.expiresAt;
  }
  return {
    kind: 'key',
    keyId: key.id,
    keyName: key.name,
    organizationId: key.organizationId,
    projectId: key.projectId,
    appId: key.appId,
    scopes: new Set(scopes),
    modelAllowList: models,
    expiresAt,
    spendCap: key.spendCap,
    rateLimits: key.rateLimits,
    ancestors: ancestors.map((maker): AncestorKey => ({ keyId: maker.id, spendCap: maker.spendCap, rateLimits: maker.rateLimits })),
  };
}

function keyEntry(record: KeyAuthRecord, cachedUntil: number): CachedKey {
  return { kind: 'key', record, credential: keyCredential(record), makerRefusal: makerRefusal(record), cachedUntil };
}

/** A key whose maker (or the maker's maker…) is revoked or paused is refused for the same reason. */
interface MakerRefusal {
  code: 'key_revoked' | 'key_disabled';
  message: string;
}

function makerRefusal(record: KeyAuthRecord): MakerRefusal | null {
  for (const maker of record.ancestors) {
    if (maker.revokedAt) return { code: 'key_revoked', message: 'The API key that made this key has been revoked, and this key with it' };
    if (maker.disabled) return { code: 'key_disabled', message: 'The API key that made this key is disabled; this key works again when that one is re-enabled' };
  }
  return null;
}

/** null means "no restriction"; two lists narrow each other. */
function intersectAllowLists(a: string[] | null, b: string[] | null): ReadonlySet<string> | null {
  if (!a && !b) return null;
  if (!a) return new Set(b);
  if (!b) return new Set(a);
  const other = new Set(b);
  return new Set(a.filter((model) => other.has(model)));
}

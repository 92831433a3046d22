import type { OrgRole, Scope } from '../identity/scopes.ts';
import type { Page, PageRequest } from '../vocabulary/pagination.ts';

/** Storage ports for who may call the service: organisations, people, projects, sessions, keys. */

export interface Organization {
  id: string;
  name: string;
  status: 'active' | 'suspended';
  requestLogging: boolean;
  spendCap: SpendCap | null;
  createdAt: Date;
}

export interface Person {
  id: string;
  email: string;
  name: string;
  defaultOrganizationId: string | null;
  createdAt: Date;
}

export interface Membership {
  organizationId: string;
  organizationName: string;
  organizationStatus: 'active' | 'suspended';
  personId: string;
  role: OrgRole;
  status: 'active' | 'suspended';
  createdAt: Date;
}

/** A membership seen from its organisation: the person's email and name with their role. */
export interface OrganizationMember extends Membership {
  email: string;
  name: string;
}

export interface OrganizationStore {
  create(input: { name: string }): Promise<Organization>;
  get(id: string): Promise<Organization | null>;
  update(id: string, patch: { name?: string; status?: Organization['status']; requestLogging?: boolean; spendCap?: SpendCap | null }): Promise<Organization | null>;
  count(): Promise<number>;
  /**
   * Removes what identity holds of an organisation: its keys, projects (and their members),
   * memberships, and the people who then belong to no organisation (their sessions with them).
   * The organisation's own row stays, for the records the law keeps (the credit ledger names it).
   */
  eraseContents(id: string): Promise<ErasedContents>;
}

/** What `eraseContents` removed, counted. */
export interface ErasedContents {
  keys: number;
  projects: number;
  memberships: number;
  people: number;
}

export interface PersonStore {
  create(input: { email: string; name: string }): Promise<Person>;
  get(id: string): Promise<Person | null>;
  getByEmail(email: string): Promise<Person | null>;
  /** Changes what the person is called; null when there is no such person. */
  update(personId: string, patch: { name?: string }): Promise<Person | null>;
  setDefaultOrganization(personId: string, organizationId: string | null): Promise<void>;
  /** The stored password hash (core/identity/passwords.ts format); null when none was set. Never part of Person. */
  passwordHashOf(personId: string): Promise<string | null>;
  setPasswordHash(personId: string, passwordHash: string): Promise<void>;
  /** Sets the hash only while the stored one is still `expected` (a rehash never undoes a new password); whether it did. */
  replacePasswordHash(personId: string, expected: string, passwordHash: string): Promise<boolean>;
}

/** One-time tokens that let a person set a password; stored hashed, spent once. */
export interface PasswordTokenStore {
  create(input: { personId: string; tokenHash: string; createdAt: Date; expiresAt: Date }): Promise<void>;
  /** Marks the token used and returns its person, if it exists, is unused and unexpired at `now`. */
  consume(tokenHash: string, now: Date): Promise<string | null>;
}

export interface MembershipStore {
  add(input: { organizationId: string; personId: string; role: OrgRole }): Promise<Membership>;
  get(organizationId: string, personId: string): Promise<Membership | null>;
  listForPerson(personId: string): Promise<Membership[]>;
  /** A person's memberships, newest first (core/vocabulary/pagination.ts). */
  pageForPerson(personId: string, page: PageRequest): Promise<Page<Membership>>;
  listForOrganization(organizationId: string): Promise<Membership[]>;
  update(organizationId: string, personId: string, patch: { role?: OrgRole; status?: Membership['status'] }): Promise<Membership | null>;
  /** The organisation's people with their roles, newest member first, ties broken by person id. */
  pageForOrganization(organizationId: string, page: PageRequest): Promise<Page<OrganizationMember>>;
  /**
   * Ends a membership: removes it, and the organisation stops being the person's default. The
   * membership removed, or null when there was none. Project roles are the project members store's.
   */
  remove(organizationId: string, personId: string): Promise<Membership | null>;
  /**
   * The person ids of the organisation's active owners, their rows locked until the transaction
   * ends: two changes made at once cannot each leave the other's owner as the last one.
   */
  lockOwners(organizationId: string): Promise<string[]>;
}

export type ProjectRole = 'admin' | 'developer' | 'viewer';

export interface Project {
  id: string;
  organizationId: string;
  name: string;
  isDefault: boolean;
  /** Models keys of this project may use; null means every model. */
  modelAllowList: string[] | null;
  spendCap: SpendCap | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface ProjectStore {
  create(input: { organizationId: string; name: string; isDefault?: boolean; modelAllowList?: string[] | null }): Promise<Project>;
  get(organizationId: string, id: string): Promise<Project | null>;
  list(organizationId: string): Promise<Project[]>;
  /** Newest first; `projectIds` (null: every project) is what the caller may see. */
  page(organizationId: string, filter: { projectIds: readonly string[] | null }, page: PageRequest): Promise<Page<Project>>;
  update(organizationId: string, id: string, patch: { name?: string; modelAllowList?: string[] | null; spendCap?: SpendCap | null }): Promise<Project | null>;
  /** Deletes an empty project; false when it does not exist. */
  delete(organizationId: string, id: string): Promise<boolean>;
  getDefault(organizationId: string): Promise<Project | null>;
}

export interface ProjectMember {
  projectId: string;
  personId: string;
  email: string;
  name: string;
  role: ProjectRole;
  createdAt: Date;
}

export interface ProjectMemberStore {
  list(projectId: string): Promise<ProjectMember[]>;
  /** Newest first, ties broken by person id. */
  page(projectId: string, page: PageRequest): Promise<Page<ProjectMember>>;
  /** The projects of the organisation on which the person has a role (any role). */
  projectIdsOf(organizationId: string, personId: string): Promise<string[]>;
  get(projectId: string, personId: string): Promise<ProjectMember | null>;
  upsert(input: { projectId: string; personId: string; role: ProjectRole }): Promise<ProjectMember>;
  remove(projectId: string, personId: string): Promise<boolean>;
  /** Removes every role the person has on the organisation's projects; the roles removed. */
  removeAllInOrganization(organizationId: string, personId: string): Promise<ProjectMember[]>;
}

export interface Session {
  id: string;
  personId: string;
  createdAt: Date;
  expiresAt: Date;
  revokedAt: Date | null;
  /** Browser (cookie) sessions only: the hash of the CSRF token writes must carry. */
  csrfTokenHash: string | null;
}

export interface SessionStore {
  create(input: { personId: string; tokenHash: string; expiresAt: Date; csrfTokenHash?: string | null }): Promise<Session>;
  findByTokenHash(tokenHash: string): Promise<Session | null>;
  revoke(id: string): Promise<boolean>;
  /** Revokes every live session of a person; returns the ids it revoked. */
  revokeAllForPerson(personId: string): Promise<string[]>;
}

export type SpendPeriod = 'day' | 'week' | 'month' | 'total';
export type CapMode = 'blocking' | 'alert';

export interface SpendCap {
  limitMicros: bigint;
  period: SpendPeriod;
  mode: CapMode;
}

/** Per-key rate limits; null falls back to the operator's default for keys. */
export interface KeyRateLimits {
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
  concurrency: number | null;
}

export interface ApiKey {
  id: string;
  organizationId: string;
  projectId: string;
  appId: string | null;
  name: string;
  /** Last characters of the secret, to tell keys apart in lists. */
  hint: string;
  scopes: Scope[];
  modelAllowList: string[] | null;
  disabled: boolean;
  expiresAt: Date | null;
  spendCap: SpendCap | null;
  rateLimits: KeyRateLimits;
  createdAt: Date;
  updatedAt: Date;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
  createdByPersonId: string | null;
  /** The key that made this one (a key-made key stays inside its maker); null when a person made it. */
  createdByKeyId: string | null;
  /** Who paused the key, while it is paused: a key may not resume a key a person paused. */
  disabledBy: KeyActor | null;
}

/** A person or a key acting on a key. */
export type KeyActor = { kind: 'person'; id: string } | { kind: 'key'; id: string };

export interface NewApiKey {
  organizationId: string;
  projectId: string;
  appId?: string | null;
  name: string;
  tokenHash: string;
  hint: string;
  scopes: Scope[];
  modelAllowList: string[] | null;
  expiresAt: Date | null;
  spendCap: SpendCap | null;
  rateLimits?: KeyRateLimits;
  createdByPersonId: string | null;
  createdByKeyId: string | null;
}

export interface ApiKeyPatch {
  name?: string;
  projectId?: string;
  scopes?: Scope[];
  modelAllowList?: string[] | null;
  disabled?: boolean;
  /** Recorded with `disabled: true`; `disabled: false` clears it. */
  disabledBy?: KeyActor;
  expiresAt?: Date | null;
  spendCap?: SpendCap | null;
  rateLimits?: KeyRateLimits;
}

export interface ApiKeyStore {
  create(input: NewApiKey): Promise<ApiKey>;
  get(organizationId: string, id: string): Promise<ApiKey | null>;
  list(organizationId: string, filter?: { projectId?: string }): Promise<ApiKey[]>;
  /** Newest first; `projectIds` (null: every project) is what the caller may see. */
  page(organizationId: string, filter: { projectId?: string; projectIds: readonly string[] | null }, page: PageRequest): Promise<Page<ApiKey>>;
  update(organizationId: string, id: string, patch: ApiKeyPatch): Promise<ApiKey | null>;
  /** Marks the key and every key it made (transitively) revoked (they stay listed); returns the key or null. */
  revoke(organizationId: string, id: string): Promise<ApiKey | null>;
  /** Removes the row, revoking every key it made first; usage rows that name the key stay. */
  delete(organizationId: string, id: string): Promise<boolean>;
  /** Records when keys were last used (batched; never moves a time backwards). */
  touch(usedAt: ReadonlyMap<string, Date>): Promise<void>;
  /**
   * Gives the key a new secret (recreate): the row, its id and every setting stay. The secret it
   * replaces keeps working until `retiredUntil` (null or not after `now`: not at all), and a secret
   * an earlier recreate retired works no longer than that either. Run it in a transaction.
   * Returns the key with its new hint, or null when there is no such key.
   */
  replaceSecret(organizationId: string, id: string, secret: { tokenHash: string; hint: string; retiredUntil: Date | null; now: Date }): Promise<ApiKey | null>;
}

/** The one read the hot path makes: everything authentication needs, in one query (a second for a key made by a key: its makers). */
export interface KeyAuthRecord {
  key: ApiKey;
  /** The keys that made this one, nearest first (its maker, the maker's maker, …); empty for a person's key. */
  ancestors: ApiKey[];
  organizationStatus: Organization['status'];
  projectModelAllowList: string[] | null;
  /**
   * When the presented secret stops working: null for the key's current secret (and for a lookup by
   * id); the end of the overlap for a secret a recreate replaced.
   */
  secretExpiresAt: Date | null;
}

export interface SessionAuthRecord {
  session: Session;
  person: Person;
}

export interface CredentialLookup {
  findKeyByTokenHash(tokenHash: string): Promise<KeyAuthRecord | null>;
  /** The same record found by the key's id (a job acting for a key holds its id, never its token). */
  findKeyById(keyId: string): Promise<KeyAuthRecord | null>;
  findSessionByTokenHash(tokenHash: string): Promise<SessionAuthRecord | null>;
}

export interface SpendWindows {
  totalMicros: bigint;
  todayMicros: bigint;
  weekMicros: bigint;
  monthMicros: bigint;
}

/** Calls stored in the request log since a moment: how many, and their tokens (input plus output). */
export interface RecentCalls {
  requests: number;
  tokens: number;
}

/**
 * Spend read from metered usage; windows are UTC (week starts Monday). The request log is
 * metering's: the metering plugin provides it at SpendReaderPoint (core/ports/metering.ts).
 */
export interface SpendReader {
  /** The key's spend and that of every key it made, transitively: what the key's cap counts. */
  forKey(keyId: string, now: Date): Promise<SpendWindows>;
  forProject(projectId: string, now: Date): Promise<SpendWindows>;
  forOrganization(organizationId: string, now: Date): Promise<SpendWindows>;
  /** Calls of a key, project or account (organisation) created at or after `since`: what re-seeds a lost rate window. */
  recentCalls(scope: 'key' | 'project' | 'account', id: string, since: Date): Promise<RecentCalls>;
}

export interface IdentityStores {
  organizations: OrganizationStore;
  people: PersonStore;
  memberships: MembershipStore;
  projects: ProjectStore;
  projectMembers: ProjectMemberStore;
  sessions: SessionStore;
  passwordTokens: PasswordTokenStore;
  apiKeys: ApiKeyStore;
  credentials: CredentialLookup;
}

/** Builds the stores over a connection or an open transaction (for multi-step writes). */
export type IdentityStoresFactory = (db: import('./database.ts').Queryable) => IdentityStores;

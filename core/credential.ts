import type { KeyRateLimits, SpendCap } from './ports/identity.ts';
import type { OrgRole, Scope } from './scopes.ts';

/** Who is calling, as every route and operation sees it after authentication. */
export interface KeyCredential {
  readonly kind: 'key';
  readonly keyId: string;
  readonly keyName: string;
  readonly organizationId: string;
  readonly projectId: string;
  readonly appId: string | null;
  readonly scopes: ReadonlySet<Scope>;
  /** Models this key may use after the project's list is applied; null means every model. */
  readonly modelAllowList: ReadonlySet<string> | null;
  readonly spendCap: SpendCap | null;
  readonly rateLimits: KeyRateLimits;
}

export interface SessionCredential {
  readonly kind: 'session';
  readonly sessionId: string;
  readonly personId: string;
  readonly email: string;
  readonly organizationId: string;
  readonly role: OrgRole;
  readonly scopes: ReadonlySet<Scope>;
  /** Browser sessions: the hash of the CSRF token their cookie-authenticated writes carry; null for Bearer sessions. */
  readonly csrfTokenHash: string | null;
}

export type Credential = KeyCredential | SessionCredential;

export function isOwner(credential: Credential): boolean {
  return credential.kind === 'session' && credential.role === 'owner';
}

export function hasScope(credential: Credential, scope: Scope): boolean {
  return credential.scopes.has(scope);
}

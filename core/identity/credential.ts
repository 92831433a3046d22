import type { KeyRateLimits, SpendCap } from '../ports/identity.ts';
import type { OrgRole, Scope } from './scopes.ts';

/** Who is calling, as every route and operation sees it after authentication. */
export interface KeyCredential {
  readonly kind: 'key';
  readonly keyId: string;
  readonly keyName: string;
  readonly organizationId: string;
  readonly projectId: string;
  readonly appId: string | null;
  /** The key's scopes, narrowed by those of every key that made it. */
  readonly scopes: ReadonlySet<Scope>;
  /** Models this key may use after the project's and its makers' lists are applied; null means every model. */
  readonly modelAllowList: ReadonlySet<string> | null;
  /** The earliest expiry of the key and of every key that made it; null when none expires. */
  readonly expiresAt: Date | null;
  readonly spendCap: SpendCap | null;
  readonly rateLimits: KeyRateLimits;
  /**
   * The keys that made this one, nearest first: their caps and limits bound this key's calls too
   * (they count what all their descendants spend and hold). Empty for a key a person made.
   */
  readonly ancestors: readonly AncestorKey[];
}

/** What admission needs of a key up a credential's chain of makers. */
export interface AncestorKey {
  readonly keyId: string;
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

/**
 * A person acting through a connector that signed in over OAuth (plugins/oauth): confined to the one
 * project they picked on the consent page, with the scopes they granted there (narrowed again by
 * their organisation role at every use). Only `{auth_url}/mcp` takes it.
 */
export interface ConnectorCredential {
  readonly kind: 'connector';
  /** The grant (token family) the access token belongs to; revoking it ends every token of the family. */
  readonly grantId: string;
  readonly clientId: string;
  readonly personId: string;
  readonly email: string;
  readonly organizationId: string;
  readonly projectId: string;
  readonly role: OrgRole;
  readonly scopes: ReadonlySet<Scope>;
  /** The resource (RFC 8707) the token was issued for: `{auth_url}/mcp`. */
  readonly audience: string;
  readonly expiresAt: Date;
}

export type Credential = KeyCredential | SessionCredential | ConnectorCredential;

/** The person behind a credential, when a person is behind it. */
export function personIdOf(credential: Credential): string | null {
  return credential.kind === 'key' ? null : credential.personId;
}

/** The one project a credential is confined to (a key's or a connector's), or null for a person's session. */
export function confinedProjectOf(credential: Credential): string | null {
  return credential.kind === 'session' ? null : credential.projectId;
}

export function isOwner(credential: Credential): boolean {
  return credential.kind === 'session' && credential.role === 'owner';
}

export function hasScope(credential: Credential, scope: Scope): boolean {
  return credential.scopes.has(scope);
}

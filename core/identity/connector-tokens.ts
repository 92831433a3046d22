import { defineExtensionPoint } from '../kernel/extension-points.ts';

/** An OAuth access token as the authenticator needs it: whose it is, for what, and until when. */
export interface ConnectorTokenRecord {
  readonly grantId: string;
  readonly clientId: string;
  readonly personId: string;
  readonly email: string;
  readonly organizationId: string;
  readonly projectId: string;
  readonly scopes: readonly string[];
  readonly audience: string;
  readonly expiresAt: Date;
  /** Set when the token's grant was revoked (by the person, by revocation, or by refresh-token reuse). */
  readonly revokedAt: Date | null;
}

export interface ConnectorTokenLookup {
  /** The access token stored under this hash (core/identity/api-tokens.ts hashToken), or null. */
  findAccessToken(tokenHash: string): Promise<ConnectorTokenRecord | null>;
}

/**
 * Where the authenticator finds connectors' OAuth access tokens: the OAuth plugin provides it.
 * Without it, connector tokens are not ours (401 like any unknown token).
 */
export const ConnectorTokensPoint = defineExtensionPoint<ConnectorTokenLookup>('identity.connector-tokens');

import type { AuthorizationServerMetadata } from '@modelcontextprotocol/sdk/shared/auth.js';
import { type Row, date, dateOrNull, str, strOrNull } from '../../adapters/sql/rows.ts';
import type { Queryable } from '../../core/ports/database.ts';

export type OAuthConnectionStatus = 'not_connected' | 'connected' | 'needs_sign_in';

/** An OAuth upstream's connection (no token: those are in the vault). */
export interface OAuthConnection {
  upstreamId: string;
  organizationId: string;
  status: OAuthConnectionStatus;
  statusReason: string | null;
  issuer: string;
  metadata: AuthorizationServerMetadata;
  resource: string | null;
  oauthAppId: string | null;
  registeredClientId: string | null;
  registeredRedirectUri: string | null;
  scopes: string | null;
  tokenVersion: number;
  expiresAt: Date | null;
  refreshingUntil: Date | null;
  connectedAt: Date | null;
  lastRefreshedAt: Date | null;
}

/** Where the authorization server is and which client signs in there, as a sign-in's start found them. */
export interface OAuthServerChoice {
  issuer: string;
  metadata: AuthorizationServerMetadata;
  resource: string | null;
  oauthAppId: string | null;
  registeredClientId: string | null;
  registeredRedirectUri: string | null;
}

export type FlowStatus = 'pending' | 'exchanging' | 'connected' | 'failed';

export interface OAuthFlow {
  id: string;
  organizationId: string;
  upstreamId: string;
  startedBy: string;
  redirectUri: string;
  status: FlowStatus;
  errorCode: string | null;
  errorMessage: string | null;
  expiresAt: Date;
  createdAt: Date;
  finishedAt: Date | null;
}

function toConnection(row: Row): OAuthConnection {
  return {
    upstreamId: str(row, 'upstream_id'),
    organizationId: str(row, 'organization_id'),
    status: str(row, 'status') as OAuthConnectionStatus,
    statusReason: strOrNull(row, 'status_reason'),
    issuer: str(row, 'issuer'),
    metadata: row.as_metadata as AuthorizationServerMetadata,
    resource: strOrNull(row, 'resource'),
    oauthAppId: strOrNull(row, 'oauth_app_id'),
    registeredClientId: strOrNull(row, 'registered_client_id'),
    registeredRedirectUri: strOrNull(row, 'registered_redirect_uri'),
    scopes: strOrNull(row, 'scopes'),
    tokenVersion: Number(row.token_version),
    expiresAt: dateOrNull(row, 'expires_at'),
    refreshingUntil: dateOrNull(row, 'refreshing_until'),
    connectedAt: dateOrNull(row, 'connected_at'),
    lastRefreshedAt: dateOrNull(row, 'last_refreshed_at'),
  };
}

function toFlow(row: Row): OAuthFlow {
  return {
    id: str(row, 'id'),
    organizationId: str(row, 'organization_id'),
    upstreamId: str(row, 'upstream_id'),
    startedBy: str(row, 'started_by'),
    redirectUri: str(row, 'redirect_uri'),
    status: str(row, 'status') as FlowStatus,
    errorCode: strOrNull(row, 'error_code'),
    errorMessage: strOrNull(row, 'error_message'),
    expiresAt: date(row, 'expires_at'),
    createdAt: date(row, 'created_at'),
    finishedAt: dateOrNull(row, 'finished_at'),
  };
}

/** New tokens as stored: the row's part (the tokens themselves go to the vault in the same transaction). */
export interface TokenGrant {
  expiresAt: Date | null;
  scopes: string | null;
}

/** The mcp_upstream_oauth and mcp_oauth_flows tables (owned by this plugin). */
export class UpstreamOAuthStore {
  constructor(private readonly db: Queryable) {}

  async get(upstreamId: string, tx: Queryable = this.db): Promise<OAuthConnection | null> {
    const { rows } = await tx.query('SELECT * FROM mcp_upstream_oauth WHERE upstream_id = $1', [upstreamId]);
    return rows[0] ? toConnection(rows[0]) : null;
  }

  /** Records the server and client a sign-in starts with; tokens and status are kept as they are. */
  async choose(tx: Queryable, upstreamId: string, organizationId: string, choice: OAuthServerChoice, now: Date): Promise<void> {
    await tx.query(
      `INSERT INTO mcp_upstream_oauth (upstream_id, organization_id, status, issuer, as_metadata, resource, oauth_app_id, registered_client_id, registered_redirect_uri, updated_at)
       VALUES ($1, $2, 'not_connected', $3, $4, $5, $6, $7, $8, $9)
       ON CONFLICT (upstream_id) DO UPDATE SET issuer = $3, as_metadata = $4, resource = $5, oauth_app_id = $6, registered_client_id = $7,
         registered_redirect_uri = $8, updated_at = $9`,
      [upstreamId, organizationId, choice.issuer, JSON.stringify(choice.metadata), choice.resource, choice.oauthAppId, choice.registeredClientId, choice.registeredRedirectUri, now],
    );
  }

  /** A finished sign-in: connected with a new token version (whatever a refresh was doing is void). */
  async connect(tx: Queryable, upstreamId: string, grant: TokenGrant, now: Date): Promise<void> {
    await tx.query(
      `UPDATE mcp_upstream_oauth SET status = 'connected', status_reason = NULL, token_version = token_version + 1, expires_at = $2, scopes = $3,
         refreshing_until = NULL, connected_at = $4, last_refreshed_at = NULL, updated_at = $4 WHERE upstream_id = $1`,
      [upstreamId, grant.expiresAt, grant.scopes, now],
    );
  }

  /**
   * Claims the refresh of `version`: only while it is still the current version, the connection is
   * connected and no other claim is live. The one replica whose claim succeeds calls the token endpoint.
   */
  async claimRefresh(upstreamId: string, version: number, now: Date, until: Date): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `UPDATE mcp_upstream_oauth SET refreshing_until = $4 WHERE upstream_id = $1 AND token_version = $2 AND status = 'connected'
         AND (refreshing_until IS NULL OR refreshing_until <= $3)`,
      [upstreamId, version, now, until],
    );
    return rowCount > 0;
  }

  /** Stores a refresh's outcome over the version claimed; false when that version is gone (a new sign-in meanwhile). */
  async refreshed(tx: Queryable, upstreamId: string, version: number, grant: TokenGrant, now: Date): Promise<boolean> {
    const { rowCount } = await tx.query(
      `UPDATE mcp_upstream_oauth SET token_version = token_version + 1, expires_at = $3, scopes = COALESCE($4, scopes), refreshing_until = NULL,
         last_refreshed_at = $5, updated_at = $5 WHERE upstream_id = $1 AND token_version = $2`,
      [upstreamId, version, grant.expiresAt, grant.scopes, now],
    );
    return rowCount > 0;
  }

  /** Gives a claim back (the refresh failed for a passing reason): another attempt may claim again. */
  async releaseClaim(upstreamId: string, version: number): Promise<void> {
    await this.db.query('UPDATE mcp_upstream_oauth SET refreshing_until = NULL WHERE upstream_id = $1 AND token_version = $2', [upstreamId, version]);
  }

  /** The authorization server refused the refresh token: a person must sign in again. False if the version moved on. */
  async needsSignIn(tx: Queryable, upstreamId: string, version: number, reason: string, now: Date): Promise<boolean> {
    const { rowCount } = await tx.query(
      `UPDATE mcp_upstream_oauth SET status = 'needs_sign_in', status_reason = $3, refreshing_until = NULL, updated_at = $4
       WHERE upstream_id = $1 AND token_version = $2 AND status = 'connected'`,
      [upstreamId, version, reason, now],
    );
    return rowCount > 0;
  }

  /** Tokens forgotten: the server and client chosen are kept, so signing in again needs no new registration. */
  async disconnect(tx: Queryable, upstreamId: string, now: Date): Promise<void> {
    await tx.query(
      `UPDATE mcp_upstream_oauth SET status = 'not_connected', status_reason = NULL, token_version = token_version + 1, expires_at = NULL, scopes = NULL,
         refreshing_until = NULL, connected_at = NULL, last_refreshed_at = NULL, updated_at = $2 WHERE upstream_id = $1`,
      [upstreamId, now],
    );
  }

  /** The whole connection (the upstream's authentication changed). */
  async forget(tx: Queryable, upstreamId: string): Promise<void> {
    await tx.query('DELETE FROM mcp_upstream_oauth WHERE upstream_id = $1', [upstreamId]);
  }

  async createFlow(tx: Queryable, flow: Omit<OAuthFlow, 'status' | 'errorCode' | 'errorMessage' | 'finishedAt'> & { stateHash: string }): Promise<void> {
    await tx.query(
      `INSERT INTO mcp_oauth_flows (id, state_hash, organization_id, upstream_id, started_by, redirect_uri, status, expires_at, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8)`,
      [flow.id, flow.stateHash, flow.organizationId, flow.upstreamId, flow.startedBy, flow.redirectUri, flow.expiresAt, flow.createdAt],
    );
  }

  async flowByState(stateHash: string): Promise<OAuthFlow | null> {
    const { rows } = await this.db.query('SELECT * FROM mcp_oauth_flows WHERE state_hash = $1', [stateHash]);
    return rows[0] ? toFlow(rows[0]) : null;
  }

  /** Takes a pending, unexpired flow for its callback: single use, whoever takes it first. */
  async takeFlow(stateHash: string, now: Date): Promise<OAuthFlow | null> {
    const { rows } = await this.db.query(`UPDATE mcp_oauth_flows SET status = 'exchanging' WHERE state_hash = $1 AND status = 'pending' AND expires_at > $2 RETURNING *`, [stateHash, now]);
    return rows[0] ? toFlow(rows[0]) : null;
  }

  async finishFlow(tx: Queryable, id: string, outcome: { status: 'connected' } | { status: 'failed'; code: string; message: string }, now: Date): Promise<void> {
    await tx.query('UPDATE mcp_oauth_flows SET status = $2, error_code = $3, error_message = $4, finished_at = $5 WHERE id = $1', [
      id,
      outcome.status,
      outcome.status === 'failed' ? outcome.code : null,
      outcome.status === 'failed' ? outcome.message : null,
      now,
    ]);
  }

  /** Every sign-in of an upstream (its authentication changed, or it is deleted); answers their ids. */
  async deleteFlowsOf(tx: Queryable, upstreamId: string): Promise<string[]> {
    const { rows } = await tx.query<{ id: string }>('DELETE FROM mcp_oauth_flows WHERE upstream_id = $1 RETURNING id', [upstreamId]);
    return rows.map((row) => row.id);
  }

  /** Flows that ended or expired before `before`; answers their ids (their verifiers go too). */
  async pruneFlows(tx: Queryable, before: Date): Promise<string[]> {
    const { rows } = await tx.query<{ id: string }>('DELETE FROM mcp_oauth_flows WHERE expires_at < $1 RETURNING id', [before]);
    return rows.map((row) => row.id);
  }

  /** The flows of an organisation being erased (before its upstreams, whose cascade would hide their ids). */
  async eraseOrganization(tx: Queryable, organizationId: string): Promise<string[]> {
    const { rows } = await tx.query<{ id: string }>('DELETE FROM mcp_oauth_flows WHERE organization_id = $1 RETURNING id', [organizationId]);
    await tx.query('DELETE FROM mcp_upstream_oauth WHERE organization_id = $1', [organizationId]);
    return rows.map((row) => row.id);
  }
}

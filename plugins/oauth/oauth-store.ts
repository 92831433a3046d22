import { Conditions } from '../../adapters/sql/conditions.ts';
import { type KeysetOrder, selectPage } from '../../adapters/sql/keyset.ts';
import { date, dateOrNull, type Row, str, strOrNull } from '../../adapters/sql/rows.ts';
import type { Page, PageRequest } from '../../core/vocabulary/pagination.ts';
import type { ConnectorTokenLookup, ConnectorTokenRecord } from '../../core/identity/connector-tokens.ts';
import type { Database, Queryable } from '../../core/ports/database.ts';

export interface OAuthClient {
  id: string;
  clientName: string | null;
  redirectUris: string[];
  createdAt: Date;
}

/** What a person approved on the consent page: the token family's fixed terms. */
export interface OAuthGrant {
  id: string;
  clientId: string;
  personId: string;
  organizationId: string;
  projectId: string;
  scopes: string[];
  resource: string;
  revokedAt: Date | null;
}

export interface IssuedCode {
  grant: OAuthGrant;
  redirectUri: string;
  codeChallenge: string;
  expiresAt: Date;
}

export interface StoredToken {
  hash: string;
  expiresAt: Date;
}

/** A grant as its organisation's people see it (GET /client/oauth/connections). */
export interface Connection {
  id: string;
  clientId: string;
  clientName: string | null;
  redirectUris: string[];
  personId: string;
  personEmail: string;
  personName: string;
  projectId: string;
  scopes: string[];
  createdAt: Date;
  /** When its last refresh token expires: the connector must sign in again after it. */
  expiresAt: Date;
}

/** Which connections a list shows: the organisation's, or one person's within it. */
export interface ConnectionFilter {
  organizationId: string;
  /** Only this person's grants (a member sees their own); null: everyone's. */
  personId: string | null;
  now: Date;
}

const CONNECTION_ORDER: KeysetOrder = { at: 'g.created_at', id: 'g.id', idType: 'uuid' };
const CONNECTION_COLUMNS = `g.id, g.client_id, c.client_name, c.redirect_uris, g.person_id, p.email, p.name, g.project_id, g.scopes, g.created_at, live.expires_at`;
/**
 * A grant is connected while it is not revoked and a token of it can still be used: its latest
 * unused refresh token (or its access token) has not expired.
 */
const CONNECTION_FROM = `oauth_grants g JOIN oauth_clients c ON c.id = g.client_id JOIN people p ON p.id = g.person_id
  JOIN LATERAL (SELECT max(t.expires_at) AS expires_at FROM oauth_tokens t WHERE t.grant_id = g.id AND t.used_at IS NULL) live ON true`;

/** A single-use secret spent: what it was for, or why it cannot be spent. */
export type Spent<T> = { status: 'spent'; value: T } | { status: 'reused'; grantId: string } | { status: 'unknown' };

const GRANT_COLUMNS = 'g.id, g.client_id, g.person_id, g.organization_id, g.project_id, g.scopes, g.resource, g.revoked_at';

/** The OAuth plugin's tables (oauth-migrations.ts). Secrets are stored only as hashes. */
export class OAuthStore implements ConnectorTokenLookup {
  constructor(private readonly db: Database) {}

  async createClient(client: OAuthClient): Promise<void> {
    await this.db.query('INSERT INTO oauth_clients (id, client_name, redirect_uris, created_at) VALUES ($1, $2, $3::jsonb, $4)', [
      client.id,
      client.clientName,
      JSON.stringify(client.redirectUris),
      client.createdAt,
    ]);
  }

  async getClient(id: string): Promise<OAuthClient | null> {
    const { rows } = await this.db.query('SELECT id, client_name, redirect_uris, created_at FROM oauth_clients WHERE id = $1', [id]);
    const row = rows[0];
    if (!row) return null;
    return { id: str(row, 'id'), clientName: strOrNull(row, 'client_name'), redirectUris: row['redirect_uris'] as string[], createdAt: date(row, 'created_at') };
  }

  /** The grant the person approved and its authorization code, together. */
  async createGrantWithCode(grant: Omit<OAuthGrant, 'revokedAt'>, code: { codeHash: string; redirectUri: string; codeChallenge: string; expiresAt: Date }, now: Date): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.query(
        `INSERT INTO oauth_grants (id, client_id, person_id, organization_id, project_id, scopes, resource, created_at)
         VALUES ($1, $2, $3, $4, $5, $6::text[], $7, $8)`,
        [grant.id, grant.clientId, grant.personId, grant.organizationId, grant.projectId, grant.scopes, grant.resource, now],
      );
      await tx.query('INSERT INTO oauth_codes (code_hash, grant_id, redirect_uri, code_challenge, expires_at) VALUES ($1, $2, $3, $4, $5)', [
        code.codeHash,
        grant.id,
        code.redirectUri,
        code.codeChallenge,
        code.expiresAt,
      ]);
    });
  }

  /** Marks the code used; a code used before answers `reused` with its grant (the caller revokes it). */
  async spendCode(codeHash: string, now: Date): Promise<Spent<IssuedCode>> {
    const { rows } = await this.db.query(
      `UPDATE oauth_codes c SET used_at = $2 FROM oauth_grants g
       WHERE c.code_hash = $1 AND c.used_at IS NULL AND g.id = c.grant_id
       RETURNING c.redirect_uri, c.code_challenge, c.expires_at, ${GRANT_COLUMNS}`,
      [codeHash, now],
    );
    const row = rows[0];
    if (row) {
      return { status: 'spent', value: { grant: grantOf(row), redirectUri: str(row, 'redirect_uri'), codeChallenge: str(row, 'code_challenge'), expiresAt: date(row, 'expires_at') } };
    }
    return this.reusedOrUnknown('SELECT grant_id FROM oauth_codes WHERE code_hash = $1', codeHash);
  }

  async storeTokens(grantId: string, access: StoredToken, refresh: StoredToken): Promise<void> {
    await this.db.query(`INSERT INTO oauth_tokens (token_hash, grant_id, kind, expires_at) VALUES ($1, $3, 'access', $4), ($2, $3, 'refresh', $5)`, [
      access.hash,
      refresh.hash,
      grantId,
      access.expiresAt,
      refresh.expiresAt,
    ]);
  }

  /** Spends a refresh token (rotation); one used before answers `reused`. Expired ones are unknown. */
  async spendRefreshToken(tokenHash: string, now: Date): Promise<Spent<OAuthGrant>> {
    const { rows } = await this.db.query(
      `UPDATE oauth_tokens t SET used_at = $2 FROM oauth_grants g
       WHERE t.token_hash = $1 AND t.kind = 'refresh' AND t.used_at IS NULL AND t.expires_at > $2 AND g.id = t.grant_id
       RETURNING ${GRANT_COLUMNS}`,
      [tokenHash, now],
    );
    const row = rows[0];
    if (row) return { status: 'spent', value: grantOf(row) };
    return this.reusedOrUnknown("SELECT grant_id FROM oauth_tokens WHERE token_hash = $1 AND kind = 'refresh' AND used_at IS NOT NULL", tokenHash);
  }

  /** The grant a token (access or refresh) belongs to, for revocation. */
  async grantOfToken(tokenHash: string): Promise<OAuthGrant | null> {
    const { rows } = await this.db.query(`SELECT ${GRANT_COLUMNS} FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id WHERE t.token_hash = $1`, [tokenHash]);
    return rows[0] ? grantOf(rows[0]) : null;
  }

  /** One page of connected grants, newest first; the person filter is part of the query. */
  async connections(filter: ConnectionFilter, page: PageRequest): Promise<Page<Connection>> {
    const where = new Conditions();
    where.add(`g.organization_id = ${where.param(filter.organizationId)}::uuid`);
    where.add('g.revoked_at IS NULL');
    where.add(`live.expires_at > ${where.param(filter.now)}::timestamptz`);
    if (filter.personId !== null) where.add(`g.person_id = ${where.param(filter.personId)}::uuid`);
    return selectPage(this.db, { columns: CONNECTION_COLUMNS, from: CONNECTION_FROM, where, order: CONNECTION_ORDER, page, toItem: connectionOf });
  }

  /** The organisation's grant with this id, revoked or not, or null. */
  async grantOf(organizationId: string, grantId: string): Promise<OAuthGrant | null> {
    const { rows } = await this.db.query(`SELECT ${GRANT_COLUMNS} FROM oauth_grants g WHERE g.id = $1 AND g.organization_id = $2`, [grantId, organizationId]);
    return rows[0] ? grantOf(rows[0]) : null;
  }

  async revokeGrant(grantId: string, now: Date): Promise<void> {
    await this.db.query('UPDATE oauth_grants SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL', [grantId, now]);
  }

  /**
   * Every grant to the organisation, whose account is being deleted, with its codes and tokens
   * (the foreign keys cascade), in `tx`. Clients stay: a client registered itself and belongs to
   * no organisation.
   */
  async eraseOrganization(tx: Queryable, organizationId: string): Promise<number> {
    const { rowCount } = await tx.query('DELETE FROM oauth_grants WHERE organization_id = $1', [organizationId]);
    return rowCount;
  }

  /**
   * Forgets codes and tokens expired a day ago. Until then a replayed refresh token is still
   * recognised as reused and revokes its grant; after, it is merely unknown (and refused all the same).
   */
  async pruneExpired(now: Date): Promise<void> {
    const before = new Date(now.getTime() - 86_400_000);
    await this.db.query('DELETE FROM oauth_codes WHERE expires_at < $1', [before]);
    await this.db.query('DELETE FROM oauth_tokens WHERE expires_at < $1', [before]);
  }

  async findAccessToken(tokenHash: string): Promise<ConnectorTokenRecord | null> {
    const { rows } = await this.db.query(
      `SELECT ${GRANT_COLUMNS}, t.expires_at, p.email FROM oauth_tokens t
       JOIN oauth_grants g ON g.id = t.grant_id JOIN people p ON p.id = g.person_id
       WHERE t.token_hash = $1 AND t.kind = 'access'`,
      [tokenHash],
    );
    const row = rows[0];
    if (!row) return null;
    const grant = grantOf(row);
    return {
      grantId: grant.id,
      clientId: grant.clientId,
      personId: grant.personId,
      email: str(row, 'email'),
      organizationId: grant.organizationId,
      projectId: grant.projectId,
      scopes: grant.scopes,
      audience: grant.resource,
      expiresAt: date(row, 'expires_at'),
      revokedAt: grant.revokedAt,
    };
  }

  private async reusedOrUnknown(sql: string, hash: string): Promise<Spent<never>> {
    const { rows } = await this.db.query(sql, [hash]);
    const row = rows[0];
    return row ? { status: 'reused', grantId: str(row, 'grant_id') } : { status: 'unknown' };
  }
}

function connectionOf(row: Row): Connection {
  return {
    id: str(row, 'id'),
    clientId: str(row, 'client_id'),
    clientName: strOrNull(row, 'client_name'),
    redirectUris: row['redirect_uris'] as string[],
    personId: str(row, 'person_id'),
    personEmail: str(row, 'email'),
    personName: str(row, 'name'),
    projectId: str(row, 'project_id'),
    scopes: row['scopes'] as string[],
    createdAt: date(row, 'created_at'),
    expiresAt: date(row, 'expires_at'),
  };
}

function grantOf(row: Row): OAuthGrant {
  return {
    id: str(row, 'id'),
    clientId: str(row, 'client_id'),
    personId: str(row, 'person_id'),
    organizationId: str(row, 'organization_id'),
    projectId: str(row, 'project_id'),
    scopes: row['scopes'] as string[],
    resource: str(row, 'resource'),
    revokedAt: dateOrNull(row, 'revoked_at'),
  };
}

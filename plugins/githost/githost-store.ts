import type { Queryable } from '../../core/ports/database.ts';

export type AllowListMode = 'repos' | 'orgs';

/** An organisation's git host settings; the defaults until an owner changes one. */
export interface GitHostSettings {
  membersMayConnect: boolean;
  restricted: boolean;
  mode: AllowListMode;
  repos: string[];
  orgs: string[];
}

export const DEFAULT_SETTINGS: GitHostSettings = { membersMayConnect: false, restricted: false, mode: 'repos', repos: [], orgs: [] };

export interface Installation {
  installationId: number;
  accountLogin: string;
  accountType: string;
  shared: boolean;
  createdAt: Date;
}

export interface PersonAuthorization {
  githubUserId: number;
  githubLogin: string;
  createdAt: Date;
}

interface SettingsRow {
  members_may_connect: boolean;
  restricted: boolean;
  mode: string;
  allowed_repos: string[];
  allowed_orgs: string[];
}

interface InstallationRow {
  installation_id: string | number;
  account_login: string;
  account_type: string;
  shared: boolean;
  created_at: Date;
}

const installationOf = (row: InstallationRow): Installation => ({
  installationId: Number(row.installation_id),
  accountLogin: row.account_login,
  accountType: row.account_type,
  shared: row.shared,
  createdAt: new Date(row.created_at),
});

/** The githost plugin's rows (githost-migrations.ts). */
export class GitHostStore {
  constructor(private readonly db: Queryable) {}

  async settings(organizationId: string, db: Queryable = this.db): Promise<GitHostSettings> {
    const { rows } = await db.query<SettingsRow>('SELECT * FROM githost_settings WHERE organization_id = $1', [organizationId]);
    const row = rows[0];
    if (!row) return { ...DEFAULT_SETTINGS };
    return {
      membersMayConnect: row.members_may_connect,
      restricted: row.restricted,
      mode: row.mode === 'orgs' ? 'orgs' : 'repos',
      repos: [...row.allowed_repos],
      orgs: [...row.allowed_orgs],
    };
  }

  /** Writes the whole setting; the caller read and merged it in the same transaction (`lockSettings`). */
  async saveSettings(db: Queryable, organizationId: string, settings: GitHostSettings, now: Date): Promise<void> {
    await db.query(
      `INSERT INTO githost_settings (organization_id, members_may_connect, restricted, mode, allowed_repos, allowed_orgs, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (organization_id) DO UPDATE SET members_may_connect = $2, restricted = $3, mode = $4,
         allowed_repos = $5, allowed_orgs = $6, updated_at = $7`,
      [organizationId, settings.membersMayConnect, settings.restricted, settings.mode, settings.repos, settings.orgs, now],
    );
  }

  /** Takes the organisation's settings row for the transaction (created with the defaults when absent), so writers queue. */
  async lockSettings(db: Queryable, organizationId: string, now: Date): Promise<GitHostSettings> {
    await db.query('INSERT INTO githost_settings (organization_id, updated_at) VALUES ($1, $2) ON CONFLICT (organization_id) DO NOTHING', [organizationId, now]);
    await db.query('SELECT 1 FROM githost_settings WHERE organization_id = $1 FOR UPDATE', [organizationId]);
    return this.settings(organizationId, db);
  }

  async installations(organizationId: string): Promise<Installation[]> {
    const { rows } = await this.db.query<InstallationRow>('SELECT * FROM githost_installations WHERE organization_id = $1 ORDER BY created_at, installation_id', [organizationId]);
    return rows.map(installationOf);
  }

  /** Organisations holding an installation (a push webhook names the installation). */
  async organizationsOf(installationId: number): Promise<string[]> {
    const { rows } = await this.db.query<{ organization_id: string }>('SELECT organization_id FROM githost_installations WHERE installation_id = $1 ORDER BY organization_id', [
      installationId,
    ]);
    return rows.map((row) => row.organization_id);
  }

  /** Which organisations hold it, and whether any of them shares it. */
  async holders(db: Queryable, installationId: number): Promise<Array<{ organizationId: string; shared: boolean }>> {
    const { rows } = await db.query<{ organization_id: string; shared: boolean }>('SELECT organization_id, shared FROM githost_installations WHERE installation_id = $1 FOR UPDATE', [
      installationId,
    ]);
    return rows.map((row) => ({ organizationId: row.organization_id, shared: row.shared }));
  }

  async addInstallation(
    db: Queryable,
    organizationId: string,
    installation: { installationId: number; accountLogin: string; accountType: string; claimedBy: string | null },
    now: Date,
  ): Promise<void> {
    await db.query(
      `INSERT INTO githost_installations (organization_id, installation_id, account_login, account_type, claimed_by, created_at)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (organization_id, installation_id) DO UPDATE SET account_login = $3, account_type = $4`,
      [organizationId, installation.installationId, installation.accountLogin, installation.accountType, installation.claimedBy, now],
    );
  }

  /** The installation was removed on GitHub: no organisation holds it any more. */
  async forgetInstallation(installationId: number): Promise<void> {
    await this.db.query('DELETE FROM githost_installations WHERE installation_id = $1', [installationId]);
  }

  /** Answers false when the organisation does not hold the installation. */
  async setShared(db: Queryable, organizationId: string, installationId: number, shared: boolean): Promise<boolean> {
    const { rowCount } = await db.query('UPDATE githost_installations SET shared = $3 WHERE organization_id = $1 AND installation_id = $2', [organizationId, installationId, shared]);
    return (rowCount ?? 0) > 0;
  }

  async authorization(organizationId: string, personId: string): Promise<PersonAuthorization | null> {
    const { rows } = await this.db.query<{ github_user_id: string | number; github_login: string; created_at: Date }>(
      'SELECT github_user_id, github_login, created_at FROM githost_authorizations WHERE organization_id = $1 AND person_id = $2',
      [organizationId, personId],
    );
    const row = rows[0];
    return row ? { githubUserId: Number(row.github_user_id), githubLogin: row.github_login, createdAt: new Date(row.created_at) } : null;
  }

  async saveAuthorization(db: Queryable, organizationId: string, personId: string, user: { id: number; login: string }, now: Date): Promise<void> {
    await db.query(
      `INSERT INTO githost_authorizations (organization_id, person_id, github_user_id, github_login, created_at) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (organization_id, person_id) DO UPDATE SET github_user_id = $3, github_login = $4, created_at = $5`,
      [organizationId, personId, user.id, user.login, now],
    );
  }

  async deleteAuthorization(db: Queryable, organizationId: string, personId: string): Promise<boolean> {
    const { rowCount } = await db.query('DELETE FROM githost_authorizations WHERE organization_id = $1 AND person_id = $2', [organizationId, personId]);
    return (rowCount ?? 0) > 0;
  }

  /** People of the organisation with a connected GitHub account (for erasure of their tokens). */
  async authorizedPeople(db: Queryable, organizationId: string): Promise<string[]> {
    const { rows } = await db.query<{ person_id: string }>('SELECT person_id FROM githost_authorizations WHERE organization_id = $1', [organizationId]);
    return rows.map((row) => row.person_id);
  }

  async saveState(organizationId: string, personId: string, stateHash: string, expiresAt: Date): Promise<void> {
    await this.db.query('DELETE FROM githost_oauth_states WHERE expires_at < $1', [new Date(expiresAt.getTime() - 3_600_000)]);
    await this.db.query('INSERT INTO githost_oauth_states (state_hash, organization_id, person_id, expires_at) VALUES ($1, $2, $3, $4)', [stateHash, organizationId, personId, expiresAt]);
  }

  /** Consumes a state: answers who asked, once, and only before it expired. */
  async takeState(db: Queryable, stateHash: string, now: Date): Promise<{ organizationId: string; personId: string } | null> {
    const { rows } = await db.query<{ organization_id: string; person_id: string; expires_at: Date }>(
      'DELETE FROM githost_oauth_states WHERE state_hash = $1 RETURNING organization_id, person_id, expires_at',
      [stateHash],
    );
    const row = rows[0];
    if (!row || new Date(row.expires_at).getTime() <= now.getTime()) return null;
    return { organizationId: row.organization_id, personId: row.person_id };
  }
}

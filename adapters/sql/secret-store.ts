import type { Queryable } from '../../core/ports/database.ts';
import type { SealedSecret, SecretCursor, SecretOwner, SecretStore, StoredSecret } from '../../core/ports/secrets.ts';
import { bytesOf, type Row } from './rows.ts';

function secretOf(row: Row): StoredSecret {
  return {
    owner: { kind: row.owner_kind as string, id: row.owner_id as string },
    name: row.name as string,
    version: row.version as number,
    sealed: { keyId: row.key_id as string, nonce: bytesOf(row.nonce), ciphertext: bytesOf(row.ciphertext), authTag: bytesOf(row.auth_tag) },
    createdAt: row.created_at as Date,
    updatedAt: row.updated_at as Date,
  };
}

const SEALED_SET = 'key_id = $4, nonce = $5, ciphertext = $6, auth_tag = $7';

/** The `secrets` table (core-secrets migrations): one row per owner and name, ciphertext only. */
export class SqlSecretStore implements SecretStore {
  constructor(private readonly db: Queryable) {}

  async get(owner: SecretOwner, name: string): Promise<StoredSecret | null> {
    const { rows } = await this.db.query('SELECT * FROM secrets WHERE owner_kind = $1 AND owner_id = $2 AND name = $3', [owner.kind, owner.id, name]);
    return rows[0] === undefined ? null : secretOf(rows[0]);
  }

  async put(owner: SecretOwner, name: string, sealed: SealedSecret, expectedVersion?: number): Promise<number | null> {
    const params: unknown[] = [owner.kind, owner.id, name, sealed.keyId, sealed.nonce, sealed.ciphertext, sealed.authTag];
    const insert = 'INSERT INTO secrets (owner_kind, owner_id, name, version, key_id, nonce, ciphertext, auth_tag) VALUES ($1, $2, $3, 1, $4, $5, $6, $7)';
    let sql: string;
    if (expectedVersion === undefined) {
      sql = `${insert} ON CONFLICT (owner_kind, owner_id, name) DO UPDATE SET version = secrets.version + 1, ${SEALED_SET}, updated_at = now() RETURNING version`;
    } else if (expectedVersion === 0) {
      sql = `${insert} ON CONFLICT (owner_kind, owner_id, name) DO NOTHING RETURNING version`;
    } else {
      params.push(expectedVersion);
      sql = `UPDATE secrets SET version = version + 1, ${SEALED_SET}, updated_at = now() WHERE owner_kind = $1 AND owner_id = $2 AND name = $3 AND version = $8 RETURNING version`;
    }
    const { rows } = await this.db.query<{ version: number }>(sql, params);
    return rows[0]?.version ?? null;
  }

  async delete(owner: SecretOwner, name: string): Promise<boolean> {
    const { rowCount } = await this.db.query('DELETE FROM secrets WHERE owner_kind = $1 AND owner_id = $2 AND name = $3', [owner.kind, owner.id, name]);
    return rowCount > 0;
  }

  async deleteOwners(kind: string, ids: readonly string[]): Promise<number> {
    if (ids.length === 0) return 0;
    const { rowCount } = await this.db.query('DELETE FROM secrets WHERE owner_kind = $1 AND owner_id = ANY($2::text[])', [kind, [...ids]]);
    return rowCount;
  }

  async list(owner: SecretOwner): Promise<Array<{ name: string; version: number; updatedAt: Date }>> {
    const { rows } = await this.db.query<{ name: string; version: number; updated_at: Date }>(
      'SELECT name, version, updated_at FROM secrets WHERE owner_kind = $1 AND owner_id = $2 ORDER BY name',
      [owner.kind, owner.id],
    );
    return rows.map((row) => ({ name: row.name, version: row.version, updatedAt: row.updated_at }));
  }

  async listNotUnderKey(keyId: string, options: { after?: SecretCursor; limit: number }): Promise<StoredSecret[]> {
    const after = options.after;
    const { rows } = await this.db.query(
      `SELECT * FROM secrets WHERE key_id <> $1 ${after ? 'AND (owner_kind, owner_id, name) > ($3, $4, $5)' : ''}
       ORDER BY owner_kind, owner_id, name LIMIT $2`,
      after ? [keyId, options.limit, after.owner.kind, after.owner.id, after.name] : [keyId, options.limit],
    );
    return rows.map(secretOf);
  }

  async reseal(owner: SecretOwner, name: string, version: number, sealed: SealedSecret): Promise<boolean> {
    const { rowCount } = await this.db.query(`UPDATE secrets SET ${SEALED_SET} WHERE owner_kind = $1 AND owner_id = $2 AND name = $3 AND version = $8`, [
      owner.kind,
      owner.id,
      name,
      sealed.keyId,
      sealed.nonce,
      sealed.ciphertext,
      sealed.authTag,
      version,
    ]);
    return rowCount > 0;
  }
}

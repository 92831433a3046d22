import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../core/ports/database.ts';
import type { ApiKey, ApiKeyPatch, ApiKeyStore, CredentialLookup, KeyActor, KeyAuthRecord, NewApiKey, Person, Session, SessionAuthRecord, SessionStore } from '../../core/ports/identity.ts';
import type { Scope } from '../../core/identity/scopes.ts';
import type { PageRequest } from '../../core/vocabulary/pagination.ts';
import { Conditions } from './conditions.ts';
import { keyTree, MAX_KEY_CHAIN } from './key-tree.ts';
import { type KeysetOrder, selectPage } from './keyset.ts';
import { bool, date, dateOrNull, rateLimitsOf, spendCapOf, str, strOrNull, strings, type Row } from './rows.ts';

const toApiKey = (row: Row): ApiKey => {
  return {
    id: str(row, 'id'),
    organizationId: str(row, 'organization_id'),
    projectId: str(row, 'project_id'),
    appId: strOrNull(row, 'app_id'),
    name: str(row, 'name'),
    hint: str(row, 'hint'),
    scopes: (strings(row, 'scopes') ?? []) as Scope[],
    modelAllowList: strings(row, 'model_allow_list'),
    disabled: bool(row, 'disabled'),
    expiresAt: dateOrNull(row, 'expires_at'),
    spendCap: spendCapOf(row),
    rateLimits: rateLimitsOf(row),
    createdAt: date(row, 'created_at'),
    updatedAt: date(row, 'updated_at'),
    revokedAt: dateOrNull(row, 'revoked_at'),
    lastUsedAt: dateOrNull(row, 'last_used_at'),
    createdByPersonId: strOrNull(row, 'created_by_person_id'),
    createdByKeyId: strOrNull(row, 'created_by_key_id'),
    disabledBy: disabledByOf(row),
  };
};

function disabledByOf(row: Row): KeyActor | null {
  const personId = strOrNull(row, 'disabled_by_person_id');
  if (personId) return { kind: 'person', id: personId };
  const keyId = strOrNull(row, 'disabled_by_key_id');
  return keyId ? { kind: 'key', id: keyId } : null;
}

const KEY_ORDER: KeysetOrder = { at: 'created_at', id: 'id', idType: 'uuid' };

export class SqlApiKeyStore implements ApiKeyStore {
  constructor(private readonly db: Queryable) {}

  async create(input: NewApiKey): Promise<ApiKey> {
    const { rows } = await this.db.query(
      `INSERT INTO api_keys (id, organization_id, project_id, app_id, name, token_hash, hint, scopes, model_allow_list,
         expires_at, spend_cap_micros, spend_cap_period, spend_cap_mode, created_by_person_id, created_by_key_id,
         rpm_limit, tpm_limit, concurrency_limit)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) RETURNING *`,
      [
        randomUUID(),
        input.organizationId,
        input.projectId,
        input.appId ?? null,
        input.name,
        input.tokenHash,
        input.hint,
        input.scopes,
        input.modelAllowList,
        input.expiresAt,
        input.spendCap?.limitMicros ?? null,
        input.spendCap?.period ?? null,
        input.spendCap?.mode ?? null,
        input.createdByPersonId,
        input.createdByKeyId,
        input.rateLimits?.requestsPerMinute ?? null,
        input.rateLimits?.tokensPerMinute ?? null,
        input.rateLimits?.concurrency ?? null,
      ],
    );
    return toApiKey(rows[0]!);
  }

  async get(organizationId: string, id: string) {
    const { rows } = await this.db.query('SELECT * FROM api_keys WHERE organization_id = $1 AND id = $2', [organizationId, id]);
    return rows[0] ? toApiKey(rows[0]) : null;
  }

  async list(organizationId: string, filter: { projectId?: string } = {}) {
    const { rows } = await this.db.query(
      `SELECT * FROM api_keys WHERE organization_id = $1 AND ($2::uuid IS NULL OR project_id = $2)
       ORDER BY created_at DESC, id`,
      [organizationId, filter.projectId ?? null],
    );
    return rows.map(toApiKey);
  }

  async page(organizationId: string, filter: { projectId?: string; projectIds: readonly string[] | null }, page: PageRequest) {
    const where = new Conditions();
    where.add(`organization_id = ${where.param(organizationId)}::uuid`);
    if (filter.projectId !== undefined) where.add(`project_id = ${where.param(filter.projectId)}::uuid`);
    if (filter.projectIds !== null) where.add(`project_id = ANY(${where.param([...filter.projectIds])}::uuid[])`);
    return selectPage(this.db, { columns: '*', from: 'api_keys', where, order: KEY_ORDER, page, toItem: toApiKey });
  }

  async update(organizationId: string, id: string, patch: ApiKeyPatch) {
    // Nullable fields carry a "was it sent" flag so that null can mean "clear it".
    const { rows } = await this.db.query(
      `UPDATE api_keys SET
         name = COALESCE($3, name),
         project_id = COALESCE($4, project_id),
         scopes = COALESCE($5, scopes),
         model_allow_list = CASE WHEN $6::boolean THEN $7::text[] ELSE model_allow_list END,
         disabled = COALESCE($8, disabled),
         disabled_by_person_id = CASE WHEN $8::boolean IS NULL THEN disabled_by_person_id WHEN $8 THEN $19::uuid END,
         disabled_by_key_id = CASE WHEN $8::boolean IS NULL THEN disabled_by_key_id WHEN $8 THEN $20::uuid END,
         expires_at = CASE WHEN $9::boolean THEN $10::timestamptz ELSE expires_at END,
         spend_cap_micros = CASE WHEN $11::boolean THEN $12::bigint ELSE spend_cap_micros END,
         spend_cap_period = CASE WHEN $11::boolean THEN $13::text ELSE spend_cap_period END,
         spend_cap_mode = CASE WHEN $11::boolean THEN $14::text ELSE spend_cap_mode END,
         rpm_limit = CASE WHEN $15::boolean THEN $16::integer ELSE rpm_limit END,
         tpm_limit = CASE WHEN $15::boolean THEN $17::integer ELSE tpm_limit END,
         concurrency_limit = CASE WHEN $15::boolean THEN $18::integer ELSE concurrency_limit END,
         updated_at = now()
       WHERE organization_id = $1 AND id = $2 RETURNING *`,
      [
        organizationId,
        id,
        patch.name ?? null,
        patch.projectId ?? null,
        patch.scopes ?? null,
        patch.modelAllowList !== undefined,
        patch.modelAllowList ?? null,
        patch.disabled ?? null,
        patch.expiresAt !== undefined,
        patch.expiresAt ?? null,
        patch.spendCap !== undefined,
        patch.spendCap?.limitMicros ?? null,
        patch.spendCap?.period ?? null,
        patch.spendCap?.mode ?? null,
        patch.rateLimits !== undefined,
        patch.rateLimits?.requestsPerMinute ?? null,
        patch.rateLimits?.tokensPerMinute ?? null,
        patch.rateLimits?.concurrency ?? null,
        patch.disabledBy?.kind === 'person' ? patch.disabledBy.id : null,
        patch.disabledBy?.kind === 'key' ? patch.disabledBy.id : null,
      ],
    );
    return rows[0] ? toApiKey(rows[0]) : null;
  }

  async revoke(organizationId: string, id: string) {
    // The keys it made go with it, in the same statement: none can outlive its maker.
    const { rows } = await this.db.query(
      `WITH RECURSIVE ${keyTree('$2')}
       UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()), updated_at = now()
       WHERE organization_id = $1 AND id IN (SELECT id FROM key_tree) RETURNING *`,
      [organizationId, id],
    );
    const key = rows.find((row) => str(row, 'id') === id);
    return key ? toApiKey(key) : null;
  }

  async touch(usedAt: ReadonlyMap<string, Date>) {
    if (usedAt.size === 0) return;
    await this.db.query(
      `UPDATE api_keys k SET last_used_at = GREATEST(COALESCE(k.last_used_at, u.at), u.at)
       FROM unnest($1::uuid[], $2::timestamptz[]) AS u(id, at) WHERE k.id = u.id`,
      [[...usedAt.keys()], [...usedAt.values()].map((at) => at.toISOString())],
    );
  }

  async replaceSecret(organizationId: string, id: string, secret: { tokenHash: string; hint: string; retiredUntil: Date | null; now: Date }) {
    // The row lock orders two recreates of one key: the second sees (and retires) the first one's secret.
    const current = await this.db.query('SELECT token_hash FROM api_keys WHERE organization_id = $1 AND id = $2 FOR UPDATE', [organizationId, id]);
    const replaced = current.rows[0];
    if (!replaced) return null;
    const until = secret.retiredUntil && secret.retiredUntil > secret.now ? secret.retiredUntil : null;
    // No secret an earlier recreate retired outlives the overlap asked now; those past it go.
    await this.db.query('UPDATE api_key_retired_secrets SET expires_at = LEAST(expires_at, $2) WHERE key_id = $1', [id, until ?? secret.now]);
    await this.db.query('DELETE FROM api_key_retired_secrets WHERE key_id = $1 AND expires_at <= $2', [id, secret.now]);
    if (until) {
      await this.db.query('INSERT INTO api_key_retired_secrets (token_hash, key_id, expires_at) VALUES ($1, $2, $3)', [str(replaced, 'token_hash'), id, until]);
    }
    const { rows } = await this.db.query('UPDATE api_keys SET token_hash = $3, hint = $4, updated_at = now() WHERE organization_id = $1 AND id = $2 RETURNING *', [
      organizationId,
      id,
      secret.tokenHash,
      secret.hint,
    ]);
    return rows[0] ? toApiKey(rows[0]) : null;
  }

  async delete(organizationId: string, id: string) {
    // Revoked first: a key whose maker is gone would have no maker left to bound it.
    if (!(await this.revoke(organizationId, id))) return false;
    const { rowCount } = await this.db.query('DELETE FROM api_keys WHERE organization_id = $1 AND id = $2', [organizationId, id]);
    return rowCount > 0;
  }
}

const toSession = (row: Row): Session => ({
  id: str(row, 'id'),
  personId: str(row, 'person_id'),
  createdAt: date(row, 'created_at'),
  expiresAt: date(row, 'expires_at'),
  revokedAt: dateOrNull(row, 'revoked_at'),
  csrfTokenHash: strOrNull(row, 'csrf_token_hash'),
});

export class SqlSessionStore implements SessionStore {
  constructor(private readonly db: Queryable) {}

  async create(input: { personId: string; tokenHash: string; expiresAt: Date; csrfTokenHash?: string | null }) {
    const { rows } = await this.db.query('INSERT INTO sessions (id, person_id, token_hash, expires_at, csrf_token_hash) VALUES ($1, $2, $3, $4, $5) RETURNING *', [
      randomUUID(),
      input.personId,
      input.tokenHash,
      input.expiresAt,
      input.csrfTokenHash ?? null,
    ]);
    return toSession(rows[0]!);
  }

  async findByTokenHash(tokenHash: string) {
    const { rows } = await this.db.query('SELECT * FROM sessions WHERE token_hash = $1', [tokenHash]);
    return rows[0] ? toSession(rows[0]) : null;
  }

  async revoke(id: string) {
    const { rowCount } = await this.db.query('UPDATE sessions SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1', [id]);
    return rowCount > 0;
  }

  async revokeAllForPerson(personId: string) {
    const { rows } = await this.db.query('UPDATE sessions SET revoked_at = now() WHERE person_id = $1 AND revoked_at IS NULL RETURNING id', [personId]);
    return rows.map((row) => str(row, 'id'));
  }
}

/**
 * The key a secret names: its current one, or one a recreate replaced (with the end of its overlap).
 * Two index lookups; a key has one current secret, so at most one row.
 */
const BY_SECRET = `(SELECT id AS key_id, NULL::timestamptz AS secret_expires_at FROM api_keys WHERE token_hash = $1
  UNION ALL SELECT key_id, expires_at FROM api_key_retired_secrets WHERE token_hash = $1)`;
const BY_ID = '(SELECT $1::uuid AS key_id, NULL::timestamptz AS secret_expires_at)';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export class SqlCredentialLookup implements CredentialLookup {
  constructor(private readonly db: Queryable) {}

  findKeyByTokenHash(tokenHash: string): Promise<KeyAuthRecord | null> {
    return this.findKeyFrom(BY_SECRET, tokenHash);
  }

  findKeyById(keyId: string): Promise<KeyAuthRecord | null> {
    // Not a uuid: no such key (the column's type would otherwise make it a query error).
    if (!UUID.test(keyId)) return Promise.resolve(null);
    return this.findKeyFrom(BY_ID, keyId);
  }

  /** `found`: BY_SECRET or BY_ID, a derived table of the key's id and when the secret stops working. */
  private async findKeyFrom(found: string, value: string): Promise<KeyAuthRecord | null> {
    const { rows } = await this.db.query(
      `SELECT k.*, o.status AS organization_status, p.model_allow_list AS project_model_allow_list, f.secret_expires_at
       FROM ${found} f JOIN api_keys k ON k.id = f.key_id
       JOIN organizations o ON o.id = k.organization_id JOIN projects p ON p.id = k.project_id`,
      [value],
    );
    const row = rows[0];
    if (!row) return null;
    const key = toApiKey(row);
    return {
      key,
      // Only a key made by a key pays for reading its makers, and only when its cache entry is loaded.
      ancestors: key.createdByKeyId ? await this.makersOf(key) : [],
      organizationStatus: str(row, 'organization_status') as KeyAuthRecord['organizationStatus'],
      projectModelAllowList: strings(row, 'project_model_allow_list'),
      secretExpiresAt: dateOrNull(row, 'secret_expires_at'),
    };
  }

  /** The keys that made `key`, nearest first, in one recursive query. */
  private async makersOf(key: ApiKey): Promise<ApiKey[]> {
    const { rows } = await this.db.query(
      `WITH RECURSIVE chain AS (
         SELECT m.*, 1 AS depth FROM api_keys m WHERE m.id = $1 AND m.organization_id = $2
         UNION ALL
         SELECT m.*, c.depth + 1 FROM chain c JOIN api_keys m ON m.id = c.created_by_key_id AND m.organization_id = c.organization_id
         WHERE c.depth < ${MAX_KEY_CHAIN}
       )
       SELECT * FROM chain ORDER BY depth`,
      [key.createdByKeyId, key.organizationId],
    );
    return rows.map(toApiKey);
  }

  async findSessionByTokenHash(tokenHash: string): Promise<SessionAuthRecord | null> {
    const { rows } = await this.db.query(
      `SELECT s.*, p.email, p.name, p.default_organization_id, p.created_at AS person_created_at
       FROM sessions s JOIN people p ON p.id = s.person_id WHERE s.token_hash = $1`,
      [tokenHash],
    );
    const row = rows[0];
    if (!row) return null;
    const person: Person = {
      id: str(row, 'person_id'),
      email: str(row, 'email'),
      name: str(row, 'name'),
      defaultOrganizationId: strOrNull(row, 'default_organization_id'),
      createdAt: date(row, 'person_created_at'),
    };
    return { session: toSession(row), person };
  }
}

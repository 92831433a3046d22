import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../core/ports/database.ts';
import type {
  ErasedContents,
  Membership,
  MembershipStore,
  Organization,
  OrganizationMember,
  OrganizationStore,
  PasswordTokenStore,
  Person,
  PersonStore,
  SpendCap,
} from '../../core/ports/identity.ts';
import type { OrgRole } from '../../core/identity/scopes.ts';
import type { PageRequest } from '../../core/vocabulary/pagination.ts';
import { Conditions } from './conditions.ts';
import { type KeysetOrder, selectPage } from './keyset.ts';
import { bool, date, spendCapOf, str, strOrNull, type Row } from './rows.ts';

const toOrganization = (row: Row): Organization => ({
  id: str(row, 'id'),
  name: str(row, 'name'),
  status: str(row, 'status') as Organization['status'],
  requestLogging: bool(row, 'request_logging'),
  spendCap: spendCapOf(row),
  createdAt: date(row, 'created_at'),
});

export class SqlOrganizationStore implements OrganizationStore {
  constructor(private readonly db: Queryable) {}

  async create(input: { name: string }): Promise<Organization> {
    const { rows } = await this.db.query('INSERT INTO organizations (id, name) VALUES ($1, $2) RETURNING *', [randomUUID(), input.name]);
    return toOrganization(rows[0]!);
  }

  async get(id: string): Promise<Organization | null> {
    const { rows } = await this.db.query('SELECT * FROM organizations WHERE id = $1', [id]);
    return rows[0] ? toOrganization(rows[0]) : null;
  }

  async update(id: string, patch: { name?: string; status?: Organization['status']; requestLogging?: boolean; spendCap?: SpendCap | null }) {
    const { rows } = await this.db.query(
      `UPDATE organizations SET name = COALESCE($2, name), status = COALESCE($3, status),
         request_logging = COALESCE($4, request_logging),
         spend_cap_micros = CASE WHEN $5::boolean THEN $6::bigint ELSE spend_cap_micros END,
         spend_cap_period = CASE WHEN $5::boolean THEN $7::text ELSE spend_cap_period END,
         spend_cap_mode = CASE WHEN $5::boolean THEN $8::text ELSE spend_cap_mode END
       WHERE id = $1 RETURNING *`,
      [
        id,
        patch.name ?? null,
        patch.status ?? null,
        patch.requestLogging ?? null,
        patch.spendCap !== undefined,
        patch.spendCap?.limitMicros ?? null,
        patch.spendCap?.period ?? null,
        patch.spendCap?.mode ?? null,
      ],
    );
    return rows[0] ? toOrganization(rows[0]) : null;
  }

  async count(): Promise<number> {
    const { rows } = await this.db.query<{ n: number }>('SELECT count(*)::int AS n FROM organizations');
    return rows[0]?.n ?? 0;
  }

  /** Several statements: run it in a transaction (the account deletion's). Keys go before their projects, which they reference. */
  async eraseContents(id: string): Promise<ErasedContents> {
    await this.db.query('UPDATE people SET default_organization_id = NULL WHERE default_organization_id = $1', [id]);
    const keys = await this.db.query('DELETE FROM api_keys WHERE organization_id = $1', [id]);
    await this.db.query('DELETE FROM project_members WHERE project_id IN (SELECT id FROM projects WHERE organization_id = $1)', [id]);
    const projects = await this.db.query('DELETE FROM projects WHERE organization_id = $1', [id]);
    const memberships = await this.db.query<{ person_id: string }>('DELETE FROM memberships WHERE organization_id = $1 RETURNING person_id', [id]);
    // People who still belong to another organisation keep their account there.
    const people = await this.db.query('DELETE FROM people p WHERE p.id = ANY($1::uuid[]) AND NOT EXISTS (SELECT 1 FROM memberships m WHERE m.person_id = p.id)', [
      memberships.rows.map((row) => row.person_id),
    ]);
    return { keys: keys.rowCount, projects: projects.rowCount, memberships: memberships.rowCount, people: people.rowCount };
  }
}

const toPerson = (row: Row): Person => ({
  id: str(row, 'id'),
  email: str(row, 'email'),
  name: str(row, 'name'),
  defaultOrganizationId: strOrNull(row, 'default_organization_id'),
  createdAt: date(row, 'created_at'),
});

export class SqlPersonStore implements PersonStore {
  constructor(private readonly db: Queryable) {}

  async create(input: { email: string; name: string }): Promise<Person> {
    const { rows } = await this.db.query('INSERT INTO people (id, email, name) VALUES ($1, $2, $3) RETURNING *', [randomUUID(), input.email, input.name]);
    return toPerson(rows[0]!);
  }

  async get(id: string): Promise<Person | null> {
    const { rows } = await this.db.query('SELECT * FROM people WHERE id = $1', [id]);
    return rows[0] ? toPerson(rows[0]) : null;
  }

  async getByEmail(email: string): Promise<Person | null> {
    const { rows } = await this.db.query('SELECT * FROM people WHERE lower(email) = lower($1)', [email]);
    return rows[0] ? toPerson(rows[0]) : null;
  }

  async update(personId: string, patch: { name?: string }): Promise<Person | null> {
    const { rows } = await this.db.query('UPDATE people SET name = COALESCE($2, name) WHERE id = $1 RETURNING *', [personId, patch.name ?? null]);
    return rows[0] ? toPerson(rows[0]) : null;
  }

  async setDefaultOrganization(personId: string, organizationId: string | null): Promise<void> {
    await this.db.query('UPDATE people SET default_organization_id = $2 WHERE id = $1', [personId, organizationId]);
  }

  async passwordHashOf(personId: string): Promise<string | null> {
    const { rows } = await this.db.query('SELECT password_hash FROM people WHERE id = $1', [personId]);
    return rows[0] ? strOrNull(rows[0], 'password_hash') : null;
  }

  async setPasswordHash(personId: string, passwordHash: string): Promise<void> {
    await this.db.query('UPDATE people SET password_hash = $2 WHERE id = $1', [personId, passwordHash]);
  }

  async replacePasswordHash(personId: string, expected: string, passwordHash: string): Promise<boolean> {
    const { rowCount } = await this.db.query('UPDATE people SET password_hash = $3 WHERE id = $1 AND password_hash = $2', [personId, expected, passwordHash]);
    return rowCount > 0;
  }
}

export class SqlPasswordTokenStore implements PasswordTokenStore {
  constructor(private readonly db: Queryable) {}

  async create(input: { personId: string; tokenHash: string; createdAt: Date; expiresAt: Date }): Promise<void> {
    await this.db.query('INSERT INTO password_tokens (token_hash, person_id, created_at, expires_at) VALUES ($1, $2, $3, $4)', [
      input.tokenHash,
      input.personId,
      input.createdAt,
      input.expiresAt,
    ]);
  }

  async consume(tokenHash: string, now: Date): Promise<string | null> {
    const { rows } = await this.db.query('UPDATE password_tokens SET used_at = $2 WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2 RETURNING person_id', [tokenHash, now]);
    return rows[0] ? str(rows[0], 'person_id') : null;
  }
}

const MEMBERSHIP_FROM = 'memberships m JOIN organizations o ON o.id = m.organization_id';
const MEMBERSHIP_SELECT = `SELECT m.*, o.name AS organization_name, o.status AS organization_status FROM ${MEMBERSHIP_FROM}`;
/** A person belongs to an organisation once, so the organisation id breaks ties among a person's memberships. */
const MEMBERSHIP_ORDER: KeysetOrder = { at: 'm.created_at', id: 'm.organization_id', idType: 'uuid' };
/** And the person id among an organisation's members. */
const MEMBER_ORDER: KeysetOrder = { at: 'm.created_at', id: 'm.person_id', idType: 'uuid' };

const toMembership = (row: Row): Membership => ({
  organizationId: str(row, 'organization_id'),
  organizationName: str(row, 'organization_name'),
  organizationStatus: str(row, 'organization_status') as Membership['organizationStatus'],
  personId: str(row, 'person_id'),
  role: str(row, 'role') as OrgRole,
  status: str(row, 'status') as Membership['status'],
  createdAt: date(row, 'created_at'),
});

const toOrganizationMember = (row: Row): OrganizationMember => ({ ...toMembership(row), email: str(row, 'email'), name: str(row, 'name') });

export class SqlMembershipStore implements MembershipStore {
  constructor(private readonly db: Queryable) {}

  async add(input: { organizationId: string; personId: string; role: OrgRole }): Promise<Membership> {
    await this.db.query('INSERT INTO memberships (organization_id, person_id, role) VALUES ($1, $2, $3)', [input.organizationId, input.personId, input.role]);
    return (await this.get(input.organizationId, input.personId))!;
  }

  async get(organizationId: string, personId: string): Promise<Membership | null> {
    const { rows } = await this.db.query(`${MEMBERSHIP_SELECT} WHERE m.organization_id = $1 AND m.person_id = $2`, [organizationId, personId]);
    return rows[0] ? toMembership(rows[0]) : null;
  }

  async listForPerson(personId: string): Promise<Membership[]> {
    const { rows } = await this.db.query(`${MEMBERSHIP_SELECT} WHERE m.person_id = $1 ORDER BY m.created_at, o.name`, [personId]);
    return rows.map(toMembership);
  }

  async pageForPerson(personId: string, page: PageRequest) {
    const where = new Conditions();
    where.add(`m.person_id = ${where.param(personId)}::uuid`);
    return selectPage(this.db, {
      columns: 'm.*, o.name AS organization_name, o.status AS organization_status',
      from: MEMBERSHIP_FROM,
      where,
      order: MEMBERSHIP_ORDER,
      page,
      toItem: toMembership,
    });
  }

  async listForOrganization(organizationId: string): Promise<Membership[]> {
    const { rows } = await this.db.query(`${MEMBERSHIP_SELECT} WHERE m.organization_id = $1 ORDER BY m.created_at`, [organizationId]);
    return rows.map(toMembership);
  }

  async update(organizationId: string, personId: string, patch: { role?: OrgRole; status?: Membership['status'] }) {
    const { rowCount } = await this.db.query('UPDATE memberships SET role = COALESCE($3, role), status = COALESCE($4, status) WHERE organization_id = $1 AND person_id = $2', [
      organizationId,
      personId,
      patch.role ?? null,
      patch.status ?? null,
    ]);
    return rowCount ? this.get(organizationId, personId) : null;
  }

  async pageForOrganization(organizationId: string, page: PageRequest) {
    const where = new Conditions();
    where.add(`m.organization_id = ${where.param(organizationId)}::uuid`);
    return selectPage(this.db, {
      columns: 'm.*, o.name AS organization_name, o.status AS organization_status, p.email, p.name',
      from: `${MEMBERSHIP_FROM} JOIN people p ON p.id = m.person_id`,
      where,
      order: MEMBER_ORDER,
      page,
      toItem: toOrganizationMember,
    });
  }

  async remove(organizationId: string, personId: string): Promise<Membership | null> {
    const membership = await this.get(organizationId, personId);
    if (!membership) return null;
    const { rowCount } = await this.db.query('DELETE FROM memberships WHERE organization_id = $1 AND person_id = $2', [organizationId, personId]);
    if (rowCount === 0) return null;
    await this.db.query('UPDATE people SET default_organization_id = NULL WHERE id = $1 AND default_organization_id = $2', [personId, organizationId]);
    return membership;
  }

  async lockOwners(organizationId: string): Promise<string[]> {
    // Ordered, so two transactions lock the same rows in the same order and cannot deadlock.
    const { rows } = await this.db.query("SELECT person_id FROM memberships WHERE organization_id = $1 AND role = 'owner' AND status = 'active' ORDER BY person_id FOR UPDATE", [
      organizationId,
    ]);
    return rows.map((row) => str(row, 'person_id'));
  }
}

import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../core/ports/database.ts';
import type { Project, ProjectMember, ProjectMemberStore, ProjectRole, ProjectStore, SpendCap } from '../../core/ports/identity.ts';
import type { PageRequest } from '../../core/vocabulary/pagination.ts';
import { Conditions } from './conditions.ts';
import { type KeysetOrder, selectPage } from './keyset.ts';
import { bool, date, spendCapOf, str, strings, type Row } from './rows.ts';

const PROJECT_ORDER: KeysetOrder = { at: 'created_at', id: 'id', idType: 'uuid' };
/** A person is a member of a project once, so the person id breaks ties within one project. */
const MEMBER_ORDER: KeysetOrder = { at: 'pm.created_at', id: 'pm.person_id', idType: 'uuid' };

const toProject = (row: Row): Project => ({
  id: str(row, 'id'),
  organizationId: str(row, 'organization_id'),
  name: str(row, 'name'),
  isDefault: bool(row, 'is_default'),
  modelAllowList: strings(row, 'model_allow_list'),
  spendCap: spendCapOf(row),
  createdAt: date(row, 'created_at'),
  updatedAt: date(row, 'updated_at'),
});

export class SqlProjectStore implements ProjectStore {
  constructor(private readonly db: Queryable) {}

  async create(input: { organizationId: string; name: string; isDefault?: boolean; modelAllowList?: string[] | null }) {
    const { rows } = await this.db.query('INSERT INTO projects (id, organization_id, name, is_default, model_allow_list) VALUES ($1, $2, $3, $4, $5) RETURNING *', [
      randomUUID(),
      input.organizationId,
      input.name,
      input.isDefault ?? false,
      input.modelAllowList ?? null,
    ]);
    return toProject(rows[0]!);
  }

  async get(organizationId: string, id: string) {
    const { rows } = await this.db.query('SELECT * FROM projects WHERE organization_id = $1 AND id = $2', [organizationId, id]);
    return rows[0] ? toProject(rows[0]) : null;
  }

  async list(organizationId: string) {
    const { rows } = await this.db.query('SELECT * FROM projects WHERE organization_id = $1 ORDER BY is_default DESC, created_at, id', [organizationId]);
    return rows.map(toProject);
  }

  async page(organizationId: string, filter: { projectIds: readonly string[] | null }, page: PageRequest) {
    const where = new Conditions();
    where.add(`organization_id = ${where.param(organizationId)}::uuid`);
    if (filter.projectIds !== null) where.add(`id = ANY(${where.param([...filter.projectIds])}::uuid[])`);
    return selectPage(this.db, { columns: '*', from: 'projects', where, order: PROJECT_ORDER, page, toItem: toProject });
  }

  async update(organizationId: string, id: string, patch: { name?: string; modelAllowList?: string[] | null; spendCap?: SpendCap | null }) {
    const { rows } = await this.db.query(
      `UPDATE projects SET name = COALESCE($3, name),
         model_allow_list = CASE WHEN $4::boolean THEN $5::text[] ELSE model_allow_list END,
         spend_cap_micros = CASE WHEN $6::boolean THEN $7::bigint ELSE spend_cap_micros END,
         spend_cap_period = CASE WHEN $6::boolean THEN $8::text ELSE spend_cap_period END,
         spend_cap_mode = CASE WHEN $6::boolean THEN $9::text ELSE spend_cap_mode END,
         updated_at = now()
       WHERE organization_id = $1 AND id = $2 RETURNING *`,
      [
        organizationId,
        id,
        patch.name ?? null,
        patch.modelAllowList !== undefined,
        patch.modelAllowList ?? null,
        patch.spendCap !== undefined,
        patch.spendCap?.limitMicros ?? null,
        patch.spendCap?.period ?? null,
        patch.spendCap?.mode ?? null,
      ],
    );
    return rows[0] ? toProject(rows[0]) : null;
  }

  async delete(organizationId: string, id: string) {
    const { rowCount } = await this.db.query('DELETE FROM projects WHERE organization_id = $1 AND id = $2', [organizationId, id]);
    return rowCount > 0;
  }

  async getDefault(organizationId: string) {
    const { rows } = await this.db.query('SELECT * FROM projects WHERE organization_id = $1 AND is_default', [organizationId]);
    return rows[0] ? toProject(rows[0]) : null;
  }
}

const toMember = (row: Row): ProjectMember => ({
  projectId: str(row, 'project_id'),
  personId: str(row, 'person_id'),
  email: str(row, 'email'),
  name: str(row, 'name'),
  role: str(row, 'role') as ProjectRole,
  createdAt: date(row, 'created_at'),
});

const MEMBER_SELECT = 'SELECT pm.*, p.email, p.name FROM project_members pm JOIN people p ON p.id = pm.person_id';

export class SqlProjectMemberStore implements ProjectMemberStore {
  constructor(private readonly db: Queryable) {}

  async list(projectId: string) {
    const { rows } = await this.db.query(`${MEMBER_SELECT} WHERE pm.project_id = $1 ORDER BY pm.created_at, p.email`, [projectId]);
    return rows.map(toMember);
  }

  async page(projectId: string, page: PageRequest) {
    const where = new Conditions();
    where.add(`pm.project_id = ${where.param(projectId)}::uuid`);
    return selectPage(this.db, { columns: 'pm.*, p.email, p.name', from: 'project_members pm JOIN people p ON p.id = pm.person_id', where, order: MEMBER_ORDER, page, toItem: toMember });
  }

  async projectIdsOf(organizationId: string, personId: string) {
    const { rows } = await this.db.query('SELECT pm.project_id FROM project_members pm JOIN projects pr ON pr.id = pm.project_id WHERE pr.organization_id = $1 AND pm.person_id = $2', [
      organizationId,
      personId,
    ]);
    return rows.map((row) => str(row, 'project_id'));
  }

  async get(projectId: string, personId: string) {
    const { rows } = await this.db.query(`${MEMBER_SELECT} WHERE pm.project_id = $1 AND pm.person_id = $2`, [projectId, personId]);
    return rows[0] ? toMember(rows[0]) : null;
  }

  async upsert(input: { projectId: string; personId: string; role: ProjectRole }) {
    await this.db.query(
      `INSERT INTO project_members (project_id, person_id, role) VALUES ($1, $2, $3)
       ON CONFLICT (project_id, person_id) DO UPDATE SET role = EXCLUDED.role`,
      [input.projectId, input.personId, input.role],
    );
    return (await this.get(input.projectId, input.personId))!;
  }

  async remove(projectId: string, personId: string) {
    const { rowCount } = await this.db.query('DELETE FROM project_members WHERE project_id = $1 AND person_id = $2', [projectId, personId]);
    return rowCount > 0;
  }

  async removeAllInOrganization(organizationId: string, personId: string) {
    const { rows } = await this.db.query(
      `WITH removed AS (
         DELETE FROM project_members pm USING projects pr
          WHERE pr.id = pm.project_id AND pr.organization_id = $1 AND pm.person_id = $2
         RETURNING pm.*
       )
       SELECT removed.*, p.email, p.name FROM removed JOIN people p ON p.id = removed.person_id ORDER BY removed.created_at, removed.project_id`,
      [organizationId, personId],
    );
    return rows.map(toMember);
  }
}

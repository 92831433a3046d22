import type { Queryable } from '../../core/ports/database.ts';
import { date, dateOrNull, str, strOrNull, type Row } from '../../adapters/sql/rows.ts';

/** Where a person heard of the service: one of a few sources, with their own words beside it. */
export const HEARD_FROM_SOURCES = ['search', 'social_media', 'friend_or_colleague', 'blog_or_article', 'ai_assistant', 'event', 'github', 'other'] as const;
export type HeardFromSource = (typeof HEARD_FROM_SOURCES)[number];

export const COMPANY_SIZES = ['just_me', '2-10', '11-50', '51-200', '201-1000', '1000+'] as const;
export const USE_CASES = ['chat_assistant', 'agents', 'search_and_rag', 'coding', 'content_generation', 'data_extraction', 'voice_and_audio', 'images', 'other'] as const;

export interface HeardFrom {
  source: HeardFromSource;
  detail: string | null;
  answeredAt: Date;
}

export interface OrganizationDetails {
  companyName: string | null;
  companySize: (typeof COMPANY_SIZES)[number] | null;
  useCase: (typeof USE_CASES)[number];
  useCaseDetail: string | null;
  website: string | null;
  updatedByPersonId: string | null;
  updatedAt: Date;
}

export interface AccountDeletion {
  operationId: string;
  organizationId: string;
  state: 'scheduled' | 'cancelled' | 'completed';
  requestedByPersonId: string;
  requestedAt: Date;
  runsAt: Date;
  revokedKeys: number;
  cancelledAt: Date | null;
  completedAt: Date | null;
}

const toDetails = (row: Row): OrganizationDetails => ({
  companyName: strOrNull(row, 'company_name'),
  companySize: strOrNull(row, 'company_size') as OrganizationDetails['companySize'],
  useCase: str(row, 'use_case') as OrganizationDetails['useCase'],
  useCaseDetail: strOrNull(row, 'use_case_detail'),
  website: strOrNull(row, 'website'),
  updatedByPersonId: strOrNull(row, 'updated_by_person_id'),
  updatedAt: date(row, 'updated_at'),
});

const toDeletion = (row: Row): AccountDeletion => ({
  operationId: str(row, 'operation_id'),
  organizationId: str(row, 'organization_id'),
  state: str(row, 'state') as AccountDeletion['state'],
  requestedByPersonId: str(row, 'requested_by_person_id'),
  requestedAt: date(row, 'requested_at'),
  runsAt: date(row, 'runs_at'),
  revokedKeys: Number(row['revoked_keys']),
  cancelledAt: dateOrNull(row, 'cancelled_at'),
  completedAt: dateOrNull(row, 'completed_at'),
});

/** The account plugin's tables: onboarding answers and account deletions. Over the pool or a transaction. */
export class AccountStore {
  constructor(private readonly db: Queryable) {}

  async heardFrom(personId: string): Promise<HeardFrom | null> {
    const { rows } = await this.db.query('SELECT source, detail, answered_at FROM onboarding_heard_from WHERE person_id = $1', [personId]);
    const row = rows[0];
    return row ? { source: str(row, 'source') as HeardFromSource, detail: strOrNull(row, 'detail'), answeredAt: date(row, 'answered_at') } : null;
  }

  async setHeardFrom(personId: string, answer: HeardFrom): Promise<void> {
    await this.db.query(
      `INSERT INTO onboarding_heard_from (person_id, source, detail, answered_at) VALUES ($1, $2, $3, $4)
       ON CONFLICT (person_id) DO UPDATE SET source = EXCLUDED.source, detail = EXCLUDED.detail, answered_at = EXCLUDED.answered_at`,
      [personId, answer.source, answer.detail, answer.answeredAt],
    );
  }

  async dismissedAt(organizationId: string, personId: string): Promise<Date | null> {
    const { rows } = await this.db.query('SELECT dismissed_at FROM onboarding_dismissals WHERE organization_id = $1 AND person_id = $2', [organizationId, personId]);
    return rows[0] ? date(rows[0], 'dismissed_at') : null;
  }

  /** Dismisses the checklist (keeping the first time it was) or brings it back; returns when it is dismissed, or null. */
  async setDismissed(organizationId: string, personId: string, dismissed: boolean, now: Date): Promise<Date | null> {
    if (!dismissed) {
      await this.db.query('DELETE FROM onboarding_dismissals WHERE organization_id = $1 AND person_id = $2', [organizationId, personId]);
      return null;
    }
    await this.db.query('INSERT INTO onboarding_dismissals (organization_id, person_id, dismissed_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [organizationId, personId, now]);
    return this.dismissedAt(organizationId, personId);
  }

  async details(organizationId: string): Promise<OrganizationDetails | null> {
    const { rows } = await this.db.query('SELECT * FROM organization_details WHERE organization_id = $1', [organizationId]);
    return rows[0] ? toDetails(rows[0]) : null;
  }

  async setDetails(organizationId: string, details: OrganizationDetails): Promise<OrganizationDetails> {
    const { rows } = await this.db.query(
      `INSERT INTO organization_details (organization_id, company_name, company_size, use_case, use_case_detail, website, updated_by_person_id, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
       ON CONFLICT (organization_id) DO UPDATE SET company_name = EXCLUDED.company_name, company_size = EXCLUDED.company_size,
         use_case = EXCLUDED.use_case, use_case_detail = EXCLUDED.use_case_detail, website = EXCLUDED.website,
         updated_by_person_id = EXCLUDED.updated_by_person_id, updated_at = EXCLUDED.updated_at
       RETURNING *`,
      [organizationId, details.companyName, details.companySize, details.useCase, details.useCaseDetail, details.website, details.updatedByPersonId, details.updatedAt],
    );
    return toDetails(rows[0]!);
  }

  async scheduledDeletion(organizationId: string): Promise<AccountDeletion | null> {
    const { rows } = await this.db.query("SELECT * FROM account_deletions WHERE organization_id = $1 AND state = 'scheduled'", [organizationId]);
    return rows[0] ? toDeletion(rows[0]) : null;
  }

  /** Refused with a UniqueViolation (`account_deletions_one_scheduled`) while another is scheduled. */
  async scheduleDeletion(deletion: Omit<AccountDeletion, 'state' | 'cancelledAt' | 'completedAt'>): Promise<void> {
    await this.db.query(
      `INSERT INTO account_deletions (operation_id, organization_id, state, requested_by_person_id, requested_at, runs_at, revoked_keys)
       VALUES ($1, $2, 'scheduled', $3, $4, $5, $6)`,
      [deletion.operationId, deletion.organizationId, deletion.requestedByPersonId, deletion.requestedAt, deletion.runsAt, deletion.revokedKeys],
    );
  }

  async cancelDeletion(operationId: string, personId: string, now: Date): Promise<boolean> {
    const { rowCount } = await this.db.query(
      "UPDATE account_deletions SET state = 'cancelled', cancelled_by_person_id = $2, cancelled_at = $3 WHERE operation_id = $1 AND state = 'scheduled'",
      [operationId, personId, now],
    );
    return rowCount > 0;
  }

  async completeDeletion(operationId: string, now: Date): Promise<void> {
    await this.db.query("UPDATE account_deletions SET state = 'completed', completed_at = $2 WHERE operation_id = $1", [operationId, now]);
  }

  /** What an organisation's deletion removes of this plugin's: its checklist state and details (a person's heard-from goes with the person). */
  async eraseOrganization(organizationId: string): Promise<number> {
    const dismissals = await this.db.query('DELETE FROM onboarding_dismissals WHERE organization_id = $1', [organizationId]);
    const details = await this.db.query('DELETE FROM organization_details WHERE organization_id = $1', [organizationId]);
    return dismissals.rowCount + details.rowCount;
  }
}

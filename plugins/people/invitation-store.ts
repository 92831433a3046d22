import { randomUUID } from 'node:crypto';
import type { OrgRole } from '../../core/identity/scopes.ts';
import type { Queryable } from '../../core/ports/database.ts';
import type { ProjectRole } from '../../core/ports/identity.ts';
import type { Page, PageRequest } from '../../core/vocabulary/pagination.ts';
import { Conditions } from '../../adapters/sql/conditions.ts';
import { type KeysetOrder, selectPage } from '../../adapters/sql/keyset.ts';
import { date, dateOrNull, str, strOrNull, type Row } from '../../adapters/sql/rows.ts';

export type InvitationStatus = 'pending' | 'accepted' | 'revoked' | 'expired';

export interface InvitedProjectRole {
  projectId: string;
  role: ProjectRole;
}

export interface Invitation {
  id: string;
  organizationId: string;
  email: string;
  role: OrgRole;
  projects: InvitedProjectRole[];
  /** As stored: a pending invitation past `expiresAt` is still `pending` here (see statusAt). */
  storedStatus: InvitationStatus;
  invitedBy: { personId: string; email: string } | null;
  createdAt: Date;
  /** When its mail last went out (created or resent). */
  sentAt: Date;
  expiresAt: Date;
  acceptedAt: Date | null;
  acceptedPersonId: string | null;
  revokedAt: Date | null;
}

/** What an invitation is at `now`: a pending one whose time ran out is expired. */
export function statusAt(invitation: Invitation, now: Date): InvitationStatus {
  return invitation.storedStatus === 'pending' && invitation.expiresAt.getTime() <= now.getTime() ? 'expired' : invitation.storedStatus;
}

const SELECT = `SELECT i.*, inviter.email AS invited_by_email FROM invitations i LEFT JOIN people inviter ON inviter.id = i.invited_by_person_id`;
const ORDER: KeysetOrder = { at: 'i.created_at', id: 'i.id', idType: 'uuid' };

function toInvitation(row: Row): Invitation {
  const inviter = strOrNull(row, 'invited_by_person_id');
  return {
    id: str(row, 'id'),
    organizationId: str(row, 'organization_id'),
    email: str(row, 'email'),
    role: str(row, 'role') as OrgRole,
    projects: row['projects'] as InvitedProjectRole[],
    storedStatus: str(row, 'status') as InvitationStatus,
    invitedBy: inviter === null ? null : { personId: inviter, email: str(row, 'invited_by_email') },
    createdAt: date(row, 'created_at'),
    sentAt: date(row, 'sent_at'),
    expiresAt: date(row, 'expires_at'),
    acceptedAt: dateOrNull(row, 'accepted_at'),
    acceptedPersonId: strOrNull(row, 'accepted_person_id'),
    revokedAt: dateOrNull(row, 'revoked_at'),
  };
}

/** The `invitations` table (owned by this plugin), over a connection or an open transaction. */
export class InvitationStore {
  constructor(private readonly db: Queryable) {}

  async create(input: {
    organizationId: string;
    email: string;
    role: OrgRole;
    projects: InvitedProjectRole[];
    tokenHash: string;
    invitedByPersonId: string | null;
    now: Date;
    expiresAt: Date;
  }): Promise<Invitation> {
    const id = randomUUID();
    await this.db.query(
      `INSERT INTO invitations (id, organization_id, email, role, projects, token_hash, invited_by_person_id, created_at, sent_at, expires_at)
       VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $8, $9)`,
      [id, input.organizationId, input.email, input.role, JSON.stringify(input.projects), input.tokenHash, input.invitedByPersonId, input.now, input.expiresAt],
    );
    return (await this.get(input.organizationId, id))!;
  }

  async get(organizationId: string, id: string): Promise<Invitation | null> {
    return this.one(`${SELECT} WHERE i.organization_id = $1 AND i.id = $2`, [organizationId, id]);
  }

  /** The invitation a link's token names, in any state. */
  async findByTokenHash(tokenHash: string): Promise<Invitation | null> {
    return this.one(`${SELECT} WHERE i.token_hash = $1`, [tokenHash]);
  }

  /** The stored-pending invitation to this email (expired or not), if any. */
  async pendingFor(organizationId: string, email: string): Promise<Invitation | null> {
    return this.one(`${SELECT} WHERE i.organization_id = $1 AND lower(i.email) = lower($2) AND i.status = 'pending'`, [organizationId, email]);
  }

  /** Newest first; `status` as statusAt reads it at `now`. */
  async page(organizationId: string, filter: { status?: InvitationStatus; now: Date }, page: PageRequest): Promise<Page<Invitation>> {
    const where = new Conditions();
    where.add(`i.organization_id = ${where.param(organizationId)}::uuid`);
    if (filter.status === 'pending') where.add(`i.status = 'pending' AND i.expires_at > ${where.param(filter.now)}::timestamptz`);
    else if (filter.status === 'expired') where.add(`(i.status = 'expired' OR (i.status = 'pending' AND i.expires_at <= ${where.param(filter.now)}::timestamptz))`);
    else if (filter.status) where.add(`i.status = ${where.param(filter.status)}`);
    return selectPage(this.db, {
      columns: 'i.*, inviter.email AS invited_by_email',
      from: 'invitations i LEFT JOIN people inviter ON inviter.id = i.invited_by_person_id',
      where,
      order: ORDER,
      page,
      toItem: toInvitation,
    });
  }

  /** Stores `expired` on the email's pending invitation whose time ran out, so a new one can be pending. */
  async expireLapsed(organizationId: string, email: string, now: Date): Promise<void> {
    await this.db.query(`UPDATE invitations SET status = 'expired' WHERE organization_id = $1 AND lower(email) = lower($2) AND status = 'pending' AND expires_at <= $3`, [
      organizationId,
      email,
      now,
    ]);
  }

  /** A new token and expiry for a stored-pending invitation (the old token stops working); null when it is not pending. */
  async reissue(organizationId: string, id: string, input: { tokenHash: string; now: Date; expiresAt: Date }): Promise<Invitation | null> {
    const { rowCount } = await this.db.query(`UPDATE invitations SET token_hash = $3, sent_at = $4, expires_at = $5 WHERE organization_id = $1 AND id = $2 AND status = 'pending'`, [
      organizationId,
      id,
      input.tokenHash,
      input.now,
      input.expiresAt,
    ]);
    return rowCount > 0 ? this.get(organizationId, id) : null;
  }

  /** Revokes a stored-pending invitation (its link stops working); null when it is not pending. */
  async revoke(organizationId: string, id: string, now: Date): Promise<Invitation | null> {
    const { rowCount } = await this.db.query(`UPDATE invitations SET status = 'revoked', revoked_at = $3 WHERE organization_id = $1 AND id = $2 AND status = 'pending'`, [
      organizationId,
      id,
      now,
    ]);
    return rowCount > 0 ? this.get(organizationId, id) : null;
  }

  /**
   * Spends the token: the invitation it names becomes accepted by `personId`, if it is pending and
   * unexpired at `now`. One statement, so two acceptances of one link cannot both succeed.
   */
  async accept(tokenHash: string, personId: string, now: Date): Promise<Invitation | null> {
    const { rows } = await this.db.query(
      `UPDATE invitations SET status = 'accepted', accepted_at = $3, accepted_person_id = $2
        WHERE token_hash = $1 AND status = 'pending' AND expires_at > $3 RETURNING organization_id, id`,
      [tokenHash, personId, now],
    );
    return rows[0] ? this.get(str(rows[0], 'organization_id'), str(rows[0], 'id')) : null;
  }

  /** Every invitation of an organisation whose account is being deleted: they name the people it invited. */
  async eraseOrganization(organizationId: string): Promise<number> {
    const { rowCount } = await this.db.query('DELETE FROM invitations WHERE organization_id = $1', [organizationId]);
    return rowCount;
  }

  private async one(sql: string, params: unknown[]): Promise<Invitation | null> {
    const { rows } = await this.db.query(sql, params);
    return rows[0] ? toInvitation(rows[0]) : null;
  }
}

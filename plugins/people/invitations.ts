import type { DomainEvents } from '../../core/events/domain-events.ts';
import { generateToken, hashToken } from '../../core/identity/api-tokens.ts';
import type { Authenticator } from '../../core/identity/authenticator.ts';
import type { PeopleSignIn, SignedIn } from '../../core/identity/people-sign-in.ts';
import type { OrgRole } from '../../core/identity/scopes.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { type Database, type Transaction, UniqueViolation } from '../../core/ports/database.ts';
import type { EventActor } from '../../core/ports/events.ts';
import type { IdentityStores, IdentityStoresFactory, Organization, Person } from '../../core/ports/identity.ts';
import type { Mailer } from '../../core/ports/mail.ts';
import { secretPlaceholder } from '../../core/services/mail-messages.ts';
import type { Page, PageRequest } from '../../core/vocabulary/pagination.ts';
import { type Invitation, InvitationStore, type InvitationStatus, type InvitedProjectRole, statusAt } from './invitation-store.ts';
import './people-errors.ts';
import './people-events.ts';

/** Invitation links carry `svc_inv_` and 43 random characters; only their SHA-256 is stored. */
export const INVITATION_TOKEN_PREFIX = 'svc_inv_';
/** Where an invitation's link lands: the accept page (accept-routes.ts). */
export const ACCEPT_PATH = '/invitations/accept';

/** Runs a function in one database transaction: an operation's `ctx.transaction`, or the database's own. */
export type Transact = <T>(fn: (tx: Transaction) => Promise<T>) => Promise<T>;

/** Who invites: a person (through their session), or the operator from the CLI. */
export interface Inviter {
  readonly actor: EventActor;
  readonly personId: string | null;
}

export interface InvitationsDeps {
  db: Database;
  identityFor: IdentityStoresFactory;
  mailer: Mailer;
  events: DomainEvents;
  authenticator: Authenticator;
  signIn: PeopleSignIn;
  clock: () => Date;
  /** How long an invitation works (`auth.invitationTtlHours`); a resend starts it again. */
  ttlHours: number;
}

/** What the accept page finds behind a link. */
export type LinkState =
  | { readonly kind: 'unknown' }
  | { readonly kind: 'closed'; readonly invitation: Invitation; readonly status: Exclude<InvitationStatus, 'pending'> }
  | { readonly kind: 'open'; readonly invitation: Invitation; readonly organization: Organization; readonly person: Person | null; readonly hasPassword: boolean };

/**
 * Invitations to an organisation, from the invite to the membership. Inviting records the
 * invitation (pending) and mails its link; nothing about the organisation changes until the person
 * accepts: then, in one transaction, the link is spent, the person is created if new, and the
 * membership and the project roles are given. A person who already has an account proves it with
 * their password; their password and their sessions are never touched.
 */
export class Invitations {
  constructor(private readonly deps: InvitationsDeps) {}

  private storeOf(db: Database | Transaction): InvitationStore {
    return new InvitationStore(db);
  }

  page(organizationId: string, filter: { status?: InvitationStatus }, page: PageRequest): Promise<Page<Invitation>> {
    return this.storeOf(this.deps.db).page(organizationId, { ...filter, now: this.deps.clock() }, page);
  }

  get(organizationId: string, id: string): Promise<Invitation | null> {
    return this.storeOf(this.deps.db).get(organizationId, id);
  }

  /** What an invitation is now (a pending one past its time is expired). */
  statusOf(invitation: Invitation): InvitationStatus {
    return statusAt(invitation, this.deps.clock());
  }

  /**
   * Records a pending invitation and mails its link. Refused when the email already belongs to a
   * member, when another invitation to it is pending, and when a project named is not the
   * organisation's. The `member.invited` event is emitted in the invitation's transaction; the mail
   * goes after it commits (a failed send leaves the invitation to be resent).
   */
  async invite(
    input: { organizationId: string; email: string; role: OrgRole; projects: InvitedProjectRole[]; inviter: Inviter; baseUrl: string },
    transact: Transact = (fn) => this.deps.db.transaction(fn),
  ): Promise<Invitation> {
    const token = generateToken(INVITATION_TOKEN_PREFIX);
    const now = this.deps.clock();
    const { email } = input;
    const alreadyInvited = () => new ApiError('already_invited', `An invitation to ${email} is pending: resend or revoke it`, { param: 'email' });
    let invitation: Invitation;
    try {
      invitation = await transact(async (tx) => {
        const stores = this.deps.identityFor(tx);
        const store = this.storeOf(tx);
        const person = await stores.people.getByEmail(email);
        if (person && (await stores.memberships.get(input.organizationId, person.id))) {
          throw new ApiError('already_member', `${email} already belongs to this organisation`, { param: 'email' });
        }
        for (const [index, granted] of input.projects.entries()) {
          if (!(await stores.projects.get(input.organizationId, granted.projectId))) {
            throw new ApiError('project_not_found', `No project ${granted.projectId}`, { param: `projects.${index}.projectId` });
          }
        }
        await store.expireLapsed(input.organizationId, email, now);
        if (await store.pendingFor(input.organizationId, email)) throw alreadyInvited();
        const created = await store.create({
          organizationId: input.organizationId,
          email,
          role: input.role,
          projects: input.projects,
          tokenHash: hashToken(token),
          invitedByPersonId: input.inviter.personId,
          now,
          expiresAt: this.expiryFrom(now),
        });
        await this.deps.events.emit(tx, {
          type: 'member.invited',
          organizationId: input.organizationId,
          subject: created.id,
          actor: input.inviter.actor,
          data: {
            invitationId: created.id,
            email: created.email,
            role: created.role,
            projects: created.projects,
            expiresAt: created.expiresAt.toISOString(),
            invitedBy: input.inviter.personId,
          },
        });
        return created;
      });
    } catch (error) {
      // Two invitations to one email at once: the index keeps one pending.
      if (error instanceof UniqueViolation && error.constraint === 'invitations_one_pending') throw alreadyInvited();
      throw error;
    }
    await this.mail(invitation, token, input.baseUrl);
    return invitation;
  }

  /**
   * Mails a pending invitation again with a new link (the old one stops working) and a new expiry,
   * an expired one included. Accepted, revoked or replaced ones are refused.
   */
  async resend(organizationId: string, id: string, baseUrl: string, transact: Transact = (fn) => this.deps.db.transaction(fn)): Promise<Invitation> {
    const token = generateToken(INVITATION_TOKEN_PREFIX);
    const now = this.deps.clock();
    const invitation = await transact(async (tx) => {
      const store = this.storeOf(tx);
      if (!(await store.get(organizationId, id))) throw new ApiError('invitation_not_found', `No invitation ${id}`, { param: 'id' });
      const reissued = await store.reissue(organizationId, id, { tokenHash: hashToken(token), now, expiresAt: this.expiryFrom(now) });
      if (!reissued) throw new ApiError('invitation_not_pending', undefined, { param: 'id' });
      return reissued;
    });
    await this.mail(invitation, token, baseUrl);
    return invitation;
  }

  /** Revokes a pending invitation: its link stops working. Revoking a revoked one changes nothing. */
  async revoke(organizationId: string, id: string, transact: Transact = (fn) => this.deps.db.transaction(fn)): Promise<Invitation> {
    return transact(async (tx) => {
      const store = this.storeOf(tx);
      const found = await store.get(organizationId, id);
      if (!found) throw new ApiError('invitation_not_found', `No invitation ${id}`, { param: 'id' });
      if (found.storedStatus === 'revoked') return found;
      const revoked = await store.revoke(organizationId, id, this.deps.clock());
      if (!revoked) throw new ApiError('invitation_not_pending', undefined, { param: 'id' });
      return revoked;
    });
  }

  /** What a link names, for the accept page: nothing, an invitation no longer open, or one to accept. */
  async linkState(token: string): Promise<LinkState> {
    if (!isInvitationToken(token)) return { kind: 'unknown' };
    const invitation = await this.storeOf(this.deps.db).findByTokenHash(hashToken(token));
    if (!invitation) return { kind: 'unknown' };
    const status = this.statusOf(invitation);
    if (status !== 'pending') return { kind: 'closed', invitation, status };
    const stores = this.deps.identityFor(this.deps.db);
    const organization = await stores.organizations.get(invitation.organizationId);
    if (!organization) return { kind: 'unknown' };
    const person = await stores.people.getByEmail(invitation.email);
    const hasPassword = person !== null && (await stores.people.passwordHashOf(person.id)) !== null;
    return { kind: 'open', invitation, organization, person, hasPassword };
  }

  /**
   * Accepts for someone without a password yet: a new person (created with `name`), or one an
   * operator added who never set one. Sets the password (hashed by the caller beforehand), spends
   * the link, gives the membership and opens a browser session, all in one transaction. Null when
   * the link is no longer open, or the email now belongs to an account with a password (which must
   * sign in instead).
   */
  async acceptAsNewPerson(token: string, input: { name: string; passwordHash: string }): Promise<{ invitation: Invitation; session: SignedIn } | null> {
    const now = this.deps.clock();
    const accepted = await this.deps.db
      .transaction(async (tx) => {
        const stores = this.deps.identityFor(tx);
        const pending = await this.storeOf(tx).findByTokenHash(hashToken(token));
        if (!pending) return null;
        const existing = await stores.people.getByEmail(pending.email);
        if (existing && (await stores.people.passwordHashOf(existing.id)) !== null) return null;
        const person = existing ? ((await stores.people.update(existing.id, { name: input.name })) ?? existing) : await stores.people.create({ email: pending.email, name: input.name });
        const invitation = await this.storeOf(tx).accept(hashToken(token), person.id, now);
        if (!invitation) throw new LinkClosed();
        await stores.people.setPasswordHash(person.id, input.passwordHash);
        const session = await this.deps.signIn.openBrowserSession(person, stores);
        await this.join(tx, stores, invitation, person, session);
        return { invitation, session };
      })
      .catch((error: unknown) => {
        // Spent or closed meanwhile, or the email's person created meanwhile by someone else: roll back, ask again.
        if (error instanceof LinkClosed || (error instanceof UniqueViolation && error.constraint === 'people_email_key')) return null;
        throw error;
      });
    if (accepted) await this.forgetCredentials(accepted.invitation, accepted.session.person.id);
    return accepted;
  }

  /**
   * Accepts for a person who has just signed in with their password (`signedIn`): spends the link
   * and gives the membership. Their password and sessions stay as they are. Null when the link is
   * no longer open, or names another email.
   */
  async acceptAsSignedIn(token: string, signedIn: SignedIn): Promise<Invitation | null> {
    const now = this.deps.clock();
    const invitation = await this.deps.db.transaction(async (tx) => {
      const pending = await this.storeOf(tx).findByTokenHash(hashToken(token));
      if (!pending || pending.email.toLowerCase() !== signedIn.person.email.toLowerCase()) return null;
      const accepted = await this.storeOf(tx).accept(hashToken(token), signedIn.person.id, now);
      if (!accepted) return null;
      await this.join(tx, this.deps.identityFor(tx), accepted, signedIn.person, signedIn);
      return accepted;
    });
    if (invitation) await this.forgetCredentials(invitation, signedIn.person.id);
    return invitation;
  }

  /**
   * The membership an accepted invitation gives, with its project roles (on the projects that still
   * exist), and `member.joined`. A person who belongs already (an operator added them meanwhile)
   * rolls the acceptance back: the link stays open, and the page says they belong.
   */
  private async join(tx: Transaction, stores: IdentityStores, invitation: Invitation, person: Person, session: SignedIn): Promise<void> {
    if (await stores.memberships.get(invitation.organizationId, person.id)) throw new ApiError('already_member');
    await stores.memberships.add({ organizationId: invitation.organizationId, personId: person.id, role: invitation.role });
    const granted: InvitedProjectRole[] = [];
    for (const role of invitation.projects) {
      if (!(await stores.projects.get(invitation.organizationId, role.projectId))) continue;
      await stores.projectMembers.upsert({ projectId: role.projectId, personId: person.id, role: role.role });
      granted.push(role);
    }
    // A person's first organisation is where their sessions act; joining another changes nothing there.
    if (!person.defaultOrganizationId) await stores.people.setDefaultOrganization(person.id, invitation.organizationId);
    await this.deps.events.emit(tx, {
      type: 'member.joined',
      organizationId: invitation.organizationId,
      subject: person.id,
      actor: { kind: 'person', id: person.id, label: person.email, credential: { kind: 'session', id: session.sessionId } },
      data: { personId: person.id, email: person.email, name: person.name, role: invitation.role, projects: granted, invitationId: invitation.id },
    });
  }

  /** The person's cached credentials that act in no organisation, or in this one, are read again on every replica. */
  private forgetCredentials(invitation: Invitation, personId: string): Promise<void> {
    return this.deps.authenticator.invalidate({ kind: 'membership', personId, organizationId: invitation.organizationId });
  }

  private expiryFrom(now: Date): Date {
    return new Date(now.getTime() + this.deps.ttlHours * 3_600_000);
  }

  /** The invitation's mail; the link's token is a secret of the message (the outbox keeps it apart). */
  private async mail(invitation: Invitation, token: string, baseUrl: string): Promise<void> {
    const organization = await this.deps.identityFor(this.deps.db).organizations.get(invitation.organizationId);
    const link = `${baseUrl.replace(/\/+$/, '')}${ACCEPT_PATH}?token=${secretPlaceholder('token')}`;
    const by = invitation.invitedBy ? ` by ${invitation.invitedBy.email}` : '';
    try {
      await this.deps.mailer.send({
        to: invitation.email,
        subject: `You are invited to join ${organization?.name ?? 'an organisation'}`,
        text: [
          `You have been invited${by} to join ${organization?.name ?? 'an organisation'} as ${invitation.role}.`,
          '',
          `Accept the invitation: ${link}`,
          '',
          'If you already have an account, sign in there with your password; otherwise choose your name and a password.',
          `The link works once and until ${invitation.expiresAt.toISOString()}. If you did not expect it, ignore this message.`,
        ].join('\n'),
        secrets: { token },
      });
    } catch (error) {
      throw new ApiError(
        'invitation_mail_failed',
        `Invitation ${invitation.id} is saved but its mail could not be sent; resend it with POST /client/employees/invites/${invitation.id}/resend`,
        {
          cause: error,
        },
      );
    }
  }
}

/** The link was spent or closed between the page's check and the acceptance. */
class LinkClosed extends Error {}

export function isInvitationToken(value: string): boolean {
  return /^svc_inv_[A-Za-z0-9]{43}$/.test(value);
}

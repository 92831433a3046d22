import type { DomainEvents } from '../../core/events/domain-events.ts';
import type { Authenticator } from '../../core/identity/authenticator.ts';
import type { OrgRole } from '../../core/identity/scopes.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { EventActor } from '../../core/ports/events.ts';
import type { IdentityStores, IdentityStoresFactory, Membership, OrganizationMember } from '../../core/ports/identity.ts';
import type { Transact } from './invitations.ts';
import './people-errors.ts';
import './people-events.ts';

export interface MembershipChangesDeps {
  identityFor: IdentityStoresFactory;
  events: DomainEvents;
  authenticator: Authenticator;
}

/** Who changes a membership, and whether they are an owner (only owners give or take the owner role). */
export interface Changer {
  readonly actor: EventActor;
  readonly isOwner: boolean;
}

/**
 * A member's role changing, and a member leaving. Both lock the organisation's owners first, so the
 * last owner can be neither demoted nor removed, even by two changes made at once. After the
 * change commits, every replica drops the person's cached credentials that act in this organisation
 * (core/identity/authenticator.ts, `membership`); their sessions themselves go on, and act in
 * their other organisations.
 */
export class MembershipChanges {
  constructor(private readonly deps: MembershipChangesDeps) {}

  /** Gives a member another organisation role; the same role again changes nothing and says nothing. */
  async changeRole(organizationId: string, personId: string, role: OrgRole, changer: Changer, transact: Transact): Promise<OrganizationMember> {
    const { member, changed } = await transact(async (tx) => {
      const stores = this.deps.identityFor(tx);
      const owners = await stores.memberships.lockOwners(organizationId);
      const before = await memberOf(stores, organizationId, personId);
      if (before.role === role) return { member: before, changed: false };
      if ((before.role === 'owner' || role === 'owner') && !changer.isOwner) {
        throw new ApiError('owner_required', 'Only an owner may make someone an owner or change an owner’s role', { param: 'role' });
      }
      if (before.role === 'owner') refuseLastOwner(owners, before, 'demoted');
      await stores.memberships.update(organizationId, personId, { role });
      await this.deps.events.emit(tx, {
        type: 'member.role_changed',
        organizationId,
        subject: personId,
        actor: changer.actor,
        data: { personId, email: before.email, role, previousRole: before.role },
      });
      return { member: { ...before, role }, changed: true };
    });
    if (changed) await this.forget(organizationId, personId);
    return member;
  }

  /**
   * Ends a membership and the person's roles on the organisation's projects. Their account, their
   * password, their sessions and their other organisations stay; what they did here (keys they made)
   * stays the organisation's.
   */
  async remove(organizationId: string, personId: string, changer: Changer, transact: Transact): Promise<OrganizationMember> {
    const removed = await transact(async (tx) => {
      const stores = this.deps.identityFor(tx);
      const owners = await stores.memberships.lockOwners(organizationId);
      const member = await memberOf(stores, organizationId, personId);
      if (member.role === 'owner') {
        if (!changer.isOwner) throw new ApiError('owner_required', 'Only an owner may remove an owner', { param: 'id' });
        refuseLastOwner(owners, member, 'removed');
      }
      const projectRoles = await stores.projectMembers.removeAllInOrganization(organizationId, personId);
      await stores.memberships.remove(organizationId, personId);
      await this.deps.events.emit(tx, {
        type: 'member.removed',
        organizationId,
        subject: personId,
        actor: changer.actor,
        data: { personId, email: member.email, role: member.role, projects: projectRoles.map((r) => ({ projectId: r.projectId, role: r.role })) },
      });
      return member;
    });
    await this.forget(organizationId, personId);
    return removed;
  }

  private forget(organizationId: string, personId: string): Promise<void> {
    return this.deps.authenticator.invalidate({ kind: 'membership', personId, organizationId });
  }
}

async function memberOf(stores: IdentityStores, organizationId: string, personId: string): Promise<OrganizationMember> {
  const membership = await stores.memberships.get(organizationId, personId);
  const person = membership ? await stores.people.get(personId) : null;
  if (!membership || !person) throw new ApiError('employee_not_found', `No person ${personId} in this organisation`, { param: 'id' });
  return { ...membership, email: person.email, name: person.name };
}

/** 409 when `member` is the only active owner among `owners` (the locked list). */
function refuseLastOwner(owners: readonly string[], member: Membership, change: 'demoted' | 'removed'): void {
  if (member.status === 'active' && owners.length === 1 && owners[0] === member.personId) {
    throw new ApiError('last_owner', `This is the organisation's last owner and cannot be ${change}: make someone else owner first`, { param: 'id' });
  }
}

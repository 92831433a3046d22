import { z } from 'zod';
import { isOwner, type Credential } from '../../core/identity/credential.ts';
import type { OrgRole } from '../../core/identity/scopes.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import { defineOperation, type AnyOperation, type OperationContext } from '../../core/operations/operations.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { listResponse, pageQuery } from '../../core/vocabulary/pagination.ts';
import type { Invitation } from './invitation-store.ts';
import type { Invitations, Inviter } from './invitations.ts';
import type { Changer, MembershipChanges } from './membership-changes.ts';
import {
  employeeListView,
  employeeRemovalView,
  employeeView,
  invitationListView,
  invitationStatus,
  invitationView,
  orgRole,
  PEOPLE_PAGE,
  projectRole,
  toEmployeeView,
  toInvitationView,
} from './people-views.ts';
import './people-errors.ts';

interface Deps {
  identity: IdentityStores;
  invitations: Invitations;
  changes: MembershipChanges;
  /** Where invitation links point when the caller's own origin is unknown (`server.publicUrl`, else host and port). */
  fallbackBaseUrl: string;
}

/** Managing people is a person's act: owners and admins, in their own session (never a key or a connector). */
const MANAGERS: readonly OrgRole[] = ['owner', 'admin'];
/** Everyone of the organisation sees who else belongs to it, as on GitHub or Vercel teams. */
const ANY_MEMBER: readonly OrgRole[] = ['owner', 'admin', 'member'];

const ROLE_RULES =
  'Owners and admins manage people, in their own session (API keys and connectors cannot: people are a person’s act). Only an owner gives, changes or takes away the owner role, and the last owner can be neither demoted nor removed (409 last_owner).';

const idParams = z.strictObject({ id: resourceId.describe('The person id') });
const invitationParams = z.strictObject({ id: resourceId.describe('The invitation id') });

const inviteBody = z.strictObject({
  email: z.email().max(254).describe('Where the invitation is mailed; the person signs in with it'),
  role: orgRole.default('member').describe('The organisation role accepting gives (default member); owner needs an owner'),
  projects: z
    .array(z.strictObject({ projectId: resourceId, role: projectRole }))
    .max(100)
    .refine((list) => new Set(list.map((p) => p.projectId)).size === list.length, 'name each project once')
    .default([])
    .describe('Roles on projects of the organisation that accepting gives too'),
});

const invitationQuery = pageQuery(PEOPLE_PAGE).extend({
  status: invitationStatus.optional().describe('Only invitations in this status (as they read now); absent: every one'),
});

function inviterOf(credential: Credential): Inviter {
  return { actor: actorOf(credential), personId: credential.kind === 'key' ? null : credential.personId };
}

function changerOf(credential: Credential): Changer {
  return { actor: actorOf(credential), isOwner: isOwner(credential) };
}

/** Only owners touch an invitation that would make someone an owner. */
function refuseOwnerInvitation(credential: Credential, role: OrgRole, param: string): void {
  if (role === 'owner' && !isOwner(credential)) throw new ApiError('owner_required', 'Only an owner may invite an owner, or resend or revoke such an invitation', { param });
}

export function peopleOperations({ identity, invitations, changes, fallbackBaseUrl }: Deps): AnyOperation[] {
  const baseUrlOf = (ctx: OperationContext) => ctx.origin ?? fallbackBaseUrl;
  const view = (invitation: Invitation) => toInvitationView(invitation, invitations.statusOf(invitation));
  const invitationOf = async (credential: Credential, id: string) => {
    const found = await invitations.get(credential.organizationId, id);
    if (!found) throw new ApiError('invitation_not_found', `No invitation ${id}`, { param: 'id' });
    return found;
  };

  const list = defineOperation({
    name: 'employees.list',
    method: 'GET',
    path: '/employees',
    summary: "The organisation's people with their roles, newest member first",
    description:
      'Every person of the organisation with their role and status. Any member’s session may read it (people see their team); API keys and connectors may not: the list is people’s emails, and no key scope covers them. Pending invitations are listed at GET /employees/invites.',
    scope: null,
    roles: ANY_MEMBER,
    readOnly: true,
    query: pageQuery(PEOPLE_PAGE),
    output: employeeListView,
    async handler({ query }, { credential }) {
      return listResponse(await identity.memberships.pageForOrganization(credential.organizationId, query), toEmployeeView);
    },
  });

  const invite = defineOperation({
    name: 'employees.invite',
    method: 'POST',
    path: '/employees',
    summary: 'Invite a person by email, with a role and optional project roles',
    description: `Records an invitation and mails its link (\`{publicUrl or this request's origin}/invitations/accept?token=svc_inv_…\`); the answer is the invitation, never a membership: the person becomes a member when they accept, as a new person choosing a name and password, or by signing in to the account they have. The link works once, until \`expiresAt\` (auth.invitationTtlHours, 7 days by default). 409 already_member, or already_invited while another invitation to the email is pending. A 502 invitation_mail_failed means the invitation is saved but not mailed: resend it. ${ROLE_RULES}`,
    scope: null,
    roles: MANAGERS,
    readOnly: false,
    body: inviteBody,
    status: 201,
    errors: ['already_member', 'already_invited', 'project_not_found', 'owner_required', 'invitation_mail_failed'],
    output: invitationView,
    async handler({ body }, ctx) {
      const { credential, transaction } = ctx;
      refuseOwnerInvitation(credential, body.role, 'role');
      const invitation = await invitations.invite(
        { organizationId: credential.organizationId, email: body.email, role: body.role, projects: body.projects, inviter: inviterOf(credential), baseUrl: baseUrlOf(ctx) },
        transaction,
      );
      return view(invitation);
    },
  });

  const update = defineOperation({
    name: 'employees.update',
    method: 'PATCH',
    path: '/employees/:id',
    summary: "Change a person's organisation role",
    description: `The person's cached credentials in this organisation are dropped on every replica at once, so the new role holds from their next request. ${ROLE_RULES}`,
    scope: null,
    roles: MANAGERS,
    readOnly: false,
    idempotent: true,
    params: idParams,
    body: z.strictObject({ role: orgRole }),
    errors: ['employee_not_found', 'owner_required', 'last_owner'],
    output: employeeView,
    async handler({ params, body }, { credential, transaction }) {
      return toEmployeeView(await changes.changeRole(credential.organizationId, params.id, body.role, changerOf(credential), transaction));
    },
  });

  const remove = defineOperation({
    name: 'employees.remove',
    method: 'DELETE',
    path: '/employees/:id',
    summary: 'Remove a person from the organisation',
    description: `Ends the membership and the person's roles on the organisation's projects; every replica stops accepting their sessions and connectors here at once. Their account, password, sessions and other organisations stay (a session acting here acts in their next organisation from its next request), and API keys they made stay the organisation's: revoke them from the keys list if they should go too. ${ROLE_RULES}`,
    scope: null,
    roles: MANAGERS,
    readOnly: false,
    destructive: true,
    idempotent: true,
    params: idParams,
    errors: ['employee_not_found', 'owner_required', 'last_owner'],
    output: employeeRemovalView,
    async handler({ params }, { credential, transaction }) {
      const removed = await changes.remove(credential.organizationId, params.id, changerOf(credential), transaction);
      return { object: 'ack' as const, ok: true as const, id: removed.personId };
    },
  });

  const listInvitations = defineOperation({
    name: 'employees.invites.list',
    method: 'GET',
    path: '/employees/invites',
    summary: 'Invitations to the organisation, newest first',
    description: `Every invitation with its status (pending, accepted, revoked, expired); \`status=pending\` lists those still waiting. Owners and admins only: it holds the emails of people who are not members. ${ROLE_RULES}`,
    scope: null,
    roles: MANAGERS,
    readOnly: true,
    query: invitationQuery,
    output: invitationListView,
    async handler({ query }, { credential }) {
      const { status, ...page } = query;
      return listResponse(await invitations.page(credential.organizationId, status ? { status } : {}, page), view);
    },
  });

  const revoke = defineOperation({
    name: 'employees.invites.revoke',
    method: 'DELETE',
    path: '/employees/invites/:id',
    summary: 'Revoke an invitation',
    description: `Its link stops working at once; the invitation stays listed as revoked. Revoking it again answers it unchanged; an accepted one is 409 invitation_not_pending (remove the person instead). ${ROLE_RULES}`,
    scope: null,
    roles: MANAGERS,
    readOnly: false,
    destructive: true,
    idempotent: true,
    params: invitationParams,
    errors: ['invitation_not_found', 'invitation_not_pending', 'owner_required'],
    output: invitationView,
    async handler({ params }, { credential, transaction }) {
      refuseOwnerInvitation(credential, (await invitationOf(credential, params.id)).role, 'id');
      return view(await invitations.revoke(credential.organizationId, params.id, transaction));
    },
  });

  const resend = defineOperation({
    name: 'employees.invites.resend',
    method: 'POST',
    path: '/employees/invites/:id/resend',
    summary: 'Mail an invitation again, with a new link',
    description: `A new link and a new expiry; the previous link stops working. An expired invitation may be resent; an accepted, revoked or replaced one is 409 invitation_not_pending. ${ROLE_RULES}`,
    scope: null,
    roles: MANAGERS,
    readOnly: false,
    params: invitationParams,
    errors: ['invitation_not_found', 'invitation_not_pending', 'owner_required', 'invitation_mail_failed'],
    output: invitationView,
    async handler({ params }, ctx) {
      const { credential, transaction } = ctx;
      refuseOwnerInvitation(credential, (await invitationOf(credential, params.id)).role, 'id');
      return view(await invitations.resend(credential.organizationId, params.id, baseUrlOf(ctx), transaction));
    },
  });

  return [list, invite, update, remove, listInvitations, revoke, resend];
}

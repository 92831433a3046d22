import { z } from 'zod';
import type { OrganizationMember } from '../../core/ports/identity.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { listOf } from '../../core/vocabulary/pagination.ts';
import { instantView } from '../../core/vocabulary/timestamps.ts';
import type { Invitation, InvitationStatus } from './invitation-store.ts';

/** The wire views: named schemas of the OpenAPI document (`.meta({ id })`), declared once. */

export const orgRole = z.enum(['owner', 'admin', 'member']);
export const projectRole = z.enum(['admin', 'developer', 'viewer']);
export const invitationStatus = z.enum(['pending', 'accepted', 'revoked', 'expired']);

export const employeeView = z
  .object({
    object: z.literal('employee'),
    id: z.uuid().describe('The person id (the same across organisations)'),
    email: z.string(),
    name: z.string(),
    role: orgRole.describe('owner: everything, the owner role and money included; admin: everything but owners’ acts; member: what their project roles allow'),
    status: z.enum(['active', 'suspended']),
    joinedAt: instantView,
  })
  .meta({ id: 'Employee', description: 'A person of the organisation and their organisation role' });

export const employeeListView = listOf(employeeView);

export const employeeRemovalView = z
  .object({ object: z.literal('ack'), ok: z.literal(true), id: z.uuid() })
  .meta({ id: 'EmployeeRemoval', description: 'The person no longer belongs to the organisation; their account and other organisations stay' });

export const invitationView = z
  .object({
    object: z.literal('invitation'),
    id: z.uuid(),
    email: z.string(),
    role: orgRole.describe('The organisation role accepting gives'),
    projects: z.array(z.object({ projectId: z.uuid(), role: projectRole })).describe('Project roles accepting gives'),
    status: invitationStatus.describe('pending until accepted, revoked or past expiresAt (expired); a resend makes an expired one pending again'),
    invitedBy: z.object({ personId: z.uuid(), email: z.string() }).nullable().describe('null when an operator invited from the CLI, or the inviter’s account is gone'),
    createdAt: instantView,
    sentAt: instantView.describe('When the invitation was last mailed'),
    expiresAt: instantView,
    acceptedAt: instantView.nullable(),
    revokedAt: instantView.nullable(),
  })
  .meta({ id: 'Invitation', description: 'An invitation to join the organisation, mailed as a link that works once' });

export const invitationListView = listOf(invitationView);

/** Members and invitations are listed by uuid (a person id, an invitation id) to break ties. */
export const PEOPLE_PAGE = { defaultLimit: 50, maxLimit: 200, id: resourceId };

export function toEmployeeView(member: OrganizationMember): z.infer<typeof employeeView> {
  return {
    object: 'employee',
    id: member.personId,
    email: member.email,
    name: member.name,
    role: member.role,
    status: member.status,
    joinedAt: member.createdAt.toISOString(),
  };
}

export function toInvitationView(invitation: Invitation, status: InvitationStatus): z.infer<typeof invitationView> {
  return {
    object: 'invitation',
    id: invitation.id,
    email: invitation.email,
    role: invitation.role,
    projects: invitation.projects,
    status,
    invitedBy: invitation.invitedBy,
    createdAt: invitation.createdAt.toISOString(),
    sentAt: invitation.sentAt.toISOString(),
    expiresAt: invitation.expiresAt.toISOString(),
    acceptedAt: invitation.acceptedAt?.toISOString() ?? null,
    revokedAt: invitation.revokedAt?.toISOString() ?? null,
  };
}

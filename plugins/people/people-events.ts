import { z } from 'zod';
import { defineEventTypes, type PayloadsOf } from '../../core/events/event-catalogue.ts';
const orgRole = z.enum(['owner', 'admin', 'member']);
const projectRoles = z.array(z.object({ projectId: z.string(), role: z.enum(['admin', 'developer', 'viewer']) })).describe('Roles on projects of the organisation that come with it');

const EXAMPLE_PERSON = { personId: '9e8d7c6b-5a49-4382-9170-6f5e4d3c2b1a', email: 'ada@example.com' };
const EXAMPLE_PROJECTS = [{ projectId: '0b5d7c7e-2f4e-4d0a-9a51-2f6f1c1f0a11', role: 'developer' as const }];

/**
 * The organisation's people: who was invited, who joined, left or changed role. Organisation-level,
 * so no `projectId`: an invitation's or a removed person's project roles are listed in `projects`.
 */
export const PEOPLE_EVENTS = defineEventTypes('people', {
  'member.invited': {
    schema: z.object({
      invitationId: z.string(),
      email: z.string(),
      role: orgRole.describe('The organisation role the invitation grants'),
      projects: projectRoles,
      expiresAt: z.string().describe('ISO 8601, UTC: when the invitation stops working unless resent'),
      invitedBy: z.string().nullable().describe('The person who invited; null when an operator invited from the CLI'),
    }),
    description: 'A person was invited to join the organisation; they become a member when they accept',
    public: true,
    example: {
      invitationId: '5d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6',
      email: 'ada@example.com',
      role: 'member',
      projects: EXAMPLE_PROJECTS,
      expiresAt: '2026-12-08T10:00:00.000Z',
      invitedBy: '1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d',
    },
  },
  'member.joined': {
    schema: z.object({
      personId: z.string(),
      email: z.string(),
      name: z.string(),
      role: orgRole,
      projects: projectRoles.describe('Project roles the invitation granted, on the projects that still exist'),
      invitationId: z.string(),
    }),
    description: 'A person accepted an invitation and is now a member of the organisation',
    public: true,
    example: { ...EXAMPLE_PERSON, name: 'Ada Lovelace', role: 'member', projects: EXAMPLE_PROJECTS, invitationId: '5d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6' },
  },
  'member.role_changed': {
    schema: z.object({ personId: z.string(), email: z.string(), role: orgRole, previousRole: orgRole }),
    description: "A member's organisation role changed",
    public: true,
    example: { ...EXAMPLE_PERSON, role: 'admin', previousRole: 'member' },
  },
  'member.removed': {
    schema: z.object({
      personId: z.string(),
      email: z.string(),
      role: orgRole.describe('The organisation role they had'),
      projects: projectRoles.describe('Their roles on projects of the organisation, removed with them'),
    }),
    description: 'A person was removed from the organisation: their access to it ends at once; their account and other organisations stay',
    public: true,
    example: { ...EXAMPLE_PERSON, role: 'member', projects: EXAMPLE_PROJECTS },
  },
});

declare module '../../core/events/domain-events.ts' {
  interface EventCatalogue extends PayloadsOf<typeof PEOPLE_EVENTS> {}
}

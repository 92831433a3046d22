import { z } from 'zod';
import { defineEventTypes, type PayloadsOf } from '../../core/events/event-catalogue.ts';
import type { ProjectMember } from '../../core/ports/identity.ts';

const projectRole = z.enum(['admin', 'developer', 'viewer']);

const memberData = z.object({
  projectId: z.string(),
  personId: z.string(),
  email: z.string(),
  role: projectRole.describe('The role on the project after the change (for a removal: the role it had)'),
});

const EXAMPLE_MEMBER = {
  projectId: '0b5d7c7e-2f4e-4d0a-9a51-2f6f1c1f0a11',
  personId: '9e8d7c6b-5a49-4382-9170-6f5e4d3c2b1a',
  email: 'ada@example.com',
  role: 'developer' as const,
};

/**
 * Project membership. Organisation-level people (invitations, joining, leaving the organisation)
 * have no events yet: the organisation's people routes do not exist yet either.
 */
export const PROJECT_EVENTS = defineEventTypes('projects', {
  'project.member_added': {
    schema: memberData,
    description: 'A person of the organisation was given a role on a project (also the person who creates a project, as its admin)',
    public: true,
    example: EXAMPLE_MEMBER,
  },
  'project.member_role_changed': {
    schema: memberData.extend({ previousRole: projectRole }),
    description: "A project member's role changed",
    public: true,
    example: { ...EXAMPLE_MEMBER, role: 'admin', previousRole: 'developer' },
  },
  'project.member_removed': {
    schema: memberData,
    description: "A person's role on a project was removed",
    public: true,
    example: EXAMPLE_MEMBER,
  },
});

declare module '../../core/events/domain-events.ts' {
  interface EventCatalogue extends PayloadsOf<typeof PROJECT_EVENTS> {}
}

export function memberEventData(member: ProjectMember): z.output<typeof memberData> {
  return { projectId: member.projectId, personId: member.personId, email: member.email, role: member.role };
}

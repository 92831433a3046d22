import type { OnboardingStep, OverviewFigureSource } from '../../core/kernel/account-contributions.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import { keyStatus } from '../keys/key-view.ts';

/**
 * What identity says about an organisation, as the account surface shows it: the figures of the
 * overview and the checklist steps that keys and people decide. The account plugin contributes them
 * through the same points every other plugin uses, so the overview treats all of them alike.
 */
export function identityFigures(identity: IdentityStores): OverviewFigureSource[] {
  const people: OverviewFigureSource = {
    source: 'account',
    scope: null,
    async figures({ organizationId, projectIds }) {
      const [members, projects] = await Promise.all([identity.memberships.listForOrganization(organizationId), identity.projects.list(organizationId)]);
      const visible = projectIds === null ? projects : projects.filter((project) => projectIds.includes(project.id));
      return [
        { id: 'people', label: 'People', value: members.filter((m) => m.status === 'active').length, unit: 'count', window: 'now' },
        { id: 'projects', label: 'Projects', value: visible.length, unit: 'count', window: 'now' },
      ];
    },
  };
  const keys: OverviewFigureSource = {
    source: 'account',
    scope: 'keys:read',
    async figures({ organizationId, projectIds, now }) {
      const all = await identity.apiKeys.list(organizationId);
      const visible = projectIds === null ? all : all.filter((key) => projectIds.includes(key.projectId));
      return [{ id: 'activeKeys', label: 'Active API keys', value: visible.filter((key) => keyStatus(key, now) === 'active').length, unit: 'count', window: 'now' }];
    },
  };
  return [people, keys];
}

export function identitySteps(identity: IdentityStores): OnboardingStep[] {
  return [
    {
      id: 'create_key',
      title: 'Create an API key',
      description: 'Keys call the gateway at /v1 and the management API: POST /client/keys (its secret is shown once).',
      order: 10,
      async doneAt(organizationId) {
        const keys = await identity.apiKeys.list(organizationId);
        return keys.reduce<Date | null>((first, key) => (first === null || key.createdAt < first ? key.createdAt : first), null);
      },
    },
    {
      id: 'invite_teammate',
      title: 'Invite a teammate',
      description: 'Work on the account together: a second person of the organisation, whatever their role.',
      order: 40,
      async doneAt(organizationId) {
        const members = await identity.memberships.listForOrganization(organizationId);
        // Listed oldest first: the second person is the first teammate.
        return members[1]?.createdAt ?? null;
      },
    },
  ];
}

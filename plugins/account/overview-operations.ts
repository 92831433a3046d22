import { z } from 'zod';
import type { AccountViewer, OrgMapBranchSource, OverviewFigureSource } from '../../core/kernel/account-contributions.ts';
import type { Credential } from '../../core/identity/credential.ts';
import { visibleProjectIds } from '../../core/identity/project-access.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import type { Database } from '../../core/ports/database.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import { instantView } from '../../core/vocabulary/timestamps.ts';
import { keyStatus } from '../keys/key-view.ts';
import { AccountStore } from './account-store.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './account-errors.ts';

interface Deps {
  identity: IdentityStores;
  database: Database;
  figures: readonly OverviewFigureSource[];
  branches: readonly OrgMapBranchSource[];
  clock: () => Date;
}

const figureView = z
  .object({
    id: z
      .string()
      .describe('`balanceUsd`, `spendTodayUsd`, `spendMonthUsd`, `callsToday`, `errorRateToday`, `calls30d`, `errorRate30d`, `activeKeys`, `people`, `projects`, and what other plugins add'),
    label: z.string(),
    value: z.number(),
    unit: z.enum(['usd', 'count', 'ratio']).describe('`ratio` is between 0 and 1'),
    window: z.enum(['now', 'today', 'month', 'last_30_days']).describe('`today` and `month`: the UTC day and calendar month so far; `last_30_days`: the 30 days up to now'),
    source: z.string().describe('The plugin that gave it'),
  })
  .meta({ id: 'OverviewFigure', description: 'One number of the account overview' });

const overviewView = z
  .object({
    object: z.literal('account_overview'),
    organization: z.object({ id: z.uuid(), name: z.string() }),
    generatedAt: instantView,
    figures: z.array(figureView).describe('Only figures that are known: a plugin that is off, a scope the caller lacks, or an error rate of no calls leaves its figure out'),
    deletion: z.object({ operationId: z.uuid(), runsAt: instantView }).nullable().describe('The scheduled deletion of the account, while one is pending'),
  })
  .meta({ id: 'AccountOverview', description: 'The account at a glance: balance, spend, calls and errors, keys, people, and what other plugins add' });

const leafView = z.object({ id: z.string(), name: z.string(), status: z.string().nullable() }).meta({ id: 'OrgMapLeaf', description: 'One thing a project holds' });

const projectNodeView = z
  .object({
    id: z.uuid(),
    name: z.string(),
    isDefault: z.boolean(),
    keys: z.object({ total: z.number().int(), active: z.number().int() }).optional().describe('Keys of the project (revoked ones in total only); absent without keys:read'),
    members: z.array(z.object({ personId: z.uuid(), name: z.string(), email: z.string(), role: z.enum(['admin', 'developer', 'viewer']) })),
    branches: z
      .array(z.object({ kind: z.string().describe('Plural noun: `apps`, …'), items: z.array(leafView) }))
      .describe('Other things the project holds, one branch per kind an enabled plugin owns (apps once app hosting exists)'),
  })
  .meta({ id: 'OrgMapProject', description: 'A project of the org map with what it holds' });

const orgMapView = z
  .object({
    object: z.literal('org_map'),
    organization: z.object({ id: z.uuid(), name: z.string(), people: z.number().int().describe('Active members of the organisation') }),
    projects: z.array(projectNodeView).describe('The projects the caller sees, oldest first'),
  })
  .meta({ id: 'OrgMap', description: 'The organisation as a tree: its projects, and under each its keys, members and what other plugins add' });

export function overviewOperations({ identity, database, figures, branches, clock }: Deps): AnyOperation[] {
  const deletions = new AccountStore(database);

  async function viewerOf(credential: Credential): Promise<AccountViewer> {
    return { credential, organizationId: credential.organizationId, projectIds: await visibleProjectIds(identity, credential), now: clock() };
  }

  async function organizationOf(credential: Credential) {
    const organization = await identity.organizations.get(credential.organizationId);
    if (!organization) throw new ApiError('account_not_found');
    return organization;
  }

  const overview = defineOperation({
    name: 'account.overview',
    method: 'GET',
    path: '/overview',
    summary: 'The account at a glance',
    description:
      'Real numbers from where they are kept: the credit balance from the ledger, spend today and this month (UTC) and calls and error rate today and over the last 30 days from the request log, active keys, people and projects from identity; plugins add their own (pending tool approvals once the tool gateway exists). ' +
      'Each figure needs its own scope (money and calls `usage:read`, keys `keys:read`; people and projects any credential) and covers the projects the caller sees; the balance is the account’s. ' +
      'A figure that is not known is left out rather than shown as 0: its plugin is off, the caller lacks its scope, or it is an error rate of no calls.',
    scope: null,
    readOnly: true,
    errors: ['account_not_found'],
    output: overviewView,
    async handler(_input, { credential }) {
      const [organization, viewer, scheduled] = await Promise.all([organizationOf(credential), viewerOf(credential), deletions.scheduledDeletion(credential.organizationId)]);
      const shown = figures.filter((source) => source.scope === null || credential.scopes.has(source.scope));
      const gathered = await Promise.all(shown.map(async (source) => (await source.figures(viewer)).map((figure) => ({ ...figure, source: source.source }))));
      return {
        object: 'account_overview' as const,
        organization: { id: organization.id, name: organization.name },
        generatedAt: viewer.now.toISOString(),
        figures: gathered.flat(),
        deletion: scheduled && { operationId: scheduled.operationId, runsAt: scheduled.runsAt.toISOString() },
      };
    },
  });

  const orgMap = defineOperation({
    name: 'account.orgMap',
    method: 'GET',
    path: '/org-map',
    summary: 'The organisation as a tree of projects, keys, members and what other plugins add',
    description:
      'The projects the caller sees (a key its own project; every project with projects:write), oldest first, each with its key counts (with keys:read), its members and their project roles, and a branch per kind of thing other plugins own (apps once app hosting exists; a branch needs its own scope).',
    scope: null,
    readOnly: true,
    errors: ['account_not_found'],
    output: orgMapView,
    async handler(_input, { credential }) {
      const [organization, viewer, projects, members] = await Promise.all([
        organizationOf(credential),
        viewerOf(credential),
        identity.projects.list(credential.organizationId),
        identity.memberships.listForOrganization(credential.organizationId),
      ]);
      const visible = viewer.projectIds;
      const shown = visible === null ? projects : projects.filter((project) => visible.includes(project.id));
      const ids = shown.map((project) => project.id);
      const readsKeys = credential.scopes.has('keys:read');
      const sources = branches.filter((source) => source.scope === null || credential.scopes.has(source.scope));
      const [keys, projectMembers, leaves] = await Promise.all([
        readsKeys ? identity.apiKeys.list(credential.organizationId) : [],
        Promise.all(shown.map((project) => identity.projectMembers.list(project.id))),
        Promise.all(sources.map((source) => source.leaves(viewer, ids))),
      ]);
      const ordered = shown.map((project, index) => ({ project, members: projectMembers[index] ?? [] })).sort((a, b) => a.project.createdAt.getTime() - b.project.createdAt.getTime());
      return {
        object: 'org_map' as const,
        organization: { id: organization.id, name: organization.name, people: members.filter((m) => m.status === 'active').length },
        projects: ordered.map(({ project, members: onProject }) => {
          const ofProject = keys.filter((key) => key.projectId === project.id);
          return {
            id: project.id,
            name: project.name,
            isDefault: project.isDefault,
            ...(readsKeys ? { keys: { total: ofProject.length, active: ofProject.filter((key) => keyStatus(key, viewer.now) === 'active').length } } : {}),
            members: onProject.map((m) => ({ personId: m.personId, name: m.name, email: m.email, role: m.role })),
            branches: sources.map((source, index) => ({
              kind: source.kind,
              items: (leaves[index]?.get(project.id) ?? []).map((leaf) => ({ id: leaf.id, name: leaf.name, status: leaf.status })),
            })),
          };
        }),
      };
    },
  });

  return [overview, orgMap];
}

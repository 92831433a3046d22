import { z } from 'zod';
import { definePlugin } from '../../core/kernel/plugin.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { OnboardingStepsPoint, OrgMapBranchesPoint, OverviewFiguresPoint } from '../../core/kernel/account-contributions.ts';
import { OrganizationErasersPoint } from '../../core/kernel/organization-erasure.ts';
import { accountOperations } from './account-operations.ts';
import { accountDeletionWorker } from './account-deletion.ts';
import { accountMigrations } from './account-migrations.ts';
import { AccountStore } from './account-store.ts';
import { deletionOperations } from './deletion-operations.ts';
import { identityFigures, identitySteps } from './identity-figures.ts';
import { onboardingOperations } from './onboarding-operations.ts';
import { overviewOperations } from './overview-operations.ts';
import { profileOperations } from './profile-operations.ts';
import { progressOperations } from './progress-operations.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './account-errors.ts';

const DAY_MS = 86_400_000;

export const accountConfigSchema = z.strictObject({
  /** How long a requested deletion waits before the data is removed; an owner may cancel meanwhile. */
  deletionGraceDays: z.number().positive().max(365).default(14),
});

export const accountPlugin = definePlugin({
  name: 'account',
  description: 'Who am I, organisations, profile, onboarding, the overview and org map, work in progress, and deleting the account',
  configSchema: accountConfigSchema,
  migrations: accountMigrations,
  register({ container, extensions }) {
    const identity = container.resolve(Tokens.Identity);
    for (const source of identityFigures(identity)) extensions.contribute(OverviewFiguresPoint, source);
    for (const step of identitySteps(identity)) extensions.contribute(OnboardingStepsPoint, step);
    extensions.contribute(OrganizationErasersPoint, { name: 'onboarding answers', erase: (tx, organizationId) => new AccountStore(tx).eraseOrganization(organizationId) });
  },
  operations: ({ container, extensions, config }) => {
    const identity = container.resolve(Tokens.Identity);
    const authenticator = container.resolve(Tokens.Authenticator);
    const database = container.resolve(Tokens.Database);
    const clock = container.resolve(Tokens.Clock);
    const longRunning = container.resolve(Tokens.LongRunning);
    return [
      ...accountOperations({ identity, authenticator }),
      ...profileOperations({ identity, authenticator }),
      ...onboardingOperations({ database, steps: extensions.all(OnboardingStepsPoint), clock }),
      ...overviewOperations({ identity, database, figures: extensions.all(OverviewFiguresPoint), branches: extensions.all(OrgMapBranchesPoint), clock }),
      ...progressOperations({ identity, longRunning, clock }),
      ...deletionOperations({
        identity,
        identityFor: container.resolve(Tokens.IdentityFactory),
        longRunning,
        authenticator,
        events: container.resolve(Tokens.Events),
        clock,
        graceMs: config.deletionGraceDays * DAY_MS,
      }),
    ];
  },
  queues: ({ container, extensions }) => [
    accountDeletionWorker({
      longRunning: container.resolve(Tokens.LongRunning),
      identityFor: container.resolve(Tokens.IdentityFactory),
      erasers: extensions.all(OrganizationErasersPoint),
      events: container.resolve(Tokens.Events),
      authenticator: container.resolve(Tokens.Authenticator),
      clock: container.resolve(Tokens.Clock),
    }),
  ],
});

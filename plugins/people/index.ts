import { createToken } from '../../core/kernel/container.ts';
import { definePlugin } from '../../core/kernel/plugin.ts';
import { OrganizationErasersPoint } from '../../core/kernel/organization-erasure.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { mountAcceptPages } from './accept-pages.ts';
import { InvitationStore } from './invitation-store.ts';
import { Invitations } from './invitations.ts';
import { MembershipChanges } from './membership-changes.ts';
import { peopleMigrations } from './people-migrations.ts';
import { peopleOperations } from './people-operations.ts';
// Catalogues the codes and event types this plugin answers with and emits.
import './people-errors.ts';
import './people-events.ts';

/** What the people plugin offers beyond its routes: the operator CLI invites through it too. */
export const PeopleTokens = {
  Invitations: createToken<Invitations>('people.Invitations'),
};

/**
 * The organisation's people (`/client/employees…`): list them with their roles, invite by email
 * (an invitation is its own record; the membership is created when it is accepted, on the accept
 * page this plugin serves), resend and revoke invitations, change roles, remove people. Managing
 * people takes an owner's or an admin's own session.
 */
export const peoplePlugin = definePlugin({
  name: 'people',
  description: "The organisation's people: roles, invitations by email (accepted on a page of their own), removal",
  migrations: peopleMigrations,
  register({ container, appConfig, extensions }) {
    extensions.contribute(OrganizationErasersPoint, { name: 'invitations', erase: (tx, organizationId) => new InvitationStore(tx).eraseOrganization(organizationId) });
    container.bindFactory(
      PeopleTokens.Invitations,
      (bound) =>
        new Invitations({
          db: bound.resolve(Tokens.Database),
          identityFor: bound.resolve(Tokens.IdentityFactory),
          mailer: bound.resolve(Tokens.Mailer),
          events: bound.resolve(Tokens.Events),
          authenticator: bound.resolve(Tokens.Authenticator),
          signIn: bound.resolve(Tokens.SignIn),
          clock: bound.resolve(Tokens.Clock),
          ttlHours: appConfig.auth.invitationTtlHours,
        }),
    );
  },
  operations: ({ container, appConfig }) =>
    peopleOperations({
      identity: container.resolve(Tokens.Identity),
      invitations: container.resolve(PeopleTokens.Invitations),
      changes: new MembershipChanges({
        identityFor: container.resolve(Tokens.IdentityFactory),
        events: container.resolve(Tokens.Events),
        authenticator: container.resolve(Tokens.Authenticator),
      }),
      fallbackBaseUrl: appConfig.server.publicUrl ?? `http://${appConfig.server.host}:${appConfig.server.port}`,
    }),
  routes(scope, { container, appConfig }) {
    mountAcceptPages(scope, {
      invitations: container.resolve(PeopleTokens.Invitations),
      signIn: container.resolve(Tokens.SignIn),
      authenticator: container.resolve(Tokens.Authenticator),
      identity: container.resolve(Tokens.Identity),
      publicUrl: appConfig.server.publicUrl,
      sessionTtlDays: appConfig.auth.sessionTtlDays,
    });
  },
});

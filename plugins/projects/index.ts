import { definePlugin } from '../../core/kernel/plugin.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { projectOperations } from './project-operations.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './project-errors.ts';

export const projectsPlugin = definePlugin({
  name: 'projects',
  description: 'Projects and their members',
  operations: ({ container }) =>
    projectOperations({
      identity: container.resolve(Tokens.Identity),
      identityFor: container.resolve(Tokens.IdentityFactory),
      authenticator: container.resolve(Tokens.Authenticator),
      events: container.resolve(Tokens.Events),
    }),
});

import { definePlugin } from '../../core/plugin.ts';
import { Tokens } from '../../core/tokens.ts';
import { keyOperations } from './key-operations.ts';
// Catalogues the codes this module answers with (core/error-catalogue.ts).
import './key-errors.ts';

export const keysPlugin = definePlugin({
  name: 'keys',
  description: 'API keys: create (shown once), list, detail with spend, update, revoke, delete',
  operations: ({ container }) =>
    keyOperations({
      identity: container.resolve(Tokens.Identity),
      identityFor: container.resolve(Tokens.IdentityFactory),
      authenticator: container.resolve(Tokens.Authenticator),
      clock: container.resolve(Tokens.Clock),
    }),
});

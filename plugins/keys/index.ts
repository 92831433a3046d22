import { definePlugin } from '../../core/kernel/plugin.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { KeyCreationChecksPoint } from '../../core/identity/key-creation-checks.ts';
import { SpendReaderPoint } from '../../core/ports/metering.ts';
import { keyOperations } from './key-operations.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './key-errors.ts';

export const keysPlugin = definePlugin({
  name: 'keys',
  description: 'API keys: create (shown once), list, detail with spend, update, revoke, delete',
  operations: ({ container, extensions }) =>
    keyOperations({
      identity: container.resolve(Tokens.Identity),
      spend: extensions.get(SpendReaderPoint),
      identityFor: container.resolve(Tokens.IdentityFactory),
      authenticator: container.resolve(Tokens.Authenticator),
      events: container.resolve(Tokens.Events),
      clock: container.resolve(Tokens.Clock),
      creationChecks: extensions.all(KeyCreationChecksPoint),
    }),
});

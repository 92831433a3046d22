import { definePlugin } from '../../core/kernel/plugin.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { accountOperations } from './account-operations.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './account-errors.ts';

export const accountPlugin = definePlugin({
  name: 'account',
  description: 'Who am I, organisations and the default organisation',
  operations: ({ container }) => accountOperations({ identity: container.resolve(Tokens.Identity), authenticator: container.resolve(Tokens.Authenticator) }),
});

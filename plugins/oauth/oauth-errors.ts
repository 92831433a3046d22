import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** The oauth plugin's error codes on the management API (core/kernel/error-catalogue.ts). */
export const OAUTH_ERRORS = defineErrorCodes('oauth', {
  connector_connection_not_found: { status: 404, type: 'not_found_error', message: 'No such connector connection' },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof OAUTH_ERRORS> {}
}

import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** The account plugin's error codes (core/kernel/error-catalogue.ts: what a code is, and why one table). */
export const ACCOUNT_ERRORS = defineErrorCodes('account', {
  account_not_found: { status: 404, type: 'not_found_error', message: 'The account of this credential no longer exists' },
  organization_not_found: { status: 404, type: 'not_found_error', message: 'No such organisation among yours' },
  organization_inactive: { status: 400, type: 'invalid_request_error', message: 'That organisation or your membership in it is not active' },
  key_organization_fixed: { status: 400, type: 'invalid_request_error', message: 'An API key always acts in the organisation it was issued in' },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof ACCOUNT_ERRORS> {}
}

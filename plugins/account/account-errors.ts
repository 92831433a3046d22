import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** The account plugin's error codes (core/kernel/error-catalogue.ts: what a code is, and why one table). */
export const ACCOUNT_ERRORS = defineErrorCodes('account', {
  account_not_found: { status: 404, type: 'not_found_error', message: 'The account of this credential no longer exists' },
  organization_not_found: { status: 404, type: 'not_found_error', message: 'No such organisation among yours' },
  organization_inactive: { status: 400, type: 'invalid_request_error', message: 'That organisation or your membership in it is not active' },
  key_organization_fixed: { status: 400, type: 'invalid_request_error', message: 'An API key always acts in the organisation it was issued in' },
  operation_not_found: { status: 404, type: 'not_found_error', message: 'No such operation' },
  confirmation_mismatch: {
    status: 400,
    type: 'invalid_request_error',
    message: 'To delete the account, send its organisation’s exact name as `confirm`',
  },
  deletion_already_scheduled: { status: 409, type: 'conflict_error', message: 'This account’s deletion is already scheduled' },
  no_deletion_scheduled: { status: 409, type: 'conflict_error', message: 'No deletion of this account is scheduled' },
  deletion_in_progress: { status: 409, type: 'conflict_error', message: 'This account’s deletion has begun and can no longer be cancelled' },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof ACCOUNT_ERRORS> {}
}

import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** The people plugin's error codes (core/kernel/error-catalogue.ts: what a code is, and why one table). */
export const PEOPLE_ERRORS = defineErrorCodes('people', {
  employee_not_found: { status: 404, type: 'not_found_error', message: 'No such person in this organisation' },
  invitation_not_found: { status: 404, type: 'not_found_error', message: 'No such invitation' },
  already_member: { status: 409, type: 'conflict_error', message: 'This person already belongs to the organisation' },
  already_invited: { status: 409, type: 'conflict_error', message: 'An invitation to this email is pending: resend or revoke it' },
  invitation_not_pending: { status: 409, type: 'conflict_error', message: 'This invitation is no longer pending: it was accepted, revoked or replaced' },
  last_owner: {
    status: 409,
    type: 'conflict_error',
    message: 'The organisation must keep at least one owner: make someone else owner first',
  },
  invitation_mail_failed: {
    status: 502,
    type: 'upstream_error',
    message: 'The invitation is saved but its mail could not be sent; resend it',
  },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof PEOPLE_ERRORS> {}
}

import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** The keys plugin's error codes (core/kernel/error-catalogue.ts: what a code is, and why one table). */
export const KEY_ERRORS = defineErrorCodes('keys', {
  cross_project: { status: 403, type: 'permission_error', message: 'An API key can only create keys in its own project' },
  key_cannot_move_key: { status: 403, type: 'permission_error', message: "An API key cannot move a key to another project; that is a person's act" },
  scope_escalation: { status: 403, type: 'permission_error', message: 'Cannot grant scopes this credential does not hold' },
  limit_escalation: { status: 403, type: 'permission_error', message: 'An API key cannot give a key more than it has itself' },
  key_cannot_change_itself: {
    status: 403,
    type: 'permission_error',
    message: 'An API key cannot change its own scopes, models, expiry, spend cap or rate limits; it may rename or pause itself',
  },
  paused_by_person: { status: 403, type: 'permission_error', message: 'A person paused this key; only a person can resume it' },
  app_owned_key: { status: 409, type: 'conflict_error', message: 'This key belongs to an app and moves only with it; move the app instead' },
  key_revoked_conflict: {
    status: 409,
    type: 'conflict_error',
    message: 'This key is revoked; a revoked key cannot be paused or resumed',
    wireCode: 'key_revoked',
  },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof KEY_ERRORS> {}
}

import { type CodesOf, defineErrorCodes } from '../../../core/kernel/error-catalogue.ts';

/** The codes of the upkeep routes (storage, release commands, fixes, mail, egress). */
export const UPKEEP_ERRORS = defineErrorCodes('apps-upkeep', {
  storage_object_not_found: { status: 404, type: 'not_found_error', message: 'The app stores no file by that name' },
  storage_quota_exceeded: { status: 409, type: 'conflict_error', message: 'The app’s storage is full: delete files first' },
  no_release_command: { status: 409, type: 'conflict_error', message: 'The service has no release command: set one with POST /services/{id}/migrate' },
  nothing_to_fix: { status: 409, type: 'conflict_error', message: 'The service has no failed deployment to propose a fix for' },
  autofix_model_failed: { status: 502, type: 'upstream_error', message: 'The model gave no usable answer; nothing was stored' },
});

declare module '../../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof UPKEEP_ERRORS> {}
}

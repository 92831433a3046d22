import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** The projects plugin's error codes (core/kernel/error-catalogue.ts: what a code is, and why one table). */
export const PROJECT_ERRORS = defineErrorCodes('projects', {
  project_name_taken: { status: 409, type: 'conflict_error', message: 'A project with this name already exists' },
  project_not_empty: { status: 409, type: 'conflict_error', message: 'The project still has keys; delete them permanently or move them first' },
  default_project: { status: 400, type: 'invalid_request_error', message: 'The default project cannot be deleted' },
  person_not_found: { status: 404, type: 'not_found_error', message: 'No such person in this organisation' },
  member_not_found: { status: 404, type: 'not_found_error', message: 'That person has no role on this project' },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof PROJECT_ERRORS> {}
}

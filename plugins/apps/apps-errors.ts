import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** The apps plugin's own codes (the build decision's are in build-decision/build-errors.ts). */
export const APPS_ERRORS = defineErrorCodes('apps', {
  app_not_found: { status: 404, type: 'not_found_error', message: 'No such app' },
  service_not_found: { status: 404, type: 'not_found_error', message: 'No such service' },
  deployment_not_found: { status: 404, type: 'not_found_error', message: 'No such deployment' },
  rollback_target_not_found: {
    status: 404,
    type: 'not_found_error',
    message: 'The service’s last 20 deployments hold no kept build by that id',
  },
  app_name_taken: { status: 409, type: 'conflict_error', message: 'An app of that name exists already' },
  githost_not_connected: { status: 400, type: 'invalid_request_error', message: 'The git host is not connected for this organisation' },
  databases_unavailable: { status: 400, type: 'invalid_request_error', message: 'This service provides no databases to apps yet' },
  git_branch_not_found: { status: 400, type: 'invalid_request_error', message: 'The repository has no such branch' },
  git_repository_empty: { status: 400, type: 'invalid_request_error', message: 'Nothing has been pushed to the repository yet' },
  region_not_found: { status: 400, type: 'invalid_request_error', message: 'No such region' },
  nothing_to_start: { status: 409, type: 'conflict_error', message: 'The service has no live deployment to start' },
  runtime_unavailable_here: { status: 503, type: 'api_error', message: 'This process runs no app runtime' },
  reserved_env_name: { status: 400, type: 'invalid_request_error', message: 'The service sets this variable itself' },
  invalid_env_value: { status: 400, type: 'invalid_request_error', message: 'An environment cannot carry this value' },
  env_conflict: {
    status: 409,
    type: 'conflict_error',
    message: 'Another change to the variables landed first; nothing was written: read them again and resend',
  },
  env_var_not_found: { status: 404, type: 'not_found_error', message: 'The service has no such variable' },
  env_listing_forbidden: {
    status: 403,
    type: 'permission_error',
    message: 'An app’s own key may not list variables: the app is given its own at every start',
  },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof APPS_ERRORS> {}
}

import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** Codes of the deploy routes beyond the git host's: URL sources, templates, cancels (deploy-operations.ts). */
export const DEPLOY_ERRORS = defineErrorCodes('apps', {
  git_url_refused: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The git URL is not one this service may clone (http(s) to a public address, no credentials in it)',
  },
  git_clone_failed: { status: 400, type: 'invalid_request_error', message: 'The repository at the git URL could not be cloned' },
  template_not_found: { status: 400, type: 'invalid_request_error', message: 'No such app template' },
  nothing_to_cancel: { status: 409, type: 'conflict_error', message: 'The service has no queued or building deployment' },
  source_has_no_branches: { status: 400, type: 'invalid_request_error', message: 'The app deploys from a template, which has no branches' },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof DEPLOY_ERRORS> {}
}

import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** The githost plugin's error codes (core/kernel/error-catalogue.ts). */
export const GITHOST_ERRORS = defineErrorCodes('githost', {
  git_repository_not_found: { status: 404, type: 'not_found_error', message: 'No such git repository in this organisation' },
  git_repository_exists: { status: 409, type: 'conflict_error', message: 'A git repository of that name exists already' },
  git_server_timeout: { status: 504, type: 'api_error', message: 'The git server took too long to answer' },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof GITHOST_ERRORS> {}
}

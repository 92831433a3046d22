import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** The githost plugin's error codes (core/kernel/error-catalogue.ts). */
export const GITHOST_ERRORS = defineErrorCodes('githost', {
  git_repository_not_found: { status: 404, type: 'not_found_error', message: 'No such git repository in this organisation' },
  git_repository_exists: { status: 409, type: 'conflict_error', message: 'A git repository of that name exists already' },
  githost_not_oauth: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The local git server has no accounts to connect: it is always connected (push with an API key)',
  },
  githost_not_authorized: { status: 400, type: 'invalid_request_error', message: 'Connect your GitHub account first (GET /githost/authorize)' },
  githost_oauth_state_invalid: { status: 400, type: 'invalid_request_error', message: 'The sign-in with GitHub expired or was already used; start again' },
  githost_member_connect_off: {
    status: 403,
    type: 'permission_error',
    message: 'The organisation lets only owners and admins connect git-host accounts (POST /githost/member-connect)',
  },
  githost_installation_not_found: { status: 404, type: 'not_found_error', message: 'No such installation of the GitHub App here' },
  githost_installation_claimed: {
    status: 409,
    type: 'conflict_error',
    message: 'Another organisation holds that installation and does not share it',
  },
  githost_repo_not_visible: { status: 400, type: 'invalid_request_error', message: 'The git host shows no such repository to you' },
  githost_org_not_connected: { status: 400, type: 'invalid_request_error', message: 'No installation of this organisation is on that account' },
  githost_allow_list_conflict: { status: 409, type: 'conflict_error', message: 'An app deploys from a repository the new allow-list leaves out' },
  githost_upstream_error: { status: 502, type: 'upstream_error', message: 'GitHub did not answer as expected; it is safe to retry' },
  git_server_timeout: { status: 504, type: 'api_error', message: 'The git server took too long to answer' },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof GITHOST_ERRORS> {}
}

import type { ErrorType } from './errors.ts';

/**
 * Every error code the service answers with, once: its HTTP status, its envelope type and a
 * default sentence. `new ApiError(code)` takes only a code from here (tsc refuses any other), so a
 * status cannot drift between two call sites and the OpenAPI document can list what each operation
 * answers (see operationErrors in core/operation-errors.ts). A call site may still pass a more
 * specific message and a param. A plugin adds its codes to its own section below: codes are part
 * of the public API, and one table keeps two plugins from giving one code two meanings.
 */
export interface ErrorEntry {
  readonly status: number;
  readonly type: ErrorType;
  readonly message: string;
  /**
   * The code on the wire when it is not the entry's own name. Only for a code that answers with two
   * statuses for compatibility (`key_revoked`: 401 on use, 409 on PATCH); never for new codes.
   */
  readonly wireCode?: string;
}

const invalid = 'invalid_request_error';

export const ERROR_CATALOGUE = {
  // The HTTP kernel: framing, routing, bodies (core/http/*).
  invalid_request: { status: 400, type: invalid, message: 'The request could not be processed' },
  invalid_url: { status: 400, type: invalid, message: 'The URL is not valid' },
  path_too_long: { status: 414, type: invalid, message: 'A path segment is longer than this server accepts' },
  malformed_request: { status: 400, type: invalid, message: 'The request is not valid HTTP/1.1' },
  unsupported_method: { status: 400, type: invalid, message: 'The request method is not a known HTTP method' },
  request_timeout: { status: 408, type: invalid, message: 'The request was not received in time' },
  request_header_too_large: { status: 431, type: invalid, message: 'The request line and headers are larger than this server accepts' },
  request_too_large: { status: 413, type: invalid, message: 'The request body is larger than this route accepts' },
  unsupported_media_type: { status: 415, type: invalid, message: 'Unsupported content type; send application/json' },
  invalid_json: { status: 400, type: invalid, message: 'The body is not valid JSON' },
  invalid_content_length: { status: 400, type: invalid, message: 'Content-Length does not match the body' },
  invalid_multipart: { status: 400, type: invalid, message: 'The multipart body is malformed' },
  route_not_found: { status: 404, type: 'not_found_error', message: 'No such route' },
  method_not_allowed: { status: 405, type: invalid, message: 'This method is not allowed on this path' },
  client_closed_request: { status: 499, type: invalid, message: 'The client closed the request' },
  internal_error: { status: 500, type: 'api_error', message: 'Internal server error; quote the request id when reporting it' },
  service_unavailable: { status: 503, type: 'upstream_error', message: 'A storage backend is unreachable; nothing was done. Retry shortly' },
  shutting_down: { status: 503, type: 'api_error', message: 'This server is shutting down and did nothing with the request; retry it' },
  not_ready: { status: 503, type: 'api_error', message: 'This server is not ready' },
  csrf_failed: { status: 403, type: 'permission_error', message: 'The request did not come from this site' },
  duplicate_authorization_header: {
    status: 400,
    type: invalid,
    message: 'The request carries more than one Authorization header; send exactly one credential',
  },

  // Operation input (core/operations.ts, core/compiled-schema.ts).
  invalid_parameter: { status: 400, type: invalid, message: 'A parameter is not valid' },
  invalid_body: { status: 400, type: invalid, message: 'The body is not valid' },
  unknown_field: { status: 400, type: invalid, message: 'The request names a field this operation does not take' },
  missing_body: { status: 400, type: invalid, message: 'A JSON request body is required' },
  unexpected_body: { status: 400, type: invalid, message: 'This operation takes no request body' },

  // Authentication (core/authenticator.ts, core/http/auth-*.ts, core/people-sign-in.ts).
  missing_api_key: { status: 401, type: 'authentication_error', message: 'Missing credential: send "Authorization: Bearer svc_live_…"' },
  invalid_api_key: { status: 401, type: 'authentication_error', message: 'Invalid credential: send a valid key as "Authorization: Bearer svc_live_…"' },
  key_revoked: { status: 401, type: 'authentication_error', message: 'This API key has been revoked' },
  key_disabled: { status: 401, type: 'authentication_error', message: 'This API key is disabled; re-enable it to use it again' },
  key_expired: { status: 401, type: 'authentication_error', message: 'This API key has expired' },
  account_suspended: { status: 401, type: 'authentication_error', message: 'The account this key belongs to is suspended' },
  invalid_session: { status: 401, type: 'authentication_error', message: 'This session cookie is not valid: sign in again' },
  session_revoked: { status: 401, type: 'authentication_error', message: 'This session has been signed out' },
  session_expired: { status: 401, type: 'authentication_error', message: 'This session has expired; sign in again' },
  no_organization: { status: 401, type: 'authentication_error', message: 'This person belongs to no active organisation' },
  api_key_required: {
    status: 401,
    type: 'authentication_error',
    message: 'The /v1 API takes API keys only, not sessions: create a key with POST /client/keys (scope "inference") and send it as "Authorization: Bearer svc_live_…"',
  },
  invalid_metrics_token: { status: 401, type: 'authentication_error', message: 'GET /metrics needs the operator metrics token' },
  invalid_credentials: { status: 401, type: 'authentication_error', message: 'Wrong email or password' },
  too_many_sign_in_attempts: { status: 429, type: 'rate_limit_error', message: 'Too many sign-in attempts; wait before trying again' },
  invalid_token: { status: 400, type: invalid, message: 'This set-password token is unknown, used or expired' },
  password_too_short: { status: 400, type: invalid, message: 'The password is too short' },
  password_too_long: { status: 400, type: invalid, message: 'The password is too long' },
  password_is_email: { status: 400, type: invalid, message: 'A password cannot be your email address' },
  session_required: {
    status: 400,
    type: invalid,
    message: 'Only a person’s session can be signed out; revoke an API key with DELETE /client/keys/{id}',
  },
  browser_session_required: {
    status: 400,
    type: invalid,
    message: 'GET /client/auth/session describes a browser session: send the svc_session cookie',
  },

  // Authorisation (core/authorization.ts).
  missing_scope: { status: 403, type: 'permission_error', message: 'This credential lacks the scope that this operation needs' },
  owner_required: { status: 403, type: 'permission_error', message: 'Only an owner may do this' },
  project_role_insufficient: { status: 403, type: 'permission_error', message: 'Your role on this project is viewer; this needs developer or admin' },
  cross_project: { status: 403, type: 'permission_error', message: 'An API key can only create keys in its own project' },
  key_cannot_move_key: { status: 403, type: 'permission_error', message: "An API key cannot move a key to another project; that is a person's act" },
  project_required: { status: 400, type: invalid, message: 'This account has no default project; name one in projectId' },
  project_not_found: { status: 404, type: 'not_found_error', message: 'No such project' },
  key_not_found: { status: 404, type: 'not_found_error', message: 'No such API key' },

  // Metering and admission (plugins/metering/*).
  rate_limit_exceeded: { status: 429, type: 'rate_limit_error', message: 'Too many requests for this key, project or account; retry after the time in retry-after' },
  insufficient_credit: {
    status: 402,
    type: 'insufficient_quota',
    message: 'The account’s credit balance is used up; top up to continue (GET /client/credits shows the balance)',
  },
  budget_exceeded: { status: 402, type: 'insufficient_quota', message: 'A spend cap is used up. GET /client/budget shows every cap.' },
  metering_unavailable: { status: 503, type: 'upstream_error', message: 'Spend counters could not be prepared; it is safe to retry' },
  model_not_priced: { status: 500, type: 'api_error', message: 'The model has no prices; refusing to serve it unmetered' },

  // plugins/account
  account_not_found: { status: 404, type: 'not_found_error', message: 'The account of this credential no longer exists' },
  organization_not_found: { status: 404, type: 'not_found_error', message: 'No such organisation among yours' },
  organization_inactive: { status: 400, type: invalid, message: 'That organisation or your membership in it is not active' },
  key_organization_fixed: { status: 400, type: invalid, message: 'An API key always acts in the organisation it was issued in' },

  // plugins/projects
  project_name_taken: { status: 409, type: 'conflict_error', message: 'A project with this name already exists' },
  project_not_empty: { status: 409, type: 'conflict_error', message: 'The project still has keys; delete them permanently or move them first' },
  default_project: { status: 400, type: invalid, message: 'The default project cannot be deleted' },
  person_not_found: { status: 404, type: 'not_found_error', message: 'No such person in this organisation' },
  member_not_found: { status: 404, type: 'not_found_error', message: 'That person has no role on this project' },

  // plugins/keys
  scope_escalation: { status: 403, type: 'permission_error', message: 'Cannot grant scopes this credential does not hold' },
  app_owned_key: { status: 409, type: 'conflict_error', message: 'This key belongs to an app and moves only with it; move the app instead' },
  key_revoked_conflict: {
    status: 409,
    type: 'conflict_error',
    message: 'This key is revoked; a revoked key cannot be paused or resumed',
    wireCode: 'key_revoked',
  },

  // plugins/usage
  request_not_found: { status: 404, type: 'not_found_error', message: 'No such request' },

  // plugins/inference
  model_not_found: { status: 404, type: 'not_found_error', message: 'The model does not exist or this key cannot use it; GET /v1/models lists the ones it can' },
  browser_access_denied: {
    status: 403,
    type: 'permission_error',
    message:
      'Requests from a browser (with an Origin header) are refused: they would expose your API key. Call from a server, or send x-svc-dangerous-browser-access: true if you accept the risk.',
  },
  upstream_error: { status: 502, type: 'upstream_error', message: 'The model could not be reached; it is safe to retry' },
  upstream_rejected_request: { status: 400, type: invalid, message: 'The model rejected the request' },
} as const satisfies Record<string, ErrorEntry>;

/** A catalogued code: the only thing ApiError accepts. */
export type ErrorCode = keyof typeof ERROR_CATALOGUE;

export function errorEntry(code: ErrorCode): ErrorEntry {
  const entry: ErrorEntry | undefined = ERROR_CATALOGUE[code];
  // Only reachable from untyped code: tsc refuses an uncatalogued literal.
  if (entry === undefined) throw new Error(`Error code ${JSON.stringify(code)} is not in core/error-catalogue.ts`);
  return entry;
}

/** The code the envelope carries for a catalogued code (its own name but for wireCode entries). */
export function wireCode(code: ErrorCode): string {
  const entry: ErrorEntry = ERROR_CATALOGUE[code];
  return entry.wireCode ?? code;
}

import type { ErrorType } from './errors.ts';

/**
 * Every error code the service answers with, once: its HTTP status, its envelope type and a
 * default sentence. `new ApiError(code)` takes only a catalogued code (tsc refuses any other), so a
 * status cannot drift between two call sites and the OpenAPI document can list what each operation
 * answers (see operationErrors in core/operations/operation-errors.ts). A call site may still pass a more
 * specific message and a param.
 *
 * The kernel's codes are below. A plugin catalogues its own next to its code, as it declares its
 * migrations and domain events: `defineErrorCodes(plugin, { … })` registers them (refusing a code
 * another owner already has, so no code gets two meanings), and augmenting `ErrorCodes` with
 * `CodesOf<typeof THEM>` lets tsc accept them (plugins/projects/project-errors.ts is an example).
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

const KERNEL_ERRORS = {
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

  // Operation input (core/operations/operations.ts, core/kernel/compiled-schema.ts).
  invalid_parameter: { status: 400, type: invalid, message: 'A parameter is not valid' },
  invalid_body: { status: 400, type: invalid, message: 'The body is not valid' },
  unknown_field: { status: 400, type: invalid, message: 'The request names a field this operation does not take' },
  missing_body: { status: 400, type: invalid, message: 'A JSON request body is required' },
  unexpected_body: { status: 400, type: invalid, message: 'This operation takes no request body' },

  // Authentication (core/identity/authenticator.ts, core/http/auth-*.ts, core/identity/people-sign-in.ts).
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
  access_token_expired: { status: 401, type: 'authentication_error', message: 'This access token has expired; refresh it at the token endpoint' },
  access_token_revoked: { status: 401, type: 'authentication_error', message: 'This access token has been revoked; sign in again' },
  connector_token_not_accepted: {
    status: 401,
    type: 'authentication_error',
    message: 'OAuth access tokens of connectors are accepted only at {auth_url}/mcp; use an API key here',
  },
  api_key_required: {
    status: 401,
    type: 'authentication_error',
    message: 'The /v1 API takes API keys only, not sessions: create a key with POST /client/keys (scope "inference") and send it as "Authorization: Bearer svc_live_…"',
  },
  invalid_metrics_token: { status: 401, type: 'authentication_error', message: 'GET /metrics needs the operator metrics token' },
  invalid_credentials: { status: 401, type: 'authentication_error', message: 'Wrong email or password' },
  password_hashing_busy: { status: 503, type: 'api_error', message: 'Too many passwords are being checked right now; retry in a moment' },
  too_many_sign_in_attempts: { status: 429, type: 'rate_limit_error', message: 'Too many sign-in attempts; wait before trying again' },
  too_many_set_password_attempts: { status: 429, type: 'rate_limit_error', message: 'Too many set-password attempts; wait before trying again' },
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

  // Authorisation (core/identity/authorization.ts).
  missing_scope: { status: 403, type: 'permission_error', message: 'This credential lacks the scope that this operation needs' },
  owner_required: { status: 403, type: 'permission_error', message: 'Only an owner may do this' },
  person_required: { status: 403, type: 'permission_error', message: 'Only a person may do this: sign in (an API key is not a person)' },
  role_required: { status: 403, type: 'permission_error', message: 'Only a person with a higher role in the organisation, signed in as themselves, may do this' },
  project_role_insufficient: { status: 403, type: 'permission_error', message: 'Your role on this project is viewer; this needs developer or admin' },
  project_required: { status: 400, type: invalid, message: 'This account has no default project; name one in projectId' },
  project_not_found: { status: 404, type: 'not_found_error', message: 'No such project' },
  key_not_found: { status: 404, type: 'not_found_error', message: 'No such API key' },
  // The MCP endpoint (core/http/mcp-endpoint.ts, core/operations/operation-tools.ts).
  origin_not_allowed: { status: 403, type: 'permission_error', message: 'Requests from this Origin are not accepted; MCP clients in a browser must be served from this site' },
  tool_not_found: { status: 404, type: 'not_found_error', message: 'No such tool' },
} as const satisfies Record<string, ErrorEntry>;

/** The shape a set of codes adds to `ErrorCodes`: its names, each an entry. */
export type CodesOf<T> = { readonly [K in keyof T]: ErrorEntry };

/**
 * Every catalogued code, by name: the kernel's, and each plugin's through module augmentation
 * (`declare module '…/core/error-catalogue.ts' { interface ErrorCodes extends CodesOf<typeof X> {} }`).
 */
export interface ErrorCodes extends CodesOf<typeof KERNEL_ERRORS> {}

/** A catalogued code: the only thing ApiError accepts. */
export type ErrorCode = keyof ErrorCodes & string;

interface Catalogued {
  readonly entry: ErrorEntry;
  /** `core`, or the plugin that defined it. */
  readonly owner: string;
}

const catalogue = new Map<string, Catalogued>(Object.entries(KERNEL_ERRORS).map(([code, entry]) => [code, { entry, owner: 'core' }]));

/**
 * Catalogues a plugin's codes (at module load, so they exist wherever the module that throws them
 * is imported) and returns them unchanged, for `CodesOf<typeof …>`. A code another owner already
 * catalogued is refused: two meanings for one public code would break the clients that branch on it.
 */
export function defineErrorCodes<const T extends Record<string, ErrorEntry>>(owner: string, entries: T): T {
  for (const [code, entry] of Object.entries(entries)) {
    const existing = catalogue.get(code);
    if (existing && existing.entry !== entry) throw new Error(`Error code ${code} of ${owner} is already catalogued by ${existing.owner}`);
    catalogue.set(code, { entry, owner });
  }
  return entries;
}

export function errorEntry(code: ErrorCode): ErrorEntry {
  const found = catalogue.get(code);
  // Reachable when tsc saw a plugin's augmentation but the module defining its codes was not loaded.
  if (found === undefined) throw new Error(`Error code ${JSON.stringify(code)} is not catalogued: import the module that defines it (defineErrorCodes)`);
  return found.entry;
}

/** The code the envelope carries for a catalogued code (its own name but for wireCode entries). */
export function wireCode(code: ErrorCode): string {
  return errorEntry(code).wireCode ?? code;
}

/** Every catalogued code with its entry and owner, in the order they were catalogued. */
export function catalogueEntries(): Array<{ code: string; owner: string; entry: ErrorEntry }> {
  return [...catalogue].map(([code, { entry, owner }]) => ({ code, owner, entry }));
}

import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** The tool gateway's error codes (core/kernel/error-catalogue.ts: what a code is, and why one table). */
export const TOOL_GATEWAY_ERRORS = defineErrorCodes('tool-gateway', {
  upstream_not_found: { status: 404, type: 'not_found_error', message: 'No such MCP upstream' },
  mcp_tool_not_found: { status: 404, type: 'not_found_error', message: 'No such tool of an MCP upstream' },
  mcp_group_not_found: { status: 404, type: 'not_found_error', message: 'No such tool group' },
  mcp_grant_not_found: { status: 404, type: 'not_found_error', message: 'No such grant of a tool group' },
  mcp_approval_not_found: { status: 404, type: 'not_found_error', message: 'No such approval of a tool call' },
  approval_not_pending: { status: 409, type: 'conflict_error', message: 'This approval is decided or expired already; a new call asks for a new one' },
  grant_exists: { status: 409, type: 'conflict_error', message: 'This key holds this group already; change that grant instead' },
  grant_to_itself: { status: 403, type: 'permission_error', message: 'An API key cannot grant tools to itself; another key or a person must' },
  grant_other_project: {
    status: 400,
    type: 'invalid_request_error',
    message: "A group is granted only to keys of the group's project",
  },
  upstream_url_invalid: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The upstream URL must be an absolute https URL without user name or password',
  },
  upstream_url_refused: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The upstream URL points at a private, loopback or link-local address; tool servers must be on public internet addresses',
  },
  upstream_transport_invalid: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The demo transport is only for the demo tools where this service enables them (demoUpstream), with no URL and no authentication',
  },
  upstream_header_invalid: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The authentication header name is not a header the gateway may send on your behalf',
  },
  upstream_slug_taken: { status: 409, type: 'conflict_error', message: 'Another MCP upstream of this organisation has this slug; choose another' },
  upstream_limit_reached: { status: 409, type: 'conflict_error', message: 'This organisation has as many MCP upstreams as it may; delete one first' },
  tool_alias_taken: { status: 409, type: 'conflict_error', message: 'Another tool of this upstream is named or aliased so already' },
  oauth_app_not_found: { status: 404, type: 'not_found_error', message: 'No such OAuth app' },
  oauth_app_in_use: { status: 409, type: 'conflict_error', message: 'MCP upstreams sign in with this OAuth app; change their authentication first' },
  oauth_app_other_project: { status: 400, type: 'invalid_request_error', message: 'An upstream uses only OAuth apps of its own project' },
  oauth_url_invalid: { status: 400, type: 'invalid_request_error', message: 'The authorization server URL must be an absolute https URL without user name or password' },
  oauth_url_refused: {
    status: 400,
    type: 'invalid_request_error',
    message: 'An OAuth URL points at a private, loopback or link-local address; authorization servers must be on public internet addresses',
  },
  upstream_not_oauth: { status: 409, type: 'conflict_error', message: 'This MCP upstream does not authenticate with OAuth; set its auth to {type: "oauth"} first' },
  oauth_public_url_missing: {
    status: 409,
    type: 'conflict_error',
    message: "The gateway has no public URL (server.publicUrl) to send the sign-in's browser back to; ask its operator to set one",
  },
  oauth_discovery_failed: { status: 400, type: 'invalid_request_error', message: "The upstream's OAuth authorization server could not be found or did not answer its metadata" },
  oauth_registration_unsupported: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The authorization server does not register clients dynamically; create an OAuth app with your own client and use it',
  },
  oauth_registration_failed: { status: 400, type: 'invalid_request_error', message: 'The authorization server refused to register the gateway as a client' },
  oauth_sign_in_not_found: { status: 404, type: 'not_found_error', message: 'No sign-in with this state was started by you' },
  upstream_oauth_not_connected: { status: 409, type: 'conflict_error', message: 'Nobody has signed in to this MCP upstream yet: POST /mcp/upstreams/{id}/oauth/start' },
  upstream_needs_sign_in: { status: 409, type: 'conflict_error', message: "This MCP upstream's authorization server refused its refresh token; sign in again" },
  upstream_oauth_unavailable: { status: 502, type: 'api_error', message: "The MCP upstream's authorization server did not refresh its access token" },
  project_full_tool_access: {
    status: 403,
    type: 'permission_error',
    message: 'This project runs its tool bundles with full access: any key of it gets every switched-on tool, so no key is created here',
  },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof TOOL_GATEWAY_ERRORS> {}
}

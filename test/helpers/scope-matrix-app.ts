import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import type { Test } from 'tap';
import { MANAGEMENT_PREFIXES } from '../../core/http/mount-operations.ts';
import { resourcesOf, type ResourceDeclaration } from '../../core/identity/authorization.ts';
import type { AnyOperation } from '../../core/operations/operations.ts';
import { ORG_ROLES, SCOPES, scopesForRole, type OrgRole, type Scope } from '../../core/identity/scopes.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { fillPath, sampleBody, sampleQuery, sampleRequest, type InputFields } from '../fixtures/operation-inputs.ts';
import { addPerson, allPlugins, buildTestApp, createKey } from './app.ts';
import { fastDeriveKey } from './people.ts';
import { invalidNamesFailAtOnce } from './invalid-names.ts';
import { toolError } from './mcp-client.ts';
import { formBody } from './multipart.ts';
import { storedApp } from '../plugins/apps/apps-fixtures.ts';
import { BatchStore } from '../../plugins/batches/batch-store.ts';
import { ToolGatewayTokens } from '../../plugins/tool-gateway/index.ts';
import { ToolStore } from '../../plugins/tool-gateway/tool-store.ts';
import type { TapLike } from './app.ts';

/**
 * The scope matrix, split over files that tap runs in parallel (test/core/scope-matrix-*.test.ts), each
 * with its own app built here: every operation in the registry, on both management mounts (one file per
 * mount), against a request without a credential (401), a key holding every scope but the one it needs
 * (403 missing_scope), and credentials that hold it (neither 401 nor 403). Then every operation that
 * declares a resource (core/identity/authorization.ts), aimed at a project A: credentials of another
 * project are refused, credentials of project A are let through; then /v1, /mcp and {auth_url}/mcp, a file
 * each. scope-matrix-client.test.ts checks that each mount is checked by exactly one file.
 */

/**
 * Who may call a route: a key or session holding this scope, only an owner's session, only an owner's
 * or an admin's session (`admin`), any person's own session but no key or connector (`session`), any
 * person (`person`: a session or a connector, never an API key), or any valid credential.
 */
export type Access = Scope | 'owner-only' | 'admin' | 'session' | 'person' | 'any';

/**
 * The expected access of every management route, written out from the spec (service-api.md,
 * Authentication 3 and the Scope columns) and, where the spec leaves a route open, from the README's
 * documented choices ("Scopes of routes the spec leaves open"). The matrix checks the code against
 * this list, never against the code's own declarations: a route missing here, or declared otherwise,
 * fails. Paths as mounted under /client and /platform/v1.
 */
export const SPEC_ACCESS: ReadonlyArray<{ method: string; path: string; access: Access }> = [
  // Account (spec: no scope stated; README: any valid credential)
  { method: 'GET', path: '/whoami', access: 'any' },
  { method: 'GET', path: '/organizations', access: 'any' },
  { method: 'POST', path: '/organizations/default', access: 'any' },
  // Account surface (spec: by path only; README "Account routes": any credential of the organisation,
  // a person's own acts answering an API key 403 person_required; deleting the account is an owner's act)
  { method: 'GET', path: '/profile', access: 'person' },
  { method: 'PATCH', path: '/profile', access: 'person' },
  { method: 'GET', path: '/onboarding', access: 'any' },
  { method: 'POST', path: '/onboarding/heard-from', access: 'person' },
  { method: 'POST', path: '/onboarding/skip', access: 'person' },
  { method: 'POST', path: '/onboarding/details', access: 'person' },
  { method: 'GET', path: '/overview', access: 'any' },
  { method: 'GET', path: '/org-map', access: 'any' },
  { method: 'GET', path: '/progress', access: 'any' },
  { method: 'POST', path: '/progress/hide', access: 'any' },
  { method: 'GET', path: '/operations/{id}', access: 'any' },
  { method: 'DELETE', path: '/account', access: 'owner-only' },
  { method: 'POST', path: '/account/deletion/cancel', access: 'owner-only' },
  // Projects and members (spec: by path only; README: reads any credential, writes projects:write)
  { method: 'GET', path: '/projects', access: 'any' },
  { method: 'POST', path: '/projects', access: 'projects:write' },
  { method: 'GET', path: '/projects/{id}', access: 'any' },
  { method: 'PATCH', path: '/projects/{id}', access: 'projects:write' },
  { method: 'DELETE', path: '/projects/{id}', access: 'projects:write' },
  { method: 'GET', path: '/projects/{id}/members', access: 'any' },
  { method: 'POST', path: '/projects/{id}/members', access: 'projects:write' },
  { method: 'PATCH', path: '/projects/{id}/members/{userId}', access: 'projects:write' },
  { method: 'DELETE', path: '/projects/{id}/members/{userId}', access: 'projects:write' },
  // Keys (spec: list/get keys:read, create keys:write; README: update and delete keys:write)
  { method: 'GET', path: '/keys', access: 'keys:read' },
  { method: 'POST', path: '/keys', access: 'keys:write' },
  { method: 'GET', path: '/keys/{id}', access: 'keys:read' },
  { method: 'PATCH', path: '/keys/{id}', access: 'keys:write' },
  { method: 'DELETE', path: '/keys/{id}', access: 'keys:write' },
  // (wide) README: as PATCH, keys:write
  { method: 'POST', path: '/keys/{id}/recreate', access: 'keys:write' },
  // Usage, budget, requests (spec: usage:read), credits (README: usage:read), owner-only writes (README)
  { method: 'GET', path: '/credits', access: 'usage:read' },
  { method: 'GET', path: '/credits/statement', access: 'usage:read' },
  { method: 'GET', path: '/credits/summary', access: 'usage:read' },
  { method: 'POST', path: '/credits/topup', access: 'owner-only' },
  { method: 'GET', path: '/credits/hosting', access: 'usage:read' },
  // (wide) README: a money act like a top-up, owner only
  { method: 'POST', path: '/credits/redeem', access: 'owner-only' },
  { method: 'GET', path: '/budget', access: 'usage:read' },
  { method: 'PATCH', path: '/budget', access: 'owner-only' },
  { method: 'POST', path: '/log-requests', access: 'owner-only' },
  { method: 'GET', path: '/usage', access: 'usage:read' },
  { method: 'GET', path: '/usage/series', access: 'usage:read' },
  { method: 'GET', path: '/usage/comparison', access: 'usage:read' },
  { method: 'GET', path: '/requests', access: 'usage:read' },
  { method: 'GET', path: '/requests/recent', access: 'usage:read' },
  { method: 'GET', path: '/requests/window', access: 'usage:read' },
  { method: 'GET', path: '/requests/{id}', access: 'usage:read' },
  // Tool-call usage (plugins/tool-gateway/README.md: usage like the request log, usage:read)
  { method: 'GET', path: '/usage/tools', access: 'usage:read' },
  { method: 'GET', path: '/usage/tools/calls', access: 'usage:read' },
  // The catalogue with prices (spec: no scope stated; README: any valid credential)
  { method: 'GET', path: '/models', access: 'any' },
  // Data guardrails (not in the spec; plugins/guardrails/README.md: members read and test, owners write)
  { method: 'GET', path: '/guardrails', access: 'usage:read' },
  { method: 'POST', path: '/guardrails/test', access: 'usage:read' },
  { method: 'POST', path: '/guardrails/rules', access: 'owner-only' },
  { method: 'PATCH', path: '/guardrails/rules/{id}', access: 'owner-only' },
  { method: 'DELETE', path: '/guardrails/rules/{id}', access: 'owner-only' },
  // Audit log (README: owners read it)
  { method: 'GET', path: '/audit-log', access: 'owner-only' },
  // The event catalogue (README "Events": read to configure webhooks, so webhooks:read)
  { method: 'GET', path: '/events/types', access: 'webhooks:read' },
  // (wide) Support requests (spec: by path only; plugins/support/README.md: a person's, never a key's)
  { method: 'GET', path: '/support/requests', access: 'person' },
  { method: 'POST', path: '/support/requests', access: 'person' },
  { method: 'GET', path: '/support/requests/{id}', access: 'person' },
  { method: 'POST', path: '/support/requests/{id}/messages', access: 'person' },
  { method: 'POST', path: '/support/requests/{id}/solve', access: 'person' },
  { method: 'GET', path: '/support/attachments/{id}', access: 'person' },
  // (wide) The account assistant (plugins/support/README.md: billed like /v1, so the inference scope)
  { method: 'POST', path: '/assistant/messages', access: 'inference' },
  { method: 'POST', path: '/assistant/images', access: 'inference' },
  // Webhooks (spec Events 1: webhooks:read and webhooks:write; plugins/webhooks/README.md: reads take read, anything that sends or changes takes write)
  { method: 'GET', path: '/webhooks', access: 'webhooks:read' },
  { method: 'POST', path: '/webhooks', access: 'webhooks:write' },
  { method: 'GET', path: '/webhooks/{id}', access: 'webhooks:read' },
  { method: 'PATCH', path: '/webhooks/{id}', access: 'webhooks:write' },
  { method: 'DELETE', path: '/webhooks/{id}', access: 'webhooks:write' },
  { method: 'POST', path: '/webhooks/{id}/test', access: 'webhooks:write' },
  { method: 'GET', path: '/webhooks/{id}/deliveries', access: 'webhooks:read' },
  { method: 'POST', path: '/webhooks/{id}/deliveries/{deliveryId}/resend', access: 'webhooks:write' },
  { method: 'POST', path: '/webhooks/{id}/secret/rotate', access: 'webhooks:write' },
  // Git host (spec: listed by path only, scope "not shown"; plugins/githost/README.md: reads any valid credential, creating a repository apps:deploy)
  { method: 'GET', path: '/githost/status', access: 'any' },
  { method: 'GET', path: '/githost/repos', access: 'any' },
  { method: 'GET', path: '/githost/branches', access: 'any' },
  { method: 'POST', path: '/githost/repos', access: 'apps:deploy' },
  // Git host accounts (spec: by path only, Account table and Authentication 7: member-connect and repo-allow-list owner only;
  // plugins/githost/README.md "Accounts and policies": a person's own git-host account, sharing an owner's or admin's act)
  { method: 'GET', path: '/githost/authorize', access: 'person' },
  { method: 'GET', path: '/githost/authorization', access: 'person' },
  { method: 'DELETE', path: '/githost/authorization', access: 'person' },
  { method: 'POST', path: '/githost/claim', access: 'person' },
  { method: 'POST', path: '/githost/share', access: 'admin' },
  { method: 'POST', path: '/githost/add-installation', access: 'person' },
  { method: 'POST', path: '/githost/member-connect', access: 'owner-only' },
  { method: 'GET', path: '/githost/repo-allow-list', access: 'owner-only' },
  { method: 'PUT', path: '/githost/repo-allow-list', access: 'owner-only' },
  // Apps and services (spec "Apps and services": a dash is no scope stated, read by any valid credential of the organisation)
  { method: 'GET', path: '/apps', access: 'apps:read' },
  { method: 'POST', path: '/apps/githost', access: 'apps:deploy' },
  { method: 'GET', path: '/apps/regions', access: 'any' },
  { method: 'GET', path: '/apps/{id}', access: 'any' },
  { method: 'DELETE', path: '/apps/{id}', access: 'apps:deploy' },
  { method: 'GET', path: '/apps/{id}/progress', access: 'any' },
  { method: 'GET', path: '/apps/requests', access: 'apps:read' },
  { method: 'GET', path: '/services/{id}/requests', access: 'any' },
  { method: 'GET', path: '/apps/{id}/analytics', access: 'any' },
  { method: 'GET', path: '/apps/{id}/usage', access: 'any' },
  { method: 'GET', path: '/apps/{id}/usage/series', access: 'any' },
  { method: 'GET', path: '/services/{id}/deployments', access: 'any' },
  { method: 'GET', path: '/deployments/{id}/logs', access: 'any' },
  { method: 'GET', path: '/services/{id}/logs', access: 'any' },
  { method: 'POST', path: '/services/{id}/logs/refresh', access: 'apps:deploy' },
  { method: 'GET', path: '/services/{id}/build', access: 'any' },
  { method: 'POST', path: '/services/{id}/stop', access: 'apps:deploy' },
  { method: 'POST', path: '/services/{id}/start', access: 'apps:deploy' },
  { method: 'POST', path: '/services/{id}/rollback', access: 'apps:deploy' },
  { method: 'GET', path: '/services/{id}/env', access: 'any' },
  { method: 'POST', path: '/services/{id}/env', access: 'apps:deploy' },
  { method: 'DELETE', path: '/services/{id}/env/{name}', access: 'apps:deploy' },
  { method: 'POST', path: '/services/{id}/gateway-key/replace', access: 'apps:deploy' },
  // README (plugins/apps): the app move; the spec names no scope, apps:deploy like every app write
  { method: 'POST', path: '/apps/{id}/group', access: 'apps:deploy' },
  // App upkeep (spec: by path only; plugins/apps/README.md "Storage, release commands, fixes, mail, egress":
  // reads any credential of the organisation as the apps reads, writes apps:deploy, the all-app list apps:read)
  { method: 'GET', path: '/apps/{id}/storage', access: 'any' },
  { method: 'POST', path: '/apps/{id}/storage', access: 'apps:deploy' },
  { method: 'DELETE', path: '/apps/{id}/storage', access: 'apps:deploy' },
  { method: 'POST', path: '/apps/{id}/storage/public', access: 'apps:deploy' },
  { method: 'GET', path: '/services/{id}/migrate', access: 'any' },
  { method: 'POST', path: '/services/{id}/migrate', access: 'apps:deploy' },
  { method: 'POST', path: '/services/{id}/migrations', access: 'apps:deploy' },
  { method: 'POST', path: '/services/{id}/autofix', access: 'apps:deploy' },
  { method: 'GET', path: '/services/{id}/ai-fixes', access: 'any' },
  { method: 'DELETE', path: '/services/{id}/ai-fixes', access: 'apps:deploy' },
  { method: 'POST', path: '/services/{id}/email', access: 'apps:deploy' },
  { method: 'GET', path: '/services/{id}/egress-alert', access: 'any' },
  { method: 'GET', path: '/egress-alerts', access: 'apps:read' },
  // (spec: "asks beforehand whether a repo can build", scope a dash)
  { method: 'GET', path: '/githost/build-check', access: 'any' },
  // Deploy breadth (plugins/apps/README.md): deploys and what changes a service apps:deploy, reads any credential
  { method: 'POST', path: '/apps', access: 'apps:deploy' },
  { method: 'POST', path: '/apps/templates/{template}', access: 'apps:deploy' },
  { method: 'GET', path: '/apps/{id}/preview', access: 'any' },
  { method: 'GET', path: '/apps/{id}/referenced-by', access: 'any' },
  { method: 'POST', path: '/services/{id}/redeploy', access: 'apps:deploy' },
  { method: 'POST', path: '/services/{id}/branch', access: 'apps:deploy' },
  { method: 'GET', path: '/services/{id}/branches', access: 'any' },
  { method: 'POST', path: '/services/{id}/deploy-on-push', access: 'apps:deploy' },
  { method: 'POST', path: '/services/{id}/deploy/cancel', access: 'apps:deploy' },
  { method: 'POST', path: '/services/{id}/build', access: 'apps:deploy' },
  { method: 'GET', path: '/githost/app-roots', access: 'any' },
  { method: 'GET', path: '/githost/app-analysis', access: 'any' },
  { method: 'GET', path: '/githost/app-insight', access: 'any' },
  { method: 'GET', path: '/githost/app-insight/estimate', access: 'any' },
  { method: 'GET', path: '/githost/reachable', access: 'any' },
  // Tool gateway (spec: mcp:read / mcp:write; plugins/tool-gateway/README.md: reads take read, anything that connects or changes takes write)
  { method: 'GET', path: '/mcp/upstreams', access: 'mcp:read' },
  { method: 'POST', path: '/mcp/upstreams', access: 'mcp:write' },
  { method: 'POST', path: '/mcp/upstreams/test', access: 'mcp:write' },
  { method: 'GET', path: '/mcp/upstreams/{id}', access: 'mcp:read' },
  { method: 'PATCH', path: '/mcp/upstreams/{id}', access: 'mcp:write' },
  { method: 'DELETE', path: '/mcp/upstreams/{id}', access: 'mcp:write' },
  { method: 'POST', path: '/mcp/upstreams/{id}/refresh', access: 'mcp:write' },
  { method: 'GET', path: '/mcp/tools', access: 'mcp:read' },
  { method: 'PATCH', path: '/mcp/tools/{id}', access: 'mcp:write' },
  { method: 'POST', path: '/mcp/tools/approve', access: 'mcp:write' },
  { method: 'GET', path: '/mcp/switches', access: 'mcp:read' },
  { method: 'PUT', path: '/mcp/projects/{id}/switch', access: 'admin' },
  { method: 'GET', path: '/mcp/groups', access: 'mcp:read' },
  { method: 'POST', path: '/mcp/groups', access: 'mcp:write' },
  { method: 'PATCH', path: '/mcp/groups/{id}', access: 'mcp:write' },
  { method: 'DELETE', path: '/mcp/groups/{id}', access: 'mcp:write' },
  { method: 'PUT', path: '/mcp/groups/{id}/tools', access: 'mcp:write' },
  { method: 'GET', path: '/mcp/grants', access: 'mcp:read' },
  { method: 'POST', path: '/mcp/grants', access: 'mcp:write' },
  { method: 'PATCH', path: '/mcp/grants/{id}', access: 'mcp:write' },
  { method: 'DELETE', path: '/mcp/grants/{id}', access: 'mcp:write' },
  { method: 'GET', path: '/mcp/keys/{id}/tools', access: 'mcp:read' },
  { method: 'PUT', path: '/mcp/apps/{id}/ai-tools', access: 'mcp:write' },
  { method: 'GET', path: '/mcp/overview', access: 'mcp:read' },
  // Approvals (plugins/tool-gateway/README.md): anyone with mcp:read sees them; deciding is a person's act, an owner's or admin's own
  // session only, so an agent's key (even with mcp:write) never approves its own call.
  { method: 'GET', path: '/mcp/approvals', access: 'mcp:read' },
  { method: 'GET', path: '/mcp/approvals/waiting', access: 'mcp:read' },
  { method: 'POST', path: '/mcp/approvals/{id}/approve', access: 'admin' },
  { method: 'POST', path: '/mcp/approvals/{id}/deny', access: 'admin' },
  { method: 'GET', path: '/mcp/oauth-apps', access: 'mcp:read' },
  { method: 'POST', path: '/mcp/oauth-apps', access: 'mcp:write' },
  { method: 'PATCH', path: '/mcp/oauth-apps/{id}', access: 'mcp:write' },
  { method: 'DELETE', path: '/mcp/oauth-apps/{id}', access: 'mcp:write' },
  { method: 'POST', path: '/mcp/upstreams/{id}/oauth/start', access: 'mcp:write' },
  { method: 'GET', path: '/mcp/upstreams/{id}/oauth', access: 'mcp:read' },
  { method: 'DELETE', path: '/mcp/upstreams/{id}/oauth', access: 'mcp:write' },
  { method: 'GET', path: '/mcp/oauth/status', access: 'mcp:read' },
  // People (spec: by path only; README "People and roles": people see their team, owners and admins
  // manage it, in their own sessions; keys and connectors neither)
  { method: 'GET', path: '/employees', access: 'session' },
  { method: 'POST', path: '/employees', access: 'admin' },
  { method: 'PATCH', path: '/employees/{id}', access: 'admin' },
  { method: 'DELETE', path: '/employees/{id}', access: 'admin' },
  { method: 'GET', path: '/employees/invites', access: 'admin' },
  { method: 'DELETE', path: '/employees/invites/{id}', access: 'admin' },
  { method: 'POST', path: '/employees/invites/{id}/resend', access: 'admin' },
  // Batches seen from the management API (beyond the spec; plugins/batches/README.md "Management operations"): reading them is
  // usage, their output is model answers (the request log's bodies: requests:read), and cancelling is /v1's cancel (inference).
  { method: 'GET', path: '/batches', access: 'usage:read' },
  { method: 'GET', path: '/batches/{id}', access: 'usage:read' },
  { method: 'GET', path: '/batches/{id}/output', access: 'requests:read' },
  { method: 'POST', path: '/batches/{id}/cancel', access: 'inference' },
  // Connectors signed in over OAuth (beyond the spec; plugins/oauth/README.md "Connections"): a person's own session; members their own.
  { method: 'GET', path: '/oauth/connections', access: 'session' },
  { method: 'DELETE', path: '/oauth/connections/{id}', access: 'session' },
];

export const specPath = (operation: AnyOperation) => operation.path.replace(/:(\w+)/g, '{$1}');
/** The table's access for an operation; 'unlisted' when the table does not name it (a test fails for that). */
export function specAccess(operation: AnyOperation): Access | 'unlisted' {
  return SPEC_ACCESS.find((entry) => entry.method === operation.method && entry.path === specPath(operation))?.access ?? 'unlisted';
}
/** The access an operation's declaration gives: its scope, or the sessions it is reserved to (core/identity/authorization.ts). */
export function declaredAccess(operation: AnyOperation): Access | 'unlisted' {
  if (operation.ownerOnly) return 'owner-only';
  if (operation.personOnly) return 'person';
  if (!operation.roles) return operation.scope ?? 'any';
  const roles = [...operation.roles].sort().join();
  return roles === 'admin,owner' ? 'admin' : roles === 'admin,member,owner' ? 'session' : 'unlisted';
}
/** The organisation roles whose sessions alone the table lets call an operation; null when it is not reserved to people. */
export function specRoles(operation: AnyOperation): readonly OrgRole[] | null {
  const access = specAccess(operation);
  return access === 'owner-only' ? ['owner'] : access === 'admin' ? ['owner', 'admin'] : access === 'session' ? ORG_ROLES : null;
}
export const reserved = (operation: AnyOperation) => specRoles(operation) !== null;
/** What a credential outside an operation's roles is refused with. */
export const roleRefusal = (operation: AnyOperation) => (specOwnerOnly(operation) ? 'owner_required' : 'role_required');
/** The scope the table says an operation needs, or null (reserved to sessions, any credential, unlisted). */
export function specScope(operation: AnyOperation): Scope | null {
  const access = specAccess(operation);
  return access === 'owner-only' || access === 'admin' || access === 'session' || access === 'person' || access === 'any' || access === 'unlisted' ? null : access;
}
export const specOwnerOnly = (operation: AnyOperation) => specAccess(operation) === 'owner-only';
/** Refused to every API key (person_required), whatever its scopes. */
export const specPersonOnly = (operation: AnyOperation) => specAccess(operation) === 'person';

export const ACCESS_REFUSALS = [
  'project_not_found',
  'key_not_found',
  'webhook_not_found',
  'upstream_not_found',
  'mcp_tool_not_found',
  'mcp_group_not_found',
  'mcp_grant_not_found',
  'mcp_approval_not_found',
  'oauth_app_not_found',
  'file_not_found',
  'batch_not_found',
  'app_not_found',
  'service_not_found',
  'deployment_not_found',
  'cross_project',
  'key_cannot_move_key',
  'project_role_insufficient',
];

/**
 * The app every scope-matrix file checks, with the credentials, people, projects and record fixtures
 * the checks use. Each file builds its own, so the files share no state.
 */
export async function scopeMatrixApp(t: TapLike) {
  /** Connectors sign in at auth_url, a host name of this same server (plugins/oauth). */
  const AUTH_URL = 'http://auth.localhost:8080';
  // Each connector below is a person who set a password from the one address tests come from: one per
  // scope some operation needs, more than the default set-password limit per address allows.
  const test = await buildTestApp(t, {
    config: { auth: { setPasswordAttemptsPerIp: 100 } },
    plugins: {
      ...allPlugins(),
      // Connectors' access tokens are minted as the file loads and used at its end: a loaded machine's run outlasts the default 10 minutes.
      oauth: { authUrl: AUTH_URL, accessTokenTtlSeconds: 3600 },
      // Every webhook operation gets a fresh endpoint of project A from each credential: more than an organisation's default allowance.
      webhooks: { maxEndpointsPerOrganization: 10_000 },
      'tool-gateway': { maxUpstreamsPerOrganization: 10_000 },
    },
    deriveKey: fastDeriveKey,
    outboundLookup: invalidNamesFailAtOnce,
  });
  const operations: AnyOperation[] = test.app.svc.container.resolve(Tokens.Operations).list();

  const allScopesKey = (await createKey(test, { name: 'all scopes', scopes: [...SCOPES] })).key;
  const neededScopes = [...new Set(operations.map(specScope).filter((s): s is Scope => s !== null))];
  /**
   * Whether a credential lacking this scope still reaches /mcp: without mcp:read it is refused the
   * endpoint itself (403 missing_scope, tested on its own), so its tools are never listed or called.
   */
  const reachesMcpWithout = (scope: Scope) => scope !== 'mcp:read';
  const keyWithout = new Map<Scope, string>();
  for (const scope of neededScopes) {
    const created = await createKey(test, { name: `all but ${scope}`, scopes: SCOPES.filter((s) => s !== scope) });
    keyWithout.set(scope, created.key);
  }

  function request(prefix: string, operation: AnyOperation, token: string | null): Promise<LightMyRequestResponse> {
    const body = sampleBody(operation);
    return test.call(operation.method, prefix + fillPath(operation) + sampleQuery(operation), { token, ...(body !== undefined ? { body } : {}) });
  }

  const label = (prefix: string, operation: AnyOperation, response: LightMyRequestResponse) =>
    `${operation.name}: ${operation.method} ${prefix}${operation.path} -> ${response.statusCode} ${response.body.slice(0, 200)}`;

  function envelopeCode(response: LightMyRequestResponse): string | undefined {
    try {
      return (response.json() as { error?: { code?: string } }).error?.code;
    } catch {
      return undefined;
    }
  }

  // Resources. Project A is the default project; B is another project of the same organisation.
  const identity = test.app.svc.container.resolve(Tokens.Identity);
  const projectA = test.defaultProjectId;
  const projectB = ((await test.call('POST', '/client/projects', { body: { name: 'matrix project B' } })).json() as { id: string }).id;
  /** `projects:write` reaches every project, so the project-bound keys hold every other scope. */
  const projectBoundScopes = SCOPES.filter((s) => s !== 'projects:write');
  const keyOfA = (await createKey(test, { name: 'of A', projectId: projectA, scopes: projectBoundScopes })).key;
  const keyOfB = (await createKey(test, { name: 'of B', projectId: projectB, scopes: projectBoundScopes })).key;
  const memberOfB = await addPerson(test, { role: 'member' });
  await identity.projectMembers.upsert({ projectId: projectB, personId: memberOfB.personId, role: 'admin' });
  const viewerOfA = await addPerson(test, { role: 'member' });
  await identity.projectMembers.upsert({ projectId: projectA, personId: viewerOfA.personId, role: 'viewer' });
  const developerOfA = await addPerson(test, { role: 'member' });
  await identity.projectMembers.upsert({ projectId: projectA, personId: developerOfA.personId, role: 'developer' });

  const adminOfOrg = await addPerson(test, { role: 'admin' });

  /** A record of each kind plugins declare (core/identity/authorization.ts RecordKind), made in project A by its owner (an .invalid name never resolves, so nothing is sent anywhere). */
  const RECORD_FIXTURES: Readonly<Record<string, () => Promise<string>>> = {
    // An app of project A with its web service and a queued deployment, stored as the deploy route stores them (nothing built).
    app: async () => (await storedApp(test, `app-${randomUUID().slice(0, 8)}`)).appId,
    service: async () => (await storedApp(test, `app-${randomUUID().slice(0, 8)}`)).serviceId,
    deployment: async () => (await storedApp(test, `app-${randomUUID().slice(0, 8)}`)).deploymentId,
    'webhook endpoint': async () => {
      const response = await test.call('POST', '/client/webhooks', { body: { url: 'https://hooks.example.invalid/in', eventTypes: ['key.created'], projectId: projectA } });
      if (response.statusCode !== 201) throw new Error(`webhook fixture: ${response.statusCode} ${response.body}`);
      return (response.json() as { id: string }).id;
    },
    // An MCP upstream of project A whose name never resolves: it is saved, its discovery fails.
    'mcp upstream': () => upstreamOfA(),
    // A tool of such an upstream, stored as a discovery stores one (nothing answers at .invalid).
    'mcp tool': async () => {
      const id = randomUUID();
      const now = new Date();
      await new ToolStore(database).insert(
        database,
        {
          id,
          upstreamId: await sharedUpstreamOfA(),
          organizationId: test.organizationId,
          projectId: projectA,
          enabled: false,
          name: `tool-${id}`,
          title: null,
          description: null,
          inputSchema: { type: 'object' },
          outputSchema: null,
          annotations: null,
        },
        now,
      );
      return id;
    },
    // A tool group of project A, and a grant of one to a fresh key of project A.
    'mcp group': () => groupOfA(),
    'mcp grant': async () => {
      const keyId = (await createKey(test, { name: 'granted', projectId: projectA })).id;
      const response = await test.call('POST', '/client/mcp/grants', { body: { groupId: await groupOfA(), keyId } });
      if (response.statusCode !== 201) throw new Error(`grant fixture: ${response.statusCode} ${response.body}`);
      return (response.json() as { id: string }).id;
    },
    // A pending approval of a call by a fresh key of project A of such a tool, asked of the gate as the call path asks.
    'mcp approval': async () => {
      const toolId = await RECORD_FIXTURES['mcp tool']!();
      const keyId = (await createKey(test, { name: 'agent', projectId: projectA })).id;
      const outcome = await test.app.svc.container.resolve(ToolGatewayTokens.Approvals).decide(
        {
          organizationId: test.organizationId,
          projectId: projectA,
          keyId,
          toolId,
          upstreamId: await sharedUpstreamOfA(),
          gatewayName: 'fixture__tool',
          argumentsHash: '0'.repeat(64),
          requestId: 'req_fixture',
        },
        { waitMs: 0, signal: new AbortController().signal },
      );
      return outcome.approvalId;
    },
    // An OAuth app of project A whose authorization server never resolves (nothing is asked at create).
    'mcp oauth app': async () => {
      const response = await test.call('POST', '/client/mcp/oauth-apps', {
        body: { name: 'fixture', clientId: 'fixture-client', authorizationServerUrl: 'https://auth.example.invalid', projectId: projectA },
      });
      if (response.statusCode !== 201) throw new Error(`oauth app fixture: ${response.statusCode} ${response.body}`);
      return (response.json() as { id: string }).id;
    },
    // A /v1 file (plugins/files), uploaded by a key of project A.
    file: async () => {
      const { body, contentType } = await formBody({ purpose: 'assistants', file: { bytes: Buffer.from('of project A'), filename: 'a.txt' } });
      const response = await test.call('POST', '/v1/files', { token: keyOfA, body, headers: { 'content-type': contentType } });
      if (response.statusCode !== 200) throw new Error(`file fixture: ${response.statusCode} ${response.body}`);
      return (response.json() as { id: string }).id;
    },
    // A /v1 batch (plugins/batches) of project A. Stored as the plugin stores one: this app serves no
    // model that takes batches, and what is checked here is who reaches the record.
    batch: async () => {
      const id = randomUUID();
      const created = new Date();
      await batchStore.insert(
        database,
        {
          id,
          organizationId: test.organizationId,
          projectId: projectA,
          keyId: randomUUID(),
          endpoint: '/v1/chat/completions',
          inputFileId: randomUUID(),
          completionWindow: '24h',
          metadata: null,
          holdId: null,
          total: 0,
          createdAt: created,
          expiresAt: new Date(created.getTime() + 86_400_000),
        },
        [],
      );
      // Ended, so every route of it has something to answer (its content, a cancel refused as too late).
      await database.query(`UPDATE batches SET status = 'completed', completed_at = $2 WHERE id = $1`, [id, created]);
      return id;
    },
  };
  const database = test.app.svc.container.resolve(Tokens.Database);
  const batchStore = new BatchStore(database);

  /** One upstream of project A for every tool fixture: a tool's operations never delete its upstream. */
  let sharedUpstream: Promise<string> | null = null;
  const sharedUpstreamOfA = () => (sharedUpstream ??= upstreamOfA());

  async function upstreamOfA(): Promise<string> {
    const response = await test.call('POST', '/client/mcp/upstreams', {
      body: { name: 'fixture', slug: `f-${randomUUID().slice(0, 8)}`, url: 'https://mcp.example.invalid/mcp', projectId: projectA },
    });
    if (response.statusCode !== 201) throw new Error(`upstream fixture: ${response.statusCode} ${response.body}`);
    return (response.json() as { id: string }).id;
  }

  async function groupOfA(): Promise<string> {
    const response = await test.call('POST', '/client/mcp/groups', { body: { name: 'fixture', projectId: projectA } });
    if (response.statusCode !== 201) throw new Error(`group fixture: ${response.statusCode} ${response.body}`);
    return (response.json() as { id: string }).id;
  }

  async function resourceOfA(declaration: ResourceDeclaration): Promise<string> {
    if (typeof declaration.kind === 'object') {
      const make = RECORD_FIXTURES[declaration.kind.name];
      if (!make) throw new Error(`no fixture for record kind ${declaration.kind.name}: add one to RECORD_FIXTURES`);
      return make();
    }
    return declaration.kind === 'key' ? (await createKey(test, { name: 'resource of A', projectId: projectA })).id : projectA;
  }
  const withResources = operations.filter((op) => resourcesOf(op).length > 0);
  const keyScopes = new Set<Scope>(projectBoundScopes);
  const memberScopes = scopesForRole('member');
  /**
   * Whether the table lets a credential holding `scopes` call the operation: a person's session in `role`,
   * or (null) a key or a connector; `person` says whether it is a person's (a session or a connector).
   */
  const mayCall = (operation: AnyOperation, scopes: ReadonlySet<Scope>, role: OrgRole | null, person = role !== null) => {
    const scope = specScope(operation);
    const roles = specRoles(operation);
    return (roles === null || (role !== null && roles.includes(role))) && (person || !specPersonOnly(operation)) && (scope === null || scopes.has(scope));
  };
  const writes = (operation: AnyOperation) => resourcesOf(operation).some((r) => r.access === 'write');

  /** A request whose every declared resource is one of project A (a fresh key of A for a key resource). */
  async function requestOnProjectA(operation: AnyOperation, token: string): Promise<LightMyRequestResponse> {
    const fields: Required<InputFields> = { path: {}, query: {}, body: {} };
    for (const declaration of resourcesOf(operation) as ResourceDeclaration[]) fields[declaration.in][declaration.field] = await resourceOfA(declaration);
    const { url, body } = sampleRequest(operation, fields);
    return test.call(operation.method, MANAGEMENT_PREFIXES[0] + url, { token, ...(body !== undefined ? { body } : {}) });
  }

  const refusedOnA = (t: Test, operation: AnyOperation, who: string, response: LightMyRequestResponse) => {
    t.ok([403, 404].includes(response.statusCode) && ACCESS_REFUSALS.includes(envelopeCode(response) ?? ''), `${who}: ${label('', operation, response)}`);
  };
  const allowedOnA = (t: Test, operation: AnyOperation, who: string, response: LightMyRequestResponse) => {
    t.ok(![401, 403].includes(response.statusCode) && !ACCESS_REFUSALS.includes(envelopeCode(response) ?? '') && response.statusCode < 500, `${who}: ${label('', operation, response)}`);
  };

  const toolName = (operation: AnyOperation) => operation.name.replaceAll('.', '_');
  /** The tools the table says a credential holding `scopes` (a person's session in `role`; null for a key or a connector) may call. */
  const expectedTools = (scopes: ReadonlySet<Scope>, role: OrgRole | null, person = role !== null) =>
    operations
      .filter((op) => mayCall(op, scopes, role, person))
      .filter((op) => op.readOnly || scopes.has('mcp:write'))
      .map(toolName)
      .sort();
  const toolCode = (result: unknown) => toolError(result)?.code;

  return {
    AUTH_URL,
    test,
    operations,
    allScopesKey,
    neededScopes,
    reachesMcpWithout,
    keyWithout,
    request,
    label,
    envelopeCode,
    identity,
    projectA,
    projectB,
    projectBoundScopes,
    keyOfA,
    keyOfB,
    memberOfB,
    viewerOfA,
    developerOfA,
    adminOfOrg,
    RECORD_FIXTURES,
    resourceOfA,
    withResources,
    keyScopes,
    memberScopes,
    mayCall,
    writes,
    requestOnProjectA,
    refusedOnA,
    allowedOnA,
    toolName,
    expectedTools,
    toolCode,
  };
}

/** The matrix of one management mount (MANAGEMENT_PREFIXES): each mount is checked by one file. */
export function mountMatrix(t: Test, matrix: Awaited<ReturnType<typeof scopeMatrixApp>>, prefix: (typeof MANAGEMENT_PREFIXES)[number]): void {
  const { test, operations, request, label, envelopeCode, keyWithout, allScopesKey, neededScopes } = matrix;
  t.test(`${prefix}: every operation answers 401 without a credential`, async (t) => {
    for (const operation of operations) {
      const response = await request(prefix, operation, null);
      t.equal(response.statusCode, 401, label(prefix, operation, response));
    }
  });

  t.test(`${prefix}: every operation answers 401 to an unknown key`, async (t) => {
    for (const operation of operations) {
      const response = await request(prefix, operation, `svc_live_${'0'.repeat(40)}`);
      t.equal(response.statusCode, 401, label(prefix, operation, response));
    }
  });

  t.test(`${prefix}: every scoped operation answers 403 missing_scope to a key holding every other scope`, async (t) => {
    for (const operation of operations) {
      const scope = specScope(operation);
      if (scope === null) continue;
      const response = await request(prefix, operation, keyWithout.get(scope) ?? null);
      t.equal(response.statusCode, 403, label(prefix, operation, response));
      t.equal(envelopeCode(response), 'missing_scope', `${operation.name}: code missing_scope`);
    }
  });

  t.test(`${prefix}: every operation reserved to people's sessions answers 403 owner_required or role_required to a key holding every scope`, async (t) => {
    for (const operation of operations.filter(reserved)) {
      const response = await request(prefix, operation, allScopesKey);
      t.equal(response.statusCode, 403, label(prefix, operation, response));
      t.equal(envelopeCode(response), roleRefusal(operation), `${operation.name}: code ${roleRefusal(operation)}`);
    }
  });

  t.test(`${prefix}: every person-only operation answers 403 person_required to a key holding every scope`, async (t) => {
    for (const operation of operations.filter(specPersonOnly)) {
      const response = await request(prefix, operation, allScopesKey);
      t.equal(response.statusCode, 403, label(prefix, operation, response));
      t.equal(envelopeCode(response), 'person_required', `${operation.name}: code person_required`);
    }
  });

  t.test(`${prefix}: every operation lets a key holding its scope past authorisation`, async (t) => {
    for (const operation of operations.filter((op) => !reserved(op) && !specPersonOnly(op) && specAccess(op) !== 'unlisted')) {
      const response = await request(prefix, operation, allScopesKey);
      t.notOk([401, 403].includes(response.statusCode), label(prefix, operation, response));
      t.ok(response.statusCode < 500, `${operation.name}: no server error`);
    }
  });

  t.test(`${prefix}: every operation lets the owner's session past authorisation`, async (t) => {
    for (const operation of operations) {
      const response = await request(prefix, operation, test.ownerToken);
      t.notOk([401, 403].includes(response.statusCode), label(prefix, operation, response));
      t.ok(response.statusCode < 500, `${operation.name}: no server error`);
    }
  });

  t.test(`${prefix}: a key holding only the needed scope is let past authorisation`, async (t) => {
    for (const scope of neededScopes) {
      const only = (await createKey(test, { name: `only ${scope}`, scopes: [scope] })).key;
      for (const operation of operations.filter((op) => specScope(op) === scope)) {
        const response = await request(prefix, operation, only);
        t.not(response.statusCode, 401, label(prefix, operation, response));
        t.not(envelopeCode(response), 'missing_scope', `${operation.name}: not refused for its scope`);
      }
    }
  });
}

import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import t, { type Test } from 'tap';
import { MANAGEMENT_PREFIXES } from '../../core/http/mount-operations.ts';
import { resourcesOf, type ResourceDeclaration } from '../../core/identity/authorization.ts';
import type { AnyOperation } from '../../core/operations/operations.ts';
import { ORG_ROLES, SCOPES, scopesForRole, type OrgRole, type Scope } from '../../core/identity/scopes.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { fillPath, sampleBody, sampleBodyIsValid, sampleQuery, sampleRequest, sampleToolArguments, type InputFields } from '../fixtures/operation-inputs.ts';
import { addPerson, allPlugins, buildTestApp, createKey } from '../helpers/app.ts';
import { connectorMcpClient, connectorToken, onAuthHost } from '../helpers/oauth.ts';
import { fastDeriveKey } from '../helpers/people.ts';
import { listeningBase, mcpClient, toolError } from '../helpers/mcp-client.ts';
import { formBody } from '../helpers/multipart.ts';
import { storedApp } from '../plugins/apps/apps-fixtures.ts';
import { BatchStore } from '../../plugins/batches/batch-store.ts';
import { ToolGatewayTokens } from '../../plugins/tool-gateway/index.ts';
import { ToolStore } from '../../plugins/tool-gateway/tool-store.ts';
import type { V1Route } from '../../core/http/v1-surface.ts';

/**
 * The scope matrix: every operation in the registry, on both management mounts, against a request
 * without a credential (401), a key holding every scope but the one it needs (403 missing_scope),
 * and credentials that hold it (neither 401 nor 403). Then every operation that declares a resource
 * (core/identity/authorization.ts), aimed at a project A: credentials of another project are refused,
 * credentials of project A are let through.
 */
// The /v1 routes (with the files plugin's) came on top of a run near the old 300 s on a loaded 2-core machine,
// and the tool gateway's operations on top of a run near 450 s: each upstream fixture runs a discovery.
// Calls to customers' URLs (example.invalid) each wait out the connect timeout (5 s) on a machine whose
// resolver does not answer; a shorter one only queues more lookups than libuv's threads can take.
t.setTimeout(1_800_000);
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
});
const operations: AnyOperation[] = test.app.svc.container.resolve(Tokens.Operations).list();

/**
 * Who may call a route: a key or session holding this scope, only an owner's session, only an owner's
 * or an admin's session (`admin`), any person's own session but no key or connector (`session`), any
 * person (`person`: a session or a connector, never an API key), or any valid credential.
 */
type Access = Scope | 'owner-only' | 'admin' | 'session' | 'person' | 'any';

/**
 * The expected access of every management route, written out from the spec (service-api.md,
 * Authentication 3 and the Scope columns) and, where the spec leaves a route open, from the README's
 * documented choices ("Scopes of routes the spec leaves open"). The matrix checks the code against
 * this list, never against the code's own declarations: a route missing here, or declared otherwise,
 * fails. Paths as mounted under /client and /platform/v1.
 */
const SPEC_ACCESS: ReadonlyArray<{ method: string; path: string; access: Access }> = [
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

const specPath = (operation: AnyOperation) => operation.path.replace(/:(\w+)/g, '{$1}');
/** The table's access for an operation; 'unlisted' when the table does not name it (a test fails for that). */
function specAccess(operation: AnyOperation): Access | 'unlisted' {
  return SPEC_ACCESS.find((entry) => entry.method === operation.method && entry.path === specPath(operation))?.access ?? 'unlisted';
}
/** The access an operation's declaration gives: its scope, or the sessions it is reserved to (core/identity/authorization.ts). */
function declaredAccess(operation: AnyOperation): Access | 'unlisted' {
  if (operation.ownerOnly) return 'owner-only';
  if (operation.personOnly) return 'person';
  if (!operation.roles) return operation.scope ?? 'any';
  const roles = [...operation.roles].sort().join();
  return roles === 'admin,owner' ? 'admin' : roles === 'admin,member,owner' ? 'session' : 'unlisted';
}
/** The organisation roles whose sessions alone the table lets call an operation; null when it is not reserved to people. */
function specRoles(operation: AnyOperation): readonly OrgRole[] | null {
  const access = specAccess(operation);
  return access === 'owner-only' ? ['owner'] : access === 'admin' ? ['owner', 'admin'] : access === 'session' ? ORG_ROLES : null;
}
const reserved = (operation: AnyOperation) => specRoles(operation) !== null;
/** What a credential outside an operation's roles is refused with. */
const roleRefusal = (operation: AnyOperation) => (specOwnerOnly(operation) ? 'owner_required' : 'role_required');
/** The scope the table says an operation needs, or null (reserved to sessions, any credential, unlisted). */
function specScope(operation: AnyOperation): Scope | null {
  const access = specAccess(operation);
  return access === 'owner-only' || access === 'admin' || access === 'session' || access === 'person' || access === 'any' || access === 'unlisted' ? null : access;
}
const specOwnerOnly = (operation: AnyOperation) => specAccess(operation) === 'owner-only';
/** Refused to every API key (person_required), whatever its scopes. */
const specPersonOnly = (operation: AnyOperation) => specAccess(operation) === 'person';

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

t.test('the matrix covers at least the keys, projects and account operations', async (t) => {
  const names = new Set(operations.map((op) => op.name));
  for (const name of [
    'keys.list',
    'keys.create',
    'keys.get',
    'keys.update',
    'keys.delete',
    'projects.list',
    'projects.create',
    'projects.get',
    'projects.update',
    'projects.delete',
    'projects.members.list',
    'projects.members.add',
    'projects.members.update',
    'projects.members.remove',
    'account.whoami',
    'organizations.list',
    'organizations.setDefault',
  ]) {
    t.ok(names.has(name), `${name} is registered`);
  }
});

t.test('every operation with a body has a valid sample body (add new ones to BODY_OVERRIDES)', async (t) => {
  for (const operation of operations) {
    if (operation.body) t.ok(sampleBodyIsValid(operation), `${operation.name}: ${JSON.stringify(sampleBody(operation))}`);
  }
});

t.test('every operation names a scope the spec lists, or null', async (t) => {
  for (const operation of operations) {
    t.ok(operation.scope === null || (SCOPES as readonly string[]).includes(operation.scope), `${operation.name}: ${String(operation.scope)}`);
  }
});

t.test("every operation is in the spec's scope table and declares the access the table gives it", async (t) => {
  for (const operation of operations) {
    t.equal(declaredAccess(operation), specAccess(operation), `${operation.name}: ${operation.method} ${specPath(operation)}`);
  }
});

t.test("every route of the spec's scope table exists", async (t) => {
  const routes = new Set(operations.map((op) => `${op.method} ${specPath(op)}`));
  for (const { method, path } of SPEC_ACCESS) t.ok(routes.has(`${method} ${path}`), `${method} ${path}`);
});

for (const prefix of MANAGEMENT_PREFIXES) {
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

t.test('the management index answers 401 without a credential on both mounts', async (t) => {
  for (const prefix of MANAGEMENT_PREFIXES) {
    t.equal((await test.call('GET', `${prefix}/`, { token: null })).statusCode, 401, prefix);
  }
});

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

t.test("operations reserved to owners and admins refuse a member's session with role_required and let an admin's past; those for any person's session let a member's past", async (t) => {
  for (const operation of operations.filter(reserved)) {
    const roles = specRoles(operation)!;
    for (const [who, role, token] of [
      ['admin', 'admin', adminOfOrg.token],
      ['member', 'member', developerOfA.token],
    ] as const) {
      const response = await request(MANAGEMENT_PREFIXES[0], operation, token);
      if (roles.includes(role)) {
        t.notOk([401, 403].includes(response.statusCode), `${who}: ${label('', operation, response)}`);
        t.ok(response.statusCode < 500, `${who}: ${operation.name}: no server error`);
      } else {
        t.equal(response.statusCode, 403, `${who}: ${label('', operation, response)}`);
        t.equal(envelopeCode(response), roleRefusal(operation), `${who}: ${operation.name}: code ${roleRefusal(operation)}`);
      }
    }
  }
});

const ACCESS_REFUSALS = [
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

t.test('operations that name a project or a key in their input declare it as their resource', async (t) => {
  for (const operation of operations) {
    const fields = [operation.params, operation.query, operation.body].flatMap((schema) => Object.keys((schema as { shape?: object } | undefined)?.shape ?? {}));
    const namesOne = fields.includes('projectId') || /^\/(projects|keys)\/:id/.test(operation.path);
    if (namesOne) t.ok(resourcesOf(operation).length > 0, `${operation.name} declares a resource`);
  }
  t.ok(withResources.length >= 10, 'keys and projects operations declare resources');
});

t.test('every record kind an operation declares has a fixture', async (t) => {
  for (const operation of withResources) {
    for (const declaration of resourcesOf(operation)) {
      if (typeof declaration.kind === 'object') t.ok(RECORD_FIXTURES[declaration.kind.name], `${operation.name}: ${declaration.kind.name}`);
    }
  }
});

t.test('a key of another project is refused every resource of project A', async (t) => {
  for (const operation of withResources.filter((op) => mayCall(op, keyScopes, null))) refusedOnA(t, operation, 'key of B', await requestOnProjectA(operation, keyOfB));
});

t.test('a member without a role on project A is refused its resources', async (t) => {
  for (const operation of withResources.filter((op) => mayCall(op, memberScopes, 'member'))) refusedOnA(t, operation, 'member of B', await requestOnProjectA(operation, memberOfB.token));
});

t.test('a viewer of project A is refused every write on it and allowed every read', async (t) => {
  for (const operation of withResources.filter((op) => mayCall(op, memberScopes, 'member'))) {
    const response = await requestOnProjectA(operation, viewerOfA.token);
    if (writes(operation)) refusedOnA(t, operation, 'viewer of A', response);
    else allowedOnA(t, operation, 'viewer of A', response);
  }
});

t.test("a key of project A and a developer of project A are let through to project A's resources", async (t) => {
  for (const operation of withResources) {
    if (mayCall(operation, keyScopes, null)) allowedOnA(t, operation, 'key of A', await requestOnProjectA(operation, keyOfA));
    if (mayCall(operation, memberScopes, 'member')) allowedOnA(t, operation, 'developer of A', await requestOnProjectA(operation, developerOfA.token));
    if (!reserved(operation)) allowedOnA(t, operation, 'key of A with projects:write', await requestOnProjectA(operation, allScopesKey));
    allowedOnA(t, operation, 'owner', await requestOnProjectA(operation, test.ownerToken));
  }
});

t.test("the registry's authorize decides the same without HTTP, for the MCP surface", async (t) => {
  const registry = test.app.svc.container.resolve(Tokens.Operations);
  const authenticator = test.app.svc.container.resolve(Tokens.Authenticator);
  const get = registry.get('keys.get')!;
  const { id } = await createKey(test, { name: 'asked of the registry', projectId: projectA });
  const input = { params: { id }, query: {}, body: undefined };
  const ofB = await authenticator.authenticate(`Bearer ${keyOfB}`);
  await t.rejects(registry.authorize(ofB, get, input), { status: 404, code: 'key_not_found' });
  const ofA = await authenticator.authenticate(`Bearer ${keyOfA}`);
  const decision = await registry.authorize(ofA, get, input);
  t.match(decision.resources, [{ kind: 'key', key: { id, projectId: projectA }, project: { id: projectA } }]);
});

t.test('a key that may write keys grants no scope or model beyond its own and changes none of its own restrictions', async (t) => {
  const held: Scope[] = ['inference', 'keys:read', 'keys:write'];
  const narrow = await createKey(test, { name: 'narrow writer', scopes: held, models: ['mock-small'] });
  const target = await createKey(test, { name: 'target of the narrow writer', models: ['mock-small'] });
  const as = (method: string, url: string, body: Record<string, unknown>) => test.call(method, url, { token: narrow.key, body });
  for (const scope of SCOPES.filter((s) => !held.includes(s))) {
    t.equal(envelopeCode(await as('POST', '/client/keys', { name: 'wider', scopes: [scope] })), 'scope_escalation', `create granting ${scope}`);
    t.equal(envelopeCode(await as('PATCH', `/client/keys/${target.id}`, { scopes: [scope] })), 'scope_escalation', `update granting ${scope}`);
  }
  for (const models of [null, ['mock-small', 'mock-large']]) {
    t.equal(envelopeCode(await as('POST', '/client/keys', { name: 'wider', models })), 'limit_escalation', `create with models ${JSON.stringify(models)}`);
    t.equal(envelopeCode(await as('PATCH', `/client/keys/${target.id}`, { models })), 'limit_escalation', `update with models ${JSON.stringify(models)}`);
  }
  const own = { scopes: held, models: ['mock-small'], expiresAt: null, spendCap: null, rateLimits: { concurrency: null } };
  for (const [field, value] of Object.entries(own)) {
    t.equal(envelopeCode(await as('PATCH', `/client/keys/${narrow.id}`, { [field]: value })), 'key_cannot_change_itself', `its own ${field}`);
  }
});

// The /v1 surface: every route GET /v1 lists, whichever plugin mounted it (core/http/v1-surface.ts
// collects them with their route config). Spec (Authentication 2): /v1 routes require `inference`;
// API keys only (README: a session there would be billed to no key). A route declaring a resource
// (core/http/route-resources.ts) is aimed at project A's record like the operations above.
const v1Routes: readonly V1Route[] = test.app.svc.v1Routes;
const v1Label = (route: V1Route, response: LightMyRequestResponse) => `${route.method} ${route.path} -> ${response.statusCode} ${response.body.slice(0, 200)}`;
const v1Resources = (route: V1Route): ResourceDeclaration[] => (route.auth ? [route.auth.resource ?? []].flat() : []) as ResourceDeclaration[];
async function v1Request(route: V1Route, token: string | null, values: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  const url = route.path.replace(/\{(\w+)\}/g, (_m, name: string) => encodeURIComponent(values[name] ?? randomUUID()));
  // A resource named in the body (a batch's input file) is sent there.
  const inBody = v1Resources(route).filter((declaration) => declaration.in === 'body');
  const body = inBody.length > 0 ? Object.fromEntries(inBody.map((declaration) => [declaration.field, values[declaration.field] ?? randomUUID()])) : undefined;
  return test.call(route.method, url, { token, ...(body ? { body } : {}) });
}
/** The code of a refusal: the envelope's, or for a route speaking Anthropic's API (its own error shape, no code) its error type. */
const v1Refusal = (response: LightMyRequestResponse) => envelopeCode(response) ?? (response.json() as { error?: { type?: string } }).error?.type;
const noInference = keyWithout.get('inference') ?? (await createKey(test, { name: 'all but inference (v1)', scopes: SCOPES.filter((s) => s !== 'inference') })).key;

t.test('/v1: the matrix sees every gateway route, the files plugin’s included', async (t) => {
  const listed = new Set(v1Routes.map((route) => `${route.method} ${route.path}`));
  for (const endpoint of ['GET /v1/models', 'POST /v1/chat/completions', 'POST /v1/files', 'GET /v1/files', 'GET /v1/files/{id}', 'DELETE /v1/files/{id}', 'GET /v1/files/{id}/content']) {
    t.ok(listed.has(endpoint), endpoint);
  }
  const index = (await test.call('GET', '/v1', { token: allScopesKey })).json() as { endpoints: string[] };
  t.same([...index.endpoints].sort(), [...listed].sort(), 'GET /v1 lists exactly these');
});

t.test('/v1: every route declares the inference scope', async (t) => {
  for (const route of v1Routes) t.equal(route.auth === false ? false : route.auth?.scope, 'inference', `${route.method} ${route.path}`);
});

t.test('/v1: every route answers 401 without a credential and to an unknown key', async (t) => {
  for (const route of v1Routes) {
    t.equal((await v1Request(route, null)).statusCode, 401, `${route.method} ${route.path}`);
    t.equal((await v1Request(route, `svc_live_${'0'.repeat(40)}`)).statusCode, 401, `${route.method} ${route.path}`);
  }
});

t.test("/v1: every route answers a person's session 401 api_key_required", async (t) => {
  for (const route of v1Routes) {
    const response = await v1Request(route, test.ownerToken);
    t.equal(response.statusCode, 401, v1Label(route, response));
    t.ok(['api_key_required', 'authentication_error'].includes(v1Refusal(response) ?? ''), `${route.method} ${route.path}: api_key_required`);
  }
});

t.test('/v1: every route answers 403 missing_scope to a key holding every scope but inference', async (t) => {
  for (const route of v1Routes) {
    const response = await v1Request(route, noInference);
    t.equal(response.statusCode, 403, v1Label(route, response));
    t.ok(['missing_scope', 'permission_error'].includes(v1Refusal(response) ?? ''), `${route.method} ${route.path}: missing_scope`);
  }
});

t.test('/v1: every route lets a key holding only inference past authorisation', async (t) => {
  const only = (await createKey(test, { name: 'only inference (v1)', scopes: ['inference'] })).key;
  for (const route of v1Routes) {
    const response = await v1Request(route, only);
    t.notOk([401, 403].includes(response.statusCode), v1Label(route, response));
    t.ok(response.statusCode < 500, `${route.method} ${route.path}: no server error`);
  }
});

t.test("/v1: every route declaring a resource refuses keys of another project, even holding projects:write, with the resource's 404; a key of A is let through", async (t) => {
  const ofBWithEveryScope = (await createKey(test, { name: 'of B, every scope (v1)', projectId: projectB, scopes: [...SCOPES] })).key;
  const declaring = v1Routes.filter((route) => v1Resources(route).length > 0);
  t.ok(declaring.length >= 3, `${declaring.length} routes declare a resource`);
  for (const route of declaring) {
    const values: Record<string, string> = {};
    for (const declaration of v1Resources(route)) values[declaration.field] = await resourceOfA(declaration);
    for (const [who, token] of [
      ['key of B', keyOfB],
      ['key of B holding projects:write', ofBWithEveryScope],
    ] as const) {
      const response = await v1Request(route, token, values);
      t.ok(response.statusCode === 404 && ACCESS_REFUSALS.includes(envelopeCode(response) ?? ''), `${who}: ${v1Label(route, response)}`);
    }
    const allowed = await v1Request(route, keyOfA, values);
    t.ok(![401, 403, 404].includes(allowed.statusCode) && allowed.statusCode < 500, `key of A: ${v1Label(route, allowed)}`);
  }
});

// The same matrix at /mcp: every operation as a tool, for keys and people's sessions alike. Using
// /mcp takes mcp:read; a write tool also takes mcp:write; otherwise exactly the HTTP surface's rules.
const mcpBase = await listeningBase(test);
const toolName = (operation: AnyOperation) => operation.name.replaceAll('.', '_');
/** The tools the table says a credential holding `scopes` (a person's session in `role`; null for a key or a connector) may call. */
const expectedTools = (scopes: ReadonlySet<Scope>, role: OrgRole | null, person = role !== null) =>
  operations
    .filter((op) => mayCall(op, scopes, role, person))
    .filter((op) => op.readOnly || scopes.has('mcp:write'))
    .map(toolName)
    .sort();
const toolCode = (result: unknown) => toolError(result)?.code;

t.test('/mcp: every credential kind lists exactly the tools the scope table gives it', async (t) => {
  const allScopes = new Set<Scope>(SCOPES);
  const cases: Array<{ who: string; token: string; scopes: ReadonlySet<Scope>; role: OrgRole | null }> = [
    { who: "owner's session", token: test.ownerToken, scopes: scopesForRole('owner'), role: 'owner' },
    { who: "admin's session", token: adminOfOrg.token, scopes: scopesForRole('admin'), role: 'admin' },
    { who: "member's session", token: developerOfA.token, scopes: memberScopes, role: 'member' },
    { who: 'key holding every scope', token: allScopesKey, scopes: allScopes, role: null },
    {
      who: 'key without mcp:write',
      token: keyWithout.get('mcp:write' as Scope) ?? (await createKey(test, { name: 'no mcp:write', scopes: SCOPES.filter((s) => s !== 'mcp:write') })).key,
      scopes: new Set(SCOPES.filter((s) => s !== 'mcp:write')),
      role: null,
    },
  ];
  for (const scope of neededScopes.filter(reachesMcpWithout))
    cases.push({ who: `key without ${scope}`, token: keyWithout.get(scope)!, scopes: new Set(SCOPES.filter((s) => s !== scope)), role: null });
  for (const { who, token, scopes, role } of cases) {
    const client = await mcpClient(t, mcpBase, token);
    const listed = (await client.listTools()).tools.map((tool) => tool.name);
    t.same(listed, expectedTools(scopes, role), who);
  }
});

t.test('/mcp: a key without mcp:read is refused 403 missing_scope', async (t) => {
  const noMcp = (await createKey(test, { name: 'no mcp:read', scopes: SCOPES.filter((s) => s !== 'mcp:read') })).key;
  await t.rejects(mcpClient(t, mcpBase, noMcp), { code: 403 });
});

t.test('/mcp: every scoped tool is refused missing_scope to a key holding every other scope', async (t) => {
  for (const operation of operations) {
    const scope = specScope(operation);
    if (scope === null || !reachesMcpWithout(scope)) continue;
    const client = await mcpClient(t, mcpBase, keyWithout.get(scope)!);
    const result = await client.callTool({ name: toolName(operation), arguments: sampleToolArguments(operation) });
    t.equal(toolCode(result), 'missing_scope', operation.name);
  }
});

t.test("/mcp: every tool reserved to people's sessions is refused owner_required or role_required to a key holding every scope", async (t) => {
  const client = await mcpClient(t, mcpBase, allScopesKey);
  for (const operation of operations.filter(reserved)) {
    t.equal(toolCode(await client.callTool({ name: toolName(operation), arguments: sampleToolArguments(operation) })), roleRefusal(operation), operation.name);
  }
});

t.test('/mcp: every person-only tool is refused person_required to a key holding every scope', async (t) => {
  const client = await mcpClient(t, mcpBase, allScopesKey);
  for (const operation of operations.filter(specPersonOnly)) {
    t.equal(toolCode(await client.callTool({ name: toolName(operation), arguments: sampleToolArguments(operation) })), 'person_required', operation.name);
  }
});

t.test("/mcp: every tool lets a key holding its scope and the owner's session past authorisation", async (t) => {
  const refusals = ['missing_scope', 'owner_required', 'role_required', 'tool_not_found', 'internal_error'];
  const asKey = await mcpClient(t, mcpBase, allScopesKey);
  const asOwner = await mcpClient(t, mcpBase, test.ownerToken);
  for (const operation of operations) {
    if (!reserved(operation) && !specPersonOnly(operation)) {
      const code = toolCode(await asKey.callTool({ name: toolName(operation), arguments: sampleToolArguments(operation) }));
      t.notOk(refusals.includes(code ?? ''), `key: ${operation.name} -> ${code}`);
    }
    const code = toolCode(await asOwner.callTool({ name: toolName(operation), arguments: sampleToolArguments(operation) }));
    t.notOk(refusals.includes(code ?? ''), `owner: ${operation.name} -> ${code}`);
  }
});

t.test("/mcp: a key of another project and a member without a role are refused project A's resources; a key of A is let through", async (t) => {
  const ofB = await mcpClient(t, mcpBase, keyOfB);
  const member = await mcpClient(t, mcpBase, memberOfB.token);
  const ofA = await mcpClient(t, mcpBase, keyOfA);
  for (const operation of withResources) {
    const fields: Required<InputFields> = { path: {}, query: {}, body: {} };
    for (const declaration of resourcesOf(operation) as ResourceDeclaration[]) fields[declaration.in][declaration.field] = await resourceOfA(declaration);
    const call = { name: toolName(operation), arguments: sampleToolArguments(operation, fields) };
    if (mayCall(operation, keyScopes, null)) {
      t.ok(ACCESS_REFUSALS.includes(toolCode(await ofB.callTool(call)) ?? ''), `key of B: ${operation.name}`);
      t.notOk(ACCESS_REFUSALS.includes(toolCode(await ofA.callTool(call)) ?? ''), `key of A: ${operation.name}`);
    }
    if (mayCall(operation, memberScopes, 'member')) t.ok(ACCESS_REFUSALS.includes(toolCode(await member.callTool(call)) ?? ''), `member of B: ${operation.name}`);
  }
});

// The same at {auth_url}/mcp for connectors that signed in over OAuth: a person (an organisation owner
// here) confined to the project picked on the consent page, holding the scopes granted there. The
// table decides their tools exactly as for a key holding those scopes: owner-only tools never, even
// for an owner, and a connector of project B reaches nothing of project A.
const auth = onAuthHost(test, AUTH_URL);
/** What a connector may be granted: every scope but `inference` (connectors never call /v1). */
const grantable = SCOPES.filter((s) => s !== 'inference');
const grantOf = (scopes: readonly Scope[]) => scopes.join(' ');
const connectorWithout = new Map<Scope, string>();
for (const scope of [...neededScopes, 'mcp:write' as Scope]) {
  connectorWithout.set(scope, await connectorToken(auth, { scope: grantOf(grantable.filter((s) => s !== scope)) }));
}
const connectorOfA = await connectorToken(auth);
/** Whether a connector can hold the operation's scope at all (it is never granted inference). */
const grantableScope = (op: AnyOperation) => specScope(op) === null || (grantable as readonly Scope[]).includes(specScope(op)!);
const connectorOfB = await connectorToken(auth, { projectId: projectB });

t.test("{auth_url}/mcp: connectors with different grants list exactly the tools the scope table gives them, never ones reserved to people's sessions", async (t) => {
  const cases: Array<{ who: string; token: string; scopes: ReadonlySet<Scope> }> = [
    { who: 'connector granted every scope', token: connectorOfA, scopes: new Set(grantable) },
    { who: 'connector granted only mcp:read', token: await connectorToken(auth, { scope: 'mcp:read' }), scopes: new Set<Scope>(['mcp:read']) },
    { who: 'connector granted mcp:read and keys:read', token: await connectorToken(auth, { scope: 'mcp:read keys:read' }), scopes: new Set<Scope>(['mcp:read', 'keys:read']) },
  ];
  for (const [scope, token] of [...connectorWithout].filter(([scope]) => reachesMcpWithout(scope)))
    cases.push({ who: `connector granted all but ${scope}`, token, scopes: new Set(grantable.filter((s) => s !== scope)) });
  for (const { who, token, scopes } of cases) {
    const client = await connectorMcpClient(t, auth, token);
    const listed = (await client.listTools()).tools.map((tool) => tool.name);
    t.same(listed, expectedTools(scopes, null, true), who);
    t.notOk(
      listed.some((name) => operations.some((op) => reserved(op) && toolName(op) === name)),
      `${who}: no owner-only or people's tool`,
    );
  }
});

t.test('{auth_url}/mcp: a connector granted no mcp:read is refused 403 missing_scope', async (t) => {
  const token = await connectorToken(auth, { scope: grantOf(grantable.filter((s) => s !== 'mcp:read')) });
  await t.rejects(connectorMcpClient(t, auth, token), { code: 403 });
});

t.test('{auth_url}/mcp: every scoped tool is refused missing_scope to a connector granted every other scope', async (t) => {
  for (const operation of operations) {
    const scope = specScope(operation);
    if (scope === null || !reachesMcpWithout(scope)) continue;
    const client = await connectorMcpClient(t, auth, connectorWithout.get(scope)!);
    t.equal(toolCode(await client.callTool({ name: toolName(operation), arguments: sampleToolArguments(operation) })), 'missing_scope', operation.name);
  }
});

t.test('{auth_url}/mcp: every write tool is refused missing_scope to a connector granted all but mcp:write', async (t) => {
  const client = await connectorMcpClient(t, auth, connectorWithout.get('mcp:write')!);
  for (const operation of operations.filter((op) => !op.readOnly && !reserved(op) && grantableScope(op))) {
    const error = toolError(await client.callTool({ name: toolName(operation), arguments: sampleToolArguments(operation) }));
    t.match(error, { code: 'missing_scope', param: null, message: /mcp:write/ }, operation.name);
  }
});

t.test("{auth_url}/mcp: every tool reserved to people's sessions is refused owner_required or role_required to a connector granted every scope by an owner", async (t) => {
  const client = await connectorMcpClient(t, auth, connectorOfA);
  for (const operation of operations.filter(reserved)) {
    t.equal(toolCode(await client.callTool({ name: toolName(operation), arguments: sampleToolArguments(operation) })), roleRefusal(operation), operation.name);
  }
});

t.test('{auth_url}/mcp: every other tool lets a connector holding its scope past authorisation', async (t) => {
  const refusals = ['missing_scope', 'owner_required', 'role_required', 'tool_not_found', 'internal_error'];
  const client = await connectorMcpClient(t, auth, connectorOfA);
  for (const operation of operations.filter((op) => !reserved(op) && grantableScope(op))) {
    const code = toolCode(await client.callTool({ name: toolName(operation), arguments: sampleToolArguments(operation) }));
    t.notOk(refusals.includes(code ?? ''), `${operation.name} -> ${code}`);
  }
});

t.test("{auth_url}/mcp: a connector of another project is refused project A's resources (a key of A is not found); a connector of A is let through", async (t) => {
  const ofB = await connectorMcpClient(t, auth, connectorOfB);
  const ofA = await connectorMcpClient(t, auth, connectorOfA);
  const grantableScopes = new Set<Scope>(grantable);
  for (const operation of withResources.filter((op) => mayCall(op, grantableScopes, null, true))) {
    const fields: Required<InputFields> = { path: {}, query: {}, body: {} };
    for (const declaration of resourcesOf(operation) as ResourceDeclaration[]) fields[declaration.in][declaration.field] = await resourceOfA(declaration);
    const call = { name: toolName(operation), arguments: sampleToolArguments(operation, fields) };
    t.ok(ACCESS_REFUSALS.includes(toolCode(await ofB.callTool(call)) ?? ''), `connector of B: ${operation.name}`);
    t.notOk(ACCESS_REFUSALS.includes(toolCode(await ofA.callTool(call)) ?? ''), `connector of A: ${operation.name}`);
  }
  const keyOfProjectA = await createKey(test, { name: 'looked up by a connector of B', projectId: projectA });
  const error = toolError(await ofB.callTool({ name: 'keys_get', arguments: { id: keyOfProjectA.id } }));
  t.match(error, { code: 'key_not_found' }, "another project's key is not found, as over HTTP (404)");
});

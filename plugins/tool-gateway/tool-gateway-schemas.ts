import { z } from 'zod';
import { listOf } from '../../core/vocabulary/pagination.ts';
import { instantView, timestampSchema } from '../../core/vocabulary/timestamps.ts';

/** The wire views below are named schemas of the OpenAPI document (`.meta({ id })`), declared once here. */

/** A slug fits `<slug>__<tool>` within the 64 characters MCP clients accept for a tool name, with room for the tool. */
export const SLUG_MAX = 30;
const slug = z
  .string()
  .min(1)
  .max(SLUG_MAX)
  .regex(/^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/, 'lower-case letters, digits and dashes, starting and ending with a letter or digit')
  .describe(`The prefix of its tools' names at /mcp/gateway (<slug>__<tool>), unique in the organisation; [a-z0-9-], at most ${SLUG_MAX}`);

const url = z.string().min(1).max(2048).describe("The server's MCP endpoint: an absolute https URL on a public address; redirects are not followed. None for the demo transport");
const transport = z
  .enum(['streamable-http', 'sse', 'demo'])
  .describe(
    'streamable-http (the current MCP transport, one endpoint), sse (the legacy HTTP+SSE transport: the URL of its event stream) or demo ' +
      "(the service's own demo tools, in process: no URL, no authentication; only where plugins.tool-gateway.demoUpstream is on)",
  );
/** Header names follow RFC 9110's token; which ones the gateway refuses is decided in the operation. */
const headerName = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, 'an HTTP header name');
const oauthScope = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[\x21\x23-\x5B\x5D-\x7E]+$/, 'an OAuth scope (RFC 6749 scope-token: printable, no space, quote or backslash)');
const oauthScopes = z.array(oauthScope).max(50);
const auth = z
  .discriminatedUnion('type', [
    z.strictObject({ type: z.literal('none') }),
    z.strictObject({
      type: z.literal('header'),
      name: headerName.describe('The header sent on every request to the server, e.g. Authorization or X-Api-Key'),
      value: z.string().min(1).max(4096).describe('Its value (e.g. "Bearer …"): kept in the secret vault, sent only to this server, never returned'),
    }),
    z.strictObject({
      type: z.literal('oauth'),
      oauthAppId: z.uuid().optional().describe("Sign in with this OAuth app (the customer's own client, of the upstream's project); default: register a client dynamically"),
      scopes: oauthScopes.optional().describe("Scopes asked for; default the app's, else those the server's metadata lists"),
    }),
  ])
  .describe("How the gateway authenticates to the server (never with the agent's credential)");
const timeoutMs = z.number().int().min(1_000).max(120_000).describe('Each request to the server (connecting, each answer); default 30000');
const newTools = z.enum(['enabled', 'disabled']).describe('Whether tools the server lists for the first time arrive switched on; default disabled (a person reviews them)');

export const createUpstreamRequest = z.strictObject({
  name: z.string().trim().min(1).max(100).describe('For people: what the server is'),
  slug: slug.optional().describe('Default: derived from the name (made unique with -2, -3…)'),
  url: url.optional().describe('Required, except for the demo transport (which has none)'),
  transport: transport.optional().describe('Default streamable-http'),
  auth: auth.optional().describe('Default {type: "none"}'),
  timeoutMs: timeoutMs.optional(),
  newTools: newTools.optional(),
  projectId: z.uuid().optional().describe("The project the server's tools belong to; default: a key's own project, else the default project"),
});

export const updateUpstreamRequest = z
  .strictObject({
    name: z.string().trim().min(1).max(100).optional(),
    slug: slug.optional().describe('Renames every tool of it at /mcp/gateway (<slug>__<tool>)'),
    url: url.optional(),
    transport: transport.optional(),
    auth: auth.optional().describe('Replaces the authentication whole; a header value must be sent again'),
    timeoutMs: timeoutMs.optional(),
    newTools: newTools.optional().describe('Applies to tools that arrive from now on'),
  })
  .refine((body) => Object.keys(body).length > 0, 'send at least one field to change');

const healthView = z
  .object({
    status: z.enum(['unknown', 'ok', 'error']).describe('unknown until the first discovery; then whether the last one succeeded'),
    checkedAt: instantView.nullable(),
    latencyMs: z.number().int().nullable().describe('How long the last discovery took (initialize and every tools/list page)'),
    errorKind: z
      .string()
      .nullable()
      .describe(
        'Why the last discovery failed: refused_address, connect, timeout, too_large, protocol, http_status, mcp_error, too_many_tools; for OAuth upstreams ' +
          'not_connected (nobody signed in yet), needs_sign_in (its server refused the refresh: sign in again), oauth (its server did not refresh)',
      ),
    error: z.string().nullable().describe("What failed, naming the server's origin, never its path, the header or an answer's body"),
    lastSuccessAt: instantView.nullable(),
    toolCount: z.number().int().describe('Tools cached from the last discovery that succeeded (kept when one fails)'),
    serverInfo: z.object({ name: z.string(), version: z.string() }).nullable(),
    protocolVersion: z.string().nullable(),
  })
  .meta({ id: 'McpUpstreamHealth' });

export const upstreamView = z
  .object({
    object: z.literal('mcp_upstream'),
    id: z.uuid(),
    projectId: z.uuid(),
    name: z.string(),
    slug: z.string(),
    url: z.string().describe('The MCP endpoint; demo: for the demo transport'),
    transport: z.enum(['streamable-http', 'sse', 'demo']),
    auth: z
      .union([
        z.object({ type: z.literal('none') }),
        z.object({ type: z.literal('header'), name: z.string() }),
        z.object({ type: z.literal('oauth'), oauthAppId: z.uuid().nullable(), scopes: z.array(z.string()).nullable() }),
      ])
      .describe('The header value and OAuth tokens are never shown; GET /mcp/upstreams/{id}/oauth has the OAuth connection'),
    timeoutMs: z.number().int(),
    newTools: z.enum(['enabled', 'disabled']),
    health: healthView,
    createdAt: instantView,
    updatedAt: instantView,
  })
  .meta({ id: 'McpUpstream', description: "A customer's MCP server, without its header value" });

export const upstreamListView = listOf(upstreamView);

export const upstreamRemovalView = z
  .object({ object: z.literal('ack'), ok: z.literal(true), id: z.uuid() })
  .meta({ id: 'McpUpstreamRemoval', description: 'An MCP upstream deleted, with its tools and header value' });

const discoveredTool = z.object({ name: z.string(), description: z.string().nullable() });

export const upstreamTestView = z
  .object({
    object: z.literal('mcp_upstream_test'),
    ok: z.boolean(),
    serverInfo: z.object({ name: z.string(), version: z.string() }).nullable(),
    protocolVersion: z.string().nullable(),
    tools: z.array(discoveredTool),
    durationMs: z.number().int(),
    error: z.object({ kind: z.string(), message: z.string() }).optional().describe('Present when ok is false'),
  })
  .meta({ id: 'McpUpstreamTest', description: 'What a server answered to initialize and tools/list; nothing is saved' });

export const refreshView = z
  .object({
    object: z.literal('mcp_upstream_refresh'),
    ok: z.boolean(),
    added: z.array(z.string()).describe("Tools the server lists for the first time (switched on or off by the upstream's newTools)"),
    removed: z.array(z.string()).describe('Tools the server no longer lists: deleted'),
    changed: z.array(z.string()).describe('Tools whose description, schemas or annotations the server changed'),
    error: z.object({ kind: z.string(), message: z.string() }).optional().describe('Present when ok is false: no tool was changed'),
    upstream: upstreamView,
  })
  .meta({ id: 'McpUpstreamRefresh', description: 'A refresh: the tools now listed, compared with those cached' });

const approvalPolicy = z
  .enum(['never', 'always', 'destructive'])
  .describe("When a call needs a person's approval: never, always, or destructive (when the server marks the tool destructiveHint; the default)");
const alias = z
  .string()
  .min(1)
  .max(64 - SLUG_MAX - 2)
  .regex(/^[a-zA-Z0-9_-]+$/, 'letters, digits, _ and -');

export const updateToolRequest = z
  .strictObject({
    enabled: z.boolean().optional().describe('Switch the tool on or off for every bundle that holds it'),
    alias: alias.nullable().optional().describe("The name used instead of the server's in <slug>__<name>, unique within the upstream; null clears it"),
    description: z.string().max(4096).nullable().optional().describe("Shown to agents instead of the server's description; null clears it"),
    approval: approvalPolicy.optional(),
  })
  .refine((body) => Object.keys(body).length > 0, 'send at least one field to change');

export const toolView = z
  .object({
    object: z.literal('mcp_tool'),
    id: z.uuid().describe('Stable across refreshes while the server lists a tool of this name'),
    upstreamId: z.uuid(),
    projectId: z.uuid(),
    name: z.string().describe("The tool's name at the server"),
    gatewayName: z.string().describe('Its name at /mcp/gateway: <slug>__<alias or name>'),
    title: z.string().nullable(),
    description: z.string().nullable().describe("What agents see: the override when set, else the server's"),
    upstreamDescription: z.string().nullable(),
    descriptionOverride: z.string().nullable(),
    alias: z.string().nullable(),
    enabled: z.boolean(),
    approval: approvalPolicy,
    destructive: z.boolean().describe("The server's destructiveHint (MCP's default when absent: true, unless readOnlyHint)"),
    inputSchema: z.record(z.string(), z.unknown()),
    outputSchema: z.record(z.string(), z.unknown()).nullable(),
    annotations: z.record(z.string(), z.unknown()).nullable(),
    discoveredAt: instantView.describe('The last discovery that listed it'),
    changedAt: instantView.describe('When the server last changed it'),
    createdAt: instantView,
    updatedAt: instantView,
  })
  .meta({ id: 'McpTool', description: "A tool an upstream lists, with the customer's switch, alias, description and approval policy" });

export const toolListView = listOf(toolView);

export const approveToolsRequest = z.strictObject({
  ids: z.array(z.uuid()).min(1).max(500).describe('Tools to switch on, all of the one project'),
  projectId: z.uuid().optional().describe("Their project; default: a key's own project, else the default project"),
});

export const approvedToolsView = z
  .object({
    object: z.literal('mcp_tool_approval'),
    projectId: z.uuid(),
    enabled: z.array(z.uuid()).describe('Tools this call switched on'),
    alreadyEnabled: z.array(z.uuid()).describe('Tools that were on already (left as they were)'),
  })
  .meta({ id: 'McpToolApproval' });

const projectMode = z
  .enum(['off', 'governed', 'full'])
  .describe(
    'off: its keys get no tools at /mcp/gateway; governed (the default): keys get the tools their grants give, approvals apply; ' +
      'full: every key of the project gets every switched-on tool of the project, without approval (so no key may be created there)',
  );

export const switchRequest = z.strictObject({ mode: projectMode });

export const switchView = z
  .object({
    object: z.literal('mcp_project_switch'),
    projectId: z.uuid(),
    projectName: z.string(),
    mode: projectMode,
    upstreams: z.number().int(),
    tools: z.number().int(),
    enabledTools: z.number().int(),
    updatedAt: instantView.nullable().describe('null: never set (governed by default)'),
  })
  .meta({ id: 'McpProjectSwitch' });

export const switchListView = z.object({ object: z.literal('list'), data: z.array(switchView) }).meta({ id: 'McpProjectSwitchList' });

const groupName = z.string().trim().min(1).max(100).describe('For people: what the bundle is for');
const groupDescription = z.string().max(1000).describe('For people: when to grant it');

export const createGroupRequest = z.strictObject({
  name: groupName,
  description: groupDescription.optional(),
  projectId: z.uuid().optional().describe("The project whose tools it bundles and whose keys it is granted to; default: a key's own project, else the default project"),
});

export const updateGroupRequest = z
  .strictObject({
    name: groupName.optional(),
    description: groupDescription.nullable().optional().describe('null clears it'),
  })
  .refine((body) => Object.keys(body).length > 0, 'send at least one field to change');

export const groupToolsRequest = z.strictObject({
  toolIds: z.array(z.uuid()).max(500).describe("The group's tools, replacing those it held: every one a tool of the group's project (switched on or off)"),
});

const groupTool = z
  .object({
    id: z.uuid(),
    upstreamId: z.uuid(),
    name: z.string().describe("The tool's name at the server"),
    gatewayName: z.string().describe('<slug>__<alias or name>, before /mcp/gateway settles overlong or colliding names'),
    enabled: z.boolean().describe('A switched-off tool stays in the group but nobody sees it'),
  })
  .meta({ id: 'McpGroupTool' });

export const groupView = z
  .object({
    object: z.literal('mcp_group'),
    id: z.uuid(),
    projectId: z.uuid(),
    name: z.string(),
    description: z.string().nullable(),
    toolIds: z.array(z.uuid()).describe("The group's tools (a tool its server stops listing leaves every group)"),
    createdAt: instantView,
    updatedAt: instantView,
  })
  .meta({ id: 'McpGroup', description: 'A bundle of tools of one project, granted to keys of that project' });

export const groupListView = listOf(groupView);

export const groupWithToolsView = groupView
  .extend({ tools: z.array(groupTool).describe("The group's tools, ordered by gatewayName") })
  .meta({ id: 'McpGroupWithTools', description: 'A tool group with its tools' });

export const groupRemovalView = z
  .object({ object: z.literal('ack'), ok: z.literal(true), id: z.uuid() })
  .meta({ id: 'McpGroupRemoval', description: 'A tool group deleted with its grants' });

const grantNote = z.string().max(500).describe('For people: why the key holds the group');
const grantExpiry = timestampSchema.describe('After this instant the grant gives nothing (it stays listed until deleted)');

export const createGrantRequest = z.strictObject({
  groupId: z.uuid(),
  keyId: z.uuid().describe("A key of the group's project that the caller may manage; not the calling key itself"),
  note: grantNote.optional(),
  expiresAt: grantExpiry.optional(),
});

export const updateGrantRequest = z
  .strictObject({
    note: grantNote.nullable().optional().describe('null clears it'),
    expiresAt: grantExpiry.nullable().optional().describe('null: never expires'),
  })
  .refine((body) => Object.keys(body).length > 0, 'send at least one field to change');

export const grantView = z
  .object({
    object: z.literal('mcp_grant'),
    id: z.uuid(),
    projectId: z.uuid(),
    groupId: z.uuid(),
    keyId: z.uuid(),
    note: z.string().nullable(),
    expiresAt: instantView.nullable(),
    expired: z.boolean(),
    createdAt: instantView,
    updatedAt: instantView,
  })
  .meta({ id: 'McpGrant', description: 'A tool group given to a key' });

export const grantListView = listOf(grantView);

export const grantRemovalView = z.object({ object: z.literal('ack'), ok: z.literal(true), id: z.uuid() }).meta({ id: 'McpGrantRemoval', description: 'A grant withdrawn' });

const keyTool = z
  .object({
    name: z.string().describe('Its name at /mcp/gateway: <slug>__<alias or name>, at most 64 characters (cut or suffixed as the README says)'),
    toolId: z.uuid(),
    upstreamId: z.uuid(),
    upstreamSlug: z.string(),
    toolName: z.string().describe("The tool's name at the server"),
    title: z.string().nullable(),
    description: z.string().nullable(),
    inputSchema: z.record(z.string(), z.unknown()),
    annotations: z.record(z.string(), z.unknown()).nullable(),
    approval: approvalPolicy,
    destructive: z.boolean(),
    groupIds: z.array(z.uuid()).describe('The granted groups giving it (empty in a full-access project)'),
  })
  .meta({ id: 'McpKeyTool' });

export const keyToolsView = z
  .object({
    object: z.literal('list'),
    keyId: z.uuid(),
    projectId: z.uuid(),
    mode: projectMode,
    data: z.array(keyTool).describe('Ordered by name'),
  })
  .meta({ id: 'McpKeyTools', description: 'What a key sees at /mcp/gateway' });

export const appToolsRequest = z.strictObject({
  groupIds: z.array(z.uuid()).max(100).describe("The groups for the app's gateway key, all of one project the caller may write"),
});

export const appToolsView = z
  .object({
    object: z.literal('mcp_app_ai_tools'),
    appId: z.uuid(),
    groupIds: z.array(z.uuid()).describe('As given, duplicates dropped'),
    updatedAt: instantView.nullable(),
  })
  .meta({ id: 'McpAppAiTools', description: "The tool groups chosen for an app's gateway key (stored ahead of apps)" });

const oauthAppName = z.string().trim().min(1).max(100).describe('For people: which client at which server');
const clientId = z.string().min(1).max(500).describe('The client id the authorization server gave you');
const clientSecret = z.string().min(1).max(4096).describe('Its secret: kept in the secret vault, sent only to that server, never returned');
const authorizationServerUrl = z
  .string()
  .min(1)
  .max(2048)
  .describe('The authorization server (its issuer), whose RFC 8414 or OpenID metadata names its endpoints: an absolute https URL on a public address');

export const createOAuthAppRequest = z.strictObject({
  name: oauthAppName,
  clientId,
  clientSecret: clientSecret.optional().describe('Absent for a public client (PKCE alone)'),
  authorizationServerUrl,
  scopes: oauthScopes.optional().describe('Scopes asked for by upstreams using the app unless their own auth names some'),
  projectId: z.uuid().optional().describe("The app's project: only its upstreams use it; default: a key's own project, else the default project"),
});

export const updateOAuthAppRequest = z
  .strictObject({
    name: oauthAppName.optional(),
    clientId: clientId.optional(),
    clientSecret: clientSecret.nullable().optional().describe('A new secret; null removes it (a public client)'),
    authorizationServerUrl: authorizationServerUrl.optional(),
    scopes: oauthScopes.nullable().optional().describe('null clears'),
  })
  .refine((body) => Object.keys(body).length > 0, 'send at least one field to change');

export const oauthAppView = z
  .object({
    object: z.literal('mcp_oauth_app'),
    id: z.uuid(),
    projectId: z.uuid(),
    name: z.string(),
    clientId: z.string(),
    hasClientSecret: z.boolean().describe('The secret itself is never shown'),
    authorizationServerUrl: z.string(),
    scopes: z.array(z.string()).nullable(),
    createdAt: instantView,
    updatedAt: instantView,
  })
  .meta({ id: 'McpOAuthApp', description: "A customer's own OAuth client at an authorization server, without its secret" });

export const oauthAppListView = listOf(oauthAppView);

export const oauthAppRemovalView = z
  .object({ object: z.literal('ack'), ok: z.literal(true), id: z.uuid() })
  .meta({ id: 'McpOAuthAppRemoval', description: 'An OAuth app deleted with its secret' });

export const oauthStartView = z
  .object({
    object: z.literal('mcp_oauth_sign_in'),
    upstreamId: z.uuid(),
    authorizationUrl: z.string().describe("Where the person's browser goes to sign in at the upstream's authorization server"),
    state: z.string().describe('Identifies this sign-in: GET /mcp/oauth/status?state= tells whether it finished'),
    redirectUri: z.string().describe("Where the authorization server sends the browser back (the gateway's callback)"),
    expiresAt: instantView.describe('The sign-in must finish before this'),
  })
  .meta({ id: 'McpOAuthSignIn', description: 'A started OAuth sign-in to an upstream (authorization code with PKCE)' });

export const oauthConnectionView = z
  .object({
    object: z.literal('mcp_upstream_oauth'),
    upstreamId: z.uuid(),
    status: z
      .enum(['not_connected', 'connected', 'needs_sign_in'])
      .describe('not_connected: nobody signed in (or the tokens were forgotten); needs_sign_in: its server refused the refresh token'),
    reason: z.string().nullable().describe('Why it needs a sign-in again'),
    issuer: z.string().nullable().describe('The authorization server'),
    client: z.enum(['oauth_app', 'registered']).nullable().describe("The customer's OAuth app, or a client registered for this upstream (RFC 7591)"),
    oauthAppId: z.uuid().nullable(),
    clientId: z.string().nullable(),
    scopes: z.array(z.string()).nullable().describe('Scopes the server granted'),
    accessTokenExpiresAt: instantView.nullable().describe('Refreshed ahead of this; null when the server gave no expiry'),
    connectedAt: instantView.nullable().describe('When a person last signed in'),
    lastRefreshedAt: instantView.nullable(),
  })
  .meta({ id: 'McpUpstreamOAuth', description: "An OAuth upstream's connection, never a token" });

export const oauthDisconnectView = z
  .object({
    object: z.literal('mcp_upstream_oauth'),
    upstreamId: z.uuid(),
    status: z.literal('not_connected'),
    revoked: z.boolean().describe('Whether the authorization server accepted the revocation (RFC 7009); the tokens are forgotten either way'),
  })
  .meta({ id: 'McpUpstreamOAuthForgotten', description: "An OAuth upstream's tokens forgotten" });

export const oauthSignInStatusView = z
  .object({
    object: z.literal('mcp_oauth_sign_in_status'),
    upstreamId: z.uuid(),
    status: z.enum(['pending', 'connected', 'failed', 'expired']).describe('pending until the browser comes back (and while the code is exchanged)'),
    error: z.object({ code: z.string(), message: z.string() }).nullable().describe("Why it failed: the authorization server's error (access_denied…) or ours"),
    expiresAt: instantView,
  })
  .meta({ id: 'McpOAuthSignInStatus', description: 'Whether a started sign-in finished' });

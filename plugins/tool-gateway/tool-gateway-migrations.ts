import type { Migration } from '../../core/ports/database.ts';

export const toolGatewayMigrations: Migration[] = [
  {
    owner: 'tool-gateway',
    version: 1,
    name: "customers' MCP servers, their discovered tools and each project's switch",
    sql: `
-- A customer's MCP server, in one project. A header secret is in the secret vault (owner kind
-- 'mcp_upstream'), never here; auth_type leaves room for 'oauth'. The health columns are the last
-- discovery's outcome.
CREATE TABLE mcp_upstreams (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name text NOT NULL,
  -- The prefix of its tools' names at the gateway (<slug>__<tool>): unique in the organisation.
  slug text NOT NULL,
  url text NOT NULL,
  transport text NOT NULL CHECK (transport IN ('streamable-http', 'sse')),
  auth_type text NOT NULL CHECK (auth_type IN ('none', 'header')),
  auth_header_name text,
  timeout_ms integer NOT NULL,
  new_tools text NOT NULL CHECK (new_tools IN ('enabled', 'disabled')),
  health text NOT NULL DEFAULT 'unknown' CHECK (health IN ('unknown', 'ok', 'error')),
  checked_at timestamptz,
  latency_ms integer,
  error_kind text,
  error_message text,
  server_name text,
  server_version text,
  protocol_version text,
  -- The last discovery that succeeded.
  discovered_at timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  UNIQUE (organization_id, slug)
);
CREATE INDEX mcp_upstreams_org_time ON mcp_upstreams (organization_id, created_at DESC, id DESC);
CREATE INDEX mcp_upstreams_checked ON mcp_upstreams (checked_at NULLS FIRST);

-- A tool an upstream lists, identified by (upstream, its name there): the id stays the same across
-- refreshes, so what later refers to a tool (bundles, grants, approvals, call rows) refers to the id
-- with ON DELETE CASCADE, and a tool the server stops listing leaves all of them.
CREATE TABLE mcp_tools (
  id uuid PRIMARY KEY,
  upstream_id uuid NOT NULL REFERENCES mcp_upstreams(id) ON DELETE CASCADE,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name text NOT NULL,
  title text,
  description text,
  input_schema jsonb NOT NULL,
  output_schema jsonb,
  annotations jsonb,
  enabled boolean NOT NULL,
  alias text,
  description_override text,
  approval text NOT NULL DEFAULT 'destructive' CHECK (approval IN ('never', 'always', 'destructive')),
  discovered_at timestamptz NOT NULL,
  -- When the server last changed the tool's description, schemas or annotations.
  changed_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  UNIQUE (upstream_id, name),
  UNIQUE (upstream_id, alias)
);
CREATE INDEX mcp_tools_org_time ON mcp_tools (organization_id, created_at DESC, id DESC);
CREATE INDEX mcp_tools_upstream ON mcp_tools (upstream_id);

-- A project's tool gateway mode; a project without a row is 'governed'.
CREATE TABLE mcp_project_switches (
  project_id uuid PRIMARY KEY REFERENCES projects(id) ON DELETE CASCADE,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  mode text NOT NULL CHECK (mode IN ('off', 'governed', 'full')),
  updated_at timestamptz NOT NULL
);
CREATE INDEX mcp_project_switches_org ON mcp_project_switches (organization_id);
`,
  },
  {
    owner: 'tool-gateway',
    version: 2,
    name: 'tool bundles (groups), grants of them to keys, and the bundles chosen for apps',
    sql: `
-- A bundle of tools of one project, given to keys by grants.
CREATE TABLE mcp_groups (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name text NOT NULL,
  description text,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE INDEX mcp_groups_org_time ON mcp_groups (organization_id, created_at DESC, id DESC);

-- A group's tools. A tool a refresh removes (or whose upstream is deleted) leaves every group by the cascade.
CREATE TABLE mcp_group_tools (
  group_id uuid NOT NULL REFERENCES mcp_groups(id) ON DELETE CASCADE,
  tool_id uuid NOT NULL REFERENCES mcp_tools(id) ON DELETE CASCADE,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  PRIMARY KEY (group_id, tool_id)
);
CREATE INDEX mcp_group_tools_tool ON mcp_group_tools (tool_id);
CREATE INDEX mcp_group_tools_org ON mcp_group_tools (organization_id);

-- A group given to a key of the group's project (project_id is the group's, for authorization
-- without a join). A key deleted for good, or a group deleted, takes its grants along.
CREATE TABLE mcp_grants (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  group_id uuid NOT NULL REFERENCES mcp_groups(id) ON DELETE CASCADE,
  key_id uuid NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
  note text,
  expires_at timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  UNIQUE (group_id, key_id)
);
CREATE INDEX mcp_grants_org_time ON mcp_grants (organization_id, created_at DESC, id DESC);
CREATE INDEX mcp_grants_key ON mcp_grants (key_id);

-- The groups chosen for an app's gateway key. Apps do not exist yet: app_id has no foreign key
-- until they do; the group's cascade keeps the rows honest meanwhile.
CREATE TABLE mcp_app_tool_groups (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  app_id uuid NOT NULL,
  group_id uuid NOT NULL REFERENCES mcp_groups(id) ON DELETE CASCADE,
  position integer NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (organization_id, app_id, group_id)
);
CREATE INDEX mcp_app_tool_groups_group ON mcp_app_tool_groups (group_id);
`,
  },
  {
    owner: 'tool-gateway',
    version: 3,
    name: "agents' tool calls at /mcp/gateway",
    sql: `
-- One row per tools/call at /mcp/gateway that named a tool the key sees (a name it does not see is
-- refused before anything is known of it, and leaves no row). key_id and project_id are no foreign
-- keys on purpose, as in request_logs: a key or project deleted for good keeps its usage history.
-- tool_id is set null when the tool goes; tool_name and gateway_name keep what it was called.
-- approval_id names a row of the approvals table without a foreign key (approvals may be erased
-- first). The arguments are never stored: only the SHA-256 of their canonical JSON.
CREATE TABLE mcp_tool_calls (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  project_id uuid NOT NULL,
  key_id uuid NOT NULL,
  group_id uuid REFERENCES mcp_groups(id) ON DELETE SET NULL,
  upstream_id uuid REFERENCES mcp_upstreams(id) ON DELETE SET NULL,
  upstream_slug text NOT NULL,
  tool_id uuid REFERENCES mcp_tools(id) ON DELETE SET NULL,
  tool_name text NOT NULL,
  gateway_name text NOT NULL,
  status text NOT NULL CHECK (status IN ('ok', 'tool_error', 'upstream_error', 'rate_limited', 'approval_pending', 'denied', 'expired', 'cancelled')),
  error_kind text,
  duration_ms integer NOT NULL,
  request_bytes integer NOT NULL,
  response_bytes integer NOT NULL,
  approval_id uuid,
  arguments_sha256 text NOT NULL,
  request_id text NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX mcp_tool_calls_org_time ON mcp_tool_calls (organization_id, created_at DESC, id DESC);
CREATE INDEX mcp_tool_calls_project_time ON mcp_tool_calls (project_id, created_at DESC, id DESC);
CREATE INDEX mcp_tool_calls_key_time ON mcp_tool_calls (key_id, created_at DESC);
CREATE INDEX mcp_tool_calls_tool ON mcp_tool_calls (tool_id) WHERE tool_id IS NOT NULL;
CREATE INDEX mcp_tool_calls_upstream ON mcp_tool_calls (upstream_id) WHERE upstream_id IS NOT NULL;
CREATE INDEX mcp_tool_calls_group ON mcp_tool_calls (group_id) WHERE group_id IS NOT NULL;
`,
  },
  {
    owner: 'tool-gateway',
    version: 4,
    name: "approvals of tool calls by people, bound to the exact call and the tool's policy version",
    sql: `
-- Bumped whenever what an approval is given for changes: the tool's approval policy, or a refresh
-- changing its input schema or annotations. An approval binds the version it was asked under.
ALTER TABLE mcp_tools ADD COLUMN policy_version integer NOT NULL DEFAULT 1;

-- A person's decision on one exact call: (key, tool, SHA-256 of the arguments, policy version).
-- The arguments themselves are never stored. used_at: the call it released ran (it releases one).
CREATE TABLE mcp_approvals (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  key_id uuid NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
  tool_id uuid NOT NULL REFERENCES mcp_tools(id) ON DELETE CASCADE,
  upstream_id uuid NOT NULL REFERENCES mcp_upstreams(id) ON DELETE CASCADE,
  gateway_name text NOT NULL,
  arguments_hash text NOT NULL,
  policy_version integer NOT NULL,
  request_id text NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
  requested_at timestamptz NOT NULL,
  -- Pending: until a decision is due. Approved: until the call must have been retried.
  expires_at timestamptz NOT NULL,
  decided_at timestamptz,
  -- The person who decided (no foreign key: the record outlives their membership).
  decided_by uuid,
  reason text,
  used_at timestamptz
);
-- One live approval (pending, or approved and not yet used) per exact call: identical calls share it.
CREATE UNIQUE INDEX mcp_approvals_live ON mcp_approvals (key_id, tool_id, arguments_hash, policy_version)
  WHERE status = 'pending' OR (status = 'approved' AND used_at IS NULL);
CREATE INDEX mcp_approvals_org_time ON mcp_approvals (organization_id, requested_at DESC, id DESC);
CREATE INDEX mcp_approvals_expiring ON mcp_approvals (expires_at) WHERE status IN ('pending', 'approved') AND used_at IS NULL;
CREATE INDEX mcp_approvals_tool ON mcp_approvals (tool_id);
CREATE INDEX mcp_approvals_key ON mcp_approvals (key_id);
`,
  },
  {
    owner: 'tool-gateway',
    version: 5,
    name: "OAuth upstreams: customers' OAuth apps, each upstream's OAuth connection and pending sign-ins",
    sql: `
-- A customer's own OAuth client at an authorization server (e.g. GitHub's), for upstreams whose
-- server does not register clients dynamically. Its client secret is in the secret vault (owner kind
-- 'mcp_oauth_app').
CREATE TABLE mcp_oauth_apps (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name text NOT NULL,
  client_id text NOT NULL,
  has_client_secret boolean NOT NULL,
  authorization_server_url text NOT NULL,
  scopes jsonb,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE INDEX mcp_oauth_apps_org_time ON mcp_oauth_apps (organization_id, created_at DESC, id DESC);

ALTER TABLE mcp_upstreams DROP CONSTRAINT mcp_upstreams_auth_type_check;
ALTER TABLE mcp_upstreams ADD CONSTRAINT mcp_upstreams_auth_type_check CHECK (auth_type IN ('none', 'header', 'oauth'));
-- An app in use cannot be deleted (409 oauth_app_in_use): RESTRICT says so to the database too.
ALTER TABLE mcp_upstreams ADD COLUMN auth_oauth_app_id uuid REFERENCES mcp_oauth_apps(id) ON DELETE RESTRICT;
ALTER TABLE mcp_upstreams ADD COLUMN auth_oauth_scopes jsonb;
CREATE INDEX mcp_upstreams_oauth_app ON mcp_upstreams (auth_oauth_app_id) WHERE auth_oauth_app_id IS NOT NULL;

-- An OAuth upstream's connection: which authorization server and client, and where its tokens
-- stand. The tokens (and a dynamically registered client's secret) are in the secret vault under
-- the upstream (owner kind 'mcp_upstream'). token_version and refreshing_until make refreshing a
-- compare-and-swap across replicas: one claims the refresh, the others wait for the next version.
CREATE TABLE mcp_upstream_oauth (
  upstream_id uuid PRIMARY KEY REFERENCES mcp_upstreams(id) ON DELETE CASCADE,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  status text NOT NULL CHECK (status IN ('not_connected', 'connected', 'needs_sign_in')),
  status_reason text,
  issuer text NOT NULL,
  as_metadata jsonb NOT NULL,
  resource text,
  -- The client used: an oauth app's, or one registered for this upstream (RFC 7591).
  oauth_app_id uuid REFERENCES mcp_oauth_apps(id) ON DELETE CASCADE,
  registered_client_id text,
  registered_redirect_uri text,
  scopes text,
  token_version integer NOT NULL DEFAULT 0,
  expires_at timestamptz,
  refreshing_until timestamptz,
  connected_at timestamptz,
  last_refreshed_at timestamptz,
  updated_at timestamptz NOT NULL
);
CREATE INDEX mcp_upstream_oauth_org ON mcp_upstream_oauth (organization_id);

-- A sign-in started and not yet finished: found by its state's hash, single use, short-lived. Its
-- PKCE verifier is in the secret vault (owner kind 'mcp_oauth_flow').
CREATE TABLE mcp_oauth_flows (
  id uuid PRIMARY KEY,
  state_hash text NOT NULL UNIQUE,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  upstream_id uuid NOT NULL REFERENCES mcp_upstreams(id) ON DELETE CASCADE,
  started_by text NOT NULL,
  redirect_uri text NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'exchanging', 'connected', 'failed')),
  error_code text,
  error_message text,
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL,
  finished_at timestamptz
);
CREATE INDEX mcp_oauth_flows_upstream ON mcp_oauth_flows (upstream_id);
CREATE INDEX mcp_oauth_flows_org ON mcp_oauth_flows (organization_id);
CREATE INDEX mcp_oauth_flows_expiry ON mcp_oauth_flows (expires_at);
`,
  },
  {
    owner: 'tool-gateway',
    version: 6,
    name: "the demo transport: the service's own demo tools, reached in process",
    sql: `
-- A demo upstream has no URL: its url column holds the marker 'demo:'.
ALTER TABLE mcp_upstreams DROP CONSTRAINT mcp_upstreams_transport_check;
ALTER TABLE mcp_upstreams ADD CONSTRAINT mcp_upstreams_transport_check CHECK (transport IN ('streamable-http', 'sse', 'demo'));
`,
  },
];

import type { Migration } from '../../core/ports/database.ts';

export const oauthMigrations: Migration[] = [
  {
    owner: 'oauth',
    version: 1,
    name: 'OAuth clients, authorization codes, grants and tokens of connectors',
    sql: `
-- Clients that registered themselves (RFC 7591): public clients, no secret.
CREATE TABLE oauth_clients (
  id text PRIMARY KEY,
  client_name text,
  redirect_uris jsonb NOT NULL,
  created_at timestamptz NOT NULL
);

-- One grant per approval on the consent page: the token family its refresh tokens rotate within.
-- Revoking it (revocation, a reused refresh token, a reused code) ends every token of the family.
CREATE TABLE oauth_grants (
  id uuid PRIMARY KEY,
  client_id text NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
  person_id uuid NOT NULL REFERENCES people(id) ON DELETE CASCADE,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  scopes text[] NOT NULL,
  resource text NOT NULL,
  created_at timestamptz NOT NULL,
  revoked_at timestamptz
);

-- Authorization codes, stored hashed, used once; the grant is created when the code is.
CREATE TABLE oauth_codes (
  code_hash text PRIMARY KEY,
  grant_id uuid NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
  redirect_uri text NOT NULL,
  code_challenge text NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);

-- Access and refresh tokens, stored hashed. A refresh token is used once (used_at); a second use
-- is a stolen token being replayed, and revokes the grant.
CREATE TABLE oauth_tokens (
  token_hash text PRIMARY KEY,
  grant_id uuid NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('access', 'refresh')),
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);
CREATE INDEX oauth_tokens_grant ON oauth_tokens (grant_id);
CREATE INDEX oauth_grants_person ON oauth_grants (person_id);
`,
  },
  {
    owner: 'oauth',
    version: 2,
    name: 'connections listed by organisation (GET /client/oauth/connections)',
    sql: `
CREATE INDEX oauth_grants_org_time ON oauth_grants (organization_id, created_at DESC, id DESC);
`,
  },
];

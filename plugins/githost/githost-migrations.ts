import type { Migration } from '../../core/ports/database.ts';

export const githostMigrations: Migration[] = [
  {
    owner: 'githost',
    version: 1,
    name: 'git host settings, GitHub App installations and people’s GitHub authorizations',
    sql: `
-- One row per organisation once an owner changed a setting: whether members may connect their own
-- git-host accounts, and the repository allow-list (both lists kept whichever mode is active).
CREATE TABLE githost_settings (
  organization_id uuid PRIMARY KEY REFERENCES organizations(id) ON DELETE CASCADE,
  members_may_connect boolean NOT NULL DEFAULT false,
  restricted boolean NOT NULL DEFAULT false,
  mode text NOT NULL DEFAULT 'repos',
  allowed_repos text[] NOT NULL DEFAULT '{}',
  allowed_orgs text[] NOT NULL DEFAULT '{}',
  updated_at timestamptz NOT NULL
);

-- A GitHub App installation an organisation deploys from. shared: other organisations of this
-- service may claim it too (an installation serves every organisation that holds it).
CREATE TABLE githost_installations (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  installation_id bigint NOT NULL,
  account_login text NOT NULL,
  account_type text NOT NULL,
  shared boolean NOT NULL DEFAULT false,
  claimed_by uuid,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (organization_id, installation_id)
);
CREATE INDEX githost_installations_id ON githost_installations (installation_id);

-- A person's GitHub account, connected by OAuth. The token is in the secret vault
-- (owner kind 'githost.user', id '<organization>:<person>'), never here.
CREATE TABLE githost_authorizations (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  person_id uuid NOT NULL,
  github_user_id bigint NOT NULL,
  github_login text NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (organization_id, person_id)
);

-- An OAuth round trip under way: the state handed to GitHub (stored hashed), who asked, until when.
CREATE TABLE githost_oauth_states (
  state_hash text PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  person_id uuid NOT NULL,
  expires_at timestamptz NOT NULL
);
`,
  },
];

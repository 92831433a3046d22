import type { Migration } from '../../../core/ports/database.ts';

/** The upkeep tables (owner `apps-upkeep`), after the apps tables they hang off. */
export const upkeepMigrations: Migration[] = [
  {
    owner: 'apps-upkeep',
    version: 1,
    name: 'app storage, service settings, AI fixes',
    sql: `
-- An app's stored file: its bytes are a blob. public_token, when set, is the unguessable part of the
-- URL that serves it without a key (NULL: private).
CREATE TABLE app_storage_objects (
  id uuid PRIMARY KEY,
  app_id uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  organization_id uuid NOT NULL,
  name text NOT NULL,
  blob_key text NOT NULL,
  size bigint NOT NULL,
  content_type text NOT NULL,
  sha256 text NOT NULL,
  public_token text UNIQUE,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  UNIQUE (app_id, name)
);

-- A service's settings beside its deploys: the release command run before each start, and who is
-- mailed when a deployment fails.
CREATE TABLE app_service_settings (
  service_id uuid PRIMARY KEY REFERENCES app_services(id) ON DELETE CASCADE,
  organization_id uuid NOT NULL,
  release_command text,
  mail_on_failure boolean NOT NULL DEFAULT false,
  mail_recipients jsonb NOT NULL DEFAULT '[]',
  updated_at timestamptz NOT NULL
);

-- A fix a gateway model proposed for a failed deployment (POST /services/{id}/autofix).
CREATE TABLE app_ai_fixes (
  id uuid PRIMARY KEY,
  service_id uuid NOT NULL REFERENCES app_services(id) ON DELETE CASCADE,
  organization_id uuid NOT NULL,
  deployment_id uuid NOT NULL,
  model text NOT NULL,
  request_id text NOT NULL,
  proposal text NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX app_ai_fixes_service_time ON app_ai_fixes (service_id, created_at DESC, id DESC);
`,
  },
];

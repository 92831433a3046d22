import type { Migration } from '../../core/ports/database.ts';

export const appsMigrations: Migration[] = [
  {
    owner: 'apps',
    version: 1,
    name: 'apps, their services and deployments',
    sql: `
-- An app of one project, deployed from a git repository. source_kind 'githost' names a repository of
-- the organisation's git host (source_repo); 'url' a repository elsewhere (source_url).
CREATE TABLE apps (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name text NOT NULL,
  -- The host label the proxy answers on: <slug>.<baseDomain>. Unique across the service.
  slug text NOT NULL UNIQUE,
  source_kind text NOT NULL,
  source_repo text,
  source_url text,
  branch text NOT NULL,
  root_dir text,
  start_command text,
  deploy_on_push boolean NOT NULL,
  cell text NOT NULL,
  status text NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  UNIQUE (organization_id, name)
);
CREATE INDEX apps_org_repo ON apps (organization_id, source_repo, branch) WHERE source_kind = 'githost';

-- One web service per app for now. route_target and route_revision are what the proxy's route table
-- is loaded from: the address serving it now (NULL while nothing does) and the revision of that fact.
CREATE TABLE app_services (
  id uuid PRIMARY KEY,
  app_id uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  organization_id uuid NOT NULL,
  kind text NOT NULL,
  desired text NOT NULL,
  route_target text,
  route_deployment_id uuid,
  route_revision bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL,
  UNIQUE (app_id, kind)
);

-- One deploy of a service: a commit built (or an earlier build, for a rollback) and started.
-- timings: ms per phase (clone, build, deploy), null for a phase not run; the column NULL when nothing ran.
CREATE TABLE app_deployments (
  id uuid PRIMARY KEY,
  service_id uuid NOT NULL REFERENCES app_services(id) ON DELETE CASCADE,
  organization_id uuid NOT NULL,
  commit_sha text,
  idempotency_key text UNIQUE,
  reason text NOT NULL,
  rollback_of uuid,
  status text NOT NULL,
  failure_reason text,
  timings jsonb,
  image_size_bytes bigint,
  decision jsonb,
  artifact_dir text,
  start_command text,
  log_blob text,
  created_at timestamptz NOT NULL,
  started_at timestamptz,
  finished_at timestamptz
);
CREATE INDEX app_deployments_service_time ON app_deployments (service_id, created_at DESC, id DESC);
`,
  },
  {
    owner: 'apps',
    version: 2,
    name: 'a failed deployment says why as a code',
    sql: `
-- build_timeout, build_memory, build_failed, … (apps-views.ts FAILURE_CODES); NULL unless failed.
ALTER TABLE app_deployments ADD COLUMN failure_code text;
`,
  },
];

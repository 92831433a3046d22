import type { Migration } from '../../core/ports/database.ts';

/**
 * Schema owned by the kernel: identity and keys; then the seams capability plugins stand on, each
 * under a `core-…` owner of its own so their versions move independently of the core tables'.
 */
export const coreMigrations: Migration[] = [
  {
    owner: 'core',
    version: 1,
    name: 'identity and keys',
    // It created request_logs too, until the request log became metering's (metering@1 creates it where absent).
    formerChecksums: ['181170b181da79afa35f480fd2a8a65a332bbcd455ec1b08ba35930eb3891fb4'],
    sql: `
CREATE TABLE organizations (
  id uuid PRIMARY KEY,
  name text NOT NULL,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
  request_logging boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE people (
  id uuid PRIMARY KEY,
  email text NOT NULL,
  name text NOT NULL,
  default_organization_id uuid REFERENCES organizations(id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX people_email_key ON people (lower(email));

CREATE TABLE memberships (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  person_id uuid NOT NULL REFERENCES people(id) ON DELETE CASCADE,
  role text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, person_id)
);
CREATE INDEX memberships_person ON memberships (person_id);

CREATE TABLE projects (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  name text NOT NULL,
  is_default boolean NOT NULL DEFAULT false,
  model_allow_list text[],
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX projects_org_name ON projects (organization_id, lower(name));
CREATE UNIQUE INDEX projects_one_default ON projects (organization_id) WHERE is_default;

CREATE TABLE project_members (
  project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  person_id uuid NOT NULL REFERENCES people(id) ON DELETE CASCADE,
  role text NOT NULL CHECK (role IN ('admin', 'developer', 'viewer')),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, person_id)
);

CREATE TABLE sessions (
  id uuid PRIMARY KEY,
  person_id uuid NOT NULL REFERENCES people(id) ON DELETE CASCADE,
  token_hash text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz
);

CREATE TABLE api_keys (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  project_id uuid NOT NULL REFERENCES projects(id),
  app_id uuid,
  name text NOT NULL,
  token_hash text NOT NULL UNIQUE,
  hint text NOT NULL,
  scopes text[] NOT NULL,
  model_allow_list text[],
  disabled boolean NOT NULL DEFAULT false,
  expires_at timestamptz,
  spend_cap_micros bigint CHECK (spend_cap_micros IS NULL OR spend_cap_micros >= 0),
  spend_cap_period text CHECK (spend_cap_period IN ('day', 'week', 'month', 'total')),
  spend_cap_mode text CHECK (spend_cap_mode IN ('blocking', 'alert')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz,
  last_used_at timestamptz,
  created_by_person_id uuid,
  created_by_key_id uuid,
  CHECK ((spend_cap_micros IS NULL) = (spend_cap_period IS NULL) AND (spend_cap_micros IS NULL) = (spend_cap_mode IS NULL))
);
CREATE INDEX api_keys_org_project ON api_keys (organization_id, project_id, created_at);
`,
  },
  {
    owner: 'core',
    version: 2,
    name: 'spend caps on projects and accounts, rate limits on keys',
    sql: `
ALTER TABLE organizations ADD COLUMN spend_cap_micros bigint CHECK (spend_cap_micros IS NULL OR spend_cap_micros >= 0);
ALTER TABLE organizations ADD COLUMN spend_cap_period text CHECK (spend_cap_period IN ('day', 'week', 'month', 'total'));
ALTER TABLE organizations ADD COLUMN spend_cap_mode text CHECK (spend_cap_mode IN ('blocking', 'alert'));
ALTER TABLE projects ADD COLUMN spend_cap_micros bigint CHECK (spend_cap_micros IS NULL OR spend_cap_micros >= 0);
ALTER TABLE projects ADD COLUMN spend_cap_period text CHECK (spend_cap_period IN ('day', 'week', 'month', 'total'));
ALTER TABLE projects ADD COLUMN spend_cap_mode text CHECK (spend_cap_mode IN ('blocking', 'alert'));
ALTER TABLE api_keys ADD COLUMN rpm_limit integer CHECK (rpm_limit IS NULL OR rpm_limit > 0);
ALTER TABLE api_keys ADD COLUMN tpm_limit integer CHECK (tpm_limit IS NULL OR tpm_limit > 0);
ALTER TABLE api_keys ADD COLUMN concurrency_limit integer CHECK (concurrency_limit IS NULL OR concurrency_limit > 0);
`,
  },
  {
    owner: 'core-blobs',
    version: 1,
    name: 'blob contents in chunks',
    sql: `
CREATE TABLE blobs (
  key text COLLATE "C" PRIMARY KEY,
  size bigint NOT NULL DEFAULT 0,
  sha256 text,
  content_type text NOT NULL,
  chunk_size integer NOT NULL,
  complete boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX blobs_incomplete ON blobs (created_at) WHERE NOT complete;
CREATE TABLE blob_chunks (
  blob_key text COLLATE "C" NOT NULL REFERENCES blobs(key) ON DELETE CASCADE,
  seq integer NOT NULL,
  data bytea NOT NULL,
  PRIMARY KEY (blob_key, seq)
);
-- Uploads are mostly compressed already (audio, archives): store chunks out of line, uncompressed.
ALTER TABLE blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
`,
  },
  {
    owner: 'core-secrets',
    version: 1,
    name: 'encrypted customer secrets',
    sql: `
CREATE TABLE secrets (
  owner_kind text NOT NULL,
  owner_id text NOT NULL,
  name text NOT NULL,
  version integer NOT NULL,
  key_id text NOT NULL,
  nonce bytea NOT NULL,
  ciphertext bytea NOT NULL,
  auth_tag bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (owner_kind, owner_id, name)
);
CREATE INDEX secrets_key_id ON secrets (key_id);
`,
  },
  {
    owner: 'core-mail',
    version: 1,
    name: 'local mail outbox',
    sql: `
CREATE TABLE mail_outbox (
  id uuid PRIMARY KEY,
  sender text NOT NULL,
  recipient text NOT NULL,
  subject text NOT NULL,
  text_body text NOT NULL,
  html_body text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX mail_outbox_recipient ON mail_outbox (lower(recipient), created_at);
`,
  },
  {
    owner: 'core',
    version: 3,
    name: 'durable jobs, periodic jobs and the domain-event outbox',
    sql: `
-- The job queue (core/jobs). Every time column is written from the service's clock, not now().
CREATE TABLE jobs (
  id bigserial PRIMARY KEY,
  queue text NOT NULL,
  payload jsonb NOT NULL,
  state text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  priority integer NOT NULL DEFAULT 0,
  run_at timestamptz NOT NULL,
  attempts integer NOT NULL DEFAULT 0,
  max_attempts integer NOT NULL CHECK (max_attempts >= 1),
  idempotency_key text,
  -- A new token per claim: a worker whose lease was lost cannot finish the job another one holds.
  lease_token uuid,
  locked_until timestamptz,
  locked_by text,
  cancel_requested boolean NOT NULL DEFAULT false,
  last_error text,
  created_at timestamptz NOT NULL,
  started_at timestamptz,
  finished_at timestamptz,
  CHECK ((state = 'running') = (lease_token IS NOT NULL))
);
CREATE UNIQUE INDEX jobs_idempotency ON jobs (queue, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_ready ON jobs (queue, priority DESC, run_at, id) WHERE state = 'queued';
CREATE INDEX jobs_leases ON jobs (locked_until) WHERE state = 'running';
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;

-- One row per periodic job; a replica runs a tick by moving next_run_at forward first.
CREATE TABLE periodic_jobs (
  name text PRIMARY KEY,
  interval_ms bigint NOT NULL CHECK (interval_ms > 0),
  next_run_at timestamptz NOT NULL,
  last_run_at timestamptz,
  last_run_by text
);

-- The outbox: written in the transaction of the change, dispatched through jobs after commit.
-- organization_id is not a foreign key: events outlive what they describe.
CREATE TABLE events (
  id uuid PRIMARY KEY,
  type text NOT NULL,
  organization_id uuid,
  subject text,
  data jsonb NOT NULL,
  actor jsonb,
  occurred_at timestamptz NOT NULL
);
CREATE INDEX events_occurred ON events (occurred_at);
`,
  },
  {
    owner: 'core',
    version: 4,
    name: 'people sign in: passwords, browser sessions, set-password tokens',
    sql: `
-- scrypt$N=…,r=…,p=…$salt$hash (core/identity/passwords.ts); null until the person sets one.
ALTER TABLE people ADD COLUMN password_hash text;
-- Browser sessions (cookie) carry the hash of their CSRF token; Bearer sessions have none.
ALTER TABLE sessions ADD COLUMN csrf_token_hash text;
CREATE INDEX sessions_person ON sessions (person_id) WHERE revoked_at IS NULL;

-- One-time tokens that let a person set a password (invitations, resets). Stored hashed.
CREATE TABLE password_tokens (
  token_hash text PRIMARY KEY,
  person_id uuid NOT NULL REFERENCES people(id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);
CREATE INDEX password_tokens_person ON password_tokens (person_id);
`,
  },
  {
    owner: 'core',
    version: 5,
    name: 'keyset order of the paginated lists',
    sql: `
-- Every list pages newest first by (created_at, id) (adapters/sql/keyset.ts): each index is the
-- list's filter columns, then that order, so a page is one index range scan however deep it is.
CREATE INDEX api_keys_org_time ON api_keys (organization_id, created_at DESC, id DESC);
CREATE INDEX api_keys_org_project_time ON api_keys (organization_id, project_id, created_at DESC, id DESC);
DROP INDEX IF EXISTS api_keys_org_project;
CREATE INDEX projects_org_time ON projects (organization_id, created_at DESC, id DESC);
CREATE INDEX project_members_project_time ON project_members (project_id, created_at DESC, person_id DESC);
CREATE INDEX memberships_person_time ON memberships (person_id, created_at DESC, organization_id DESC);
DROP INDEX IF EXISTS memberships_person;
`,
  },
  {
    owner: 'core',
    version: 6,
    name: 'keys remember who made and who disabled them',
    sql: `
-- A key made by a key stays inside its maker (plugins/keys/key-rules.ts): revoking a key revokes
-- the keys it made, and a key's spend counts its descendants'. Both walk created_by_key_id down.
CREATE INDEX api_keys_made_by ON api_keys (created_by_key_id) WHERE created_by_key_id IS NOT NULL;
-- Who paused a key: a key may not resume one a person paused.
ALTER TABLE api_keys ADD COLUMN disabled_by_person_id uuid;
ALTER TABLE api_keys ADD COLUMN disabled_by_key_id uuid;
`,
  },
  {
    owner: 'core-mail',
    version: 2,
    name: 'mail outbox in the order it was written',
    sql: `
-- now() can give two messages the same instant (PGlite's clock is coarse), and their random ids
-- then sort them either way: the outbox lists by the order rows were written instead.
ALTER TABLE mail_outbox ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY;
CREATE INDEX mail_outbox_seq ON mail_outbox (seq DESC);
CREATE INDEX mail_outbox_recipient_seq ON mail_outbox (lower(recipient), seq DESC);
DROP INDEX IF EXISTS mail_outbox_recipient;
`,
  },
  {
    owner: 'core-coordination',
    version: 1,
    name: 'the coordination store epoch and the replicas sharing it',
    sql: `
-- The coordination store (Redis) marks its data with an epoch; the database remembers it, so a
-- store without one is told apart: new when the database knows none, lost when it knows one that
-- was established (adapters/redis/redis-epoch.ts). One row per store, named by its key prefix.
CREATE TABLE coordination_epochs (
  store text PRIMARY KEY,
  epoch text NOT NULL,
  -- set once the epoch is in the store: before that nothing can have been written under it
  established boolean NOT NULL DEFAULT false,
  -- begun because the store lost its data: replicas report what they hold before admitting again
  after_loss boolean NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
-- Replicas using a store, with a heartbeat: after a loss, admissions wait for the live ones' reports only.
CREATE TABLE coordination_replicas (
  store text NOT NULL,
  replica text NOT NULL,
  seen_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (store, replica)
);
`,
  },
  {
    owner: 'core-mail',
    version: 3,
    name: 'mail secrets kept apart from the body until first read',
    sql: `
-- A message's secrets (set-password tokens, codes) by the name its body's placeholder uses; the first
-- read of the outbox shows them and leaves only their names (null values) and when that was.
ALTER TABLE mail_outbox ADD COLUMN secrets jsonb, ADD COLUMN secrets_read_at timestamptz;
-- Mail written before kept set-password tokens in its body: they are removed (invite again).
UPDATE mail_outbox
   SET text_body = regexp_replace(text_body, 'svc_pwd_[A-Za-z0-9]+', '[removed: invite again]', 'g'),
       html_body = regexp_replace(html_body, 'svc_pwd_[A-Za-z0-9]+', '[removed: invite again]', 'g')
 WHERE text_body LIKE '%svc_pwd_%' OR html_body LIKE '%svc_pwd_%';
`,
  },
  {
    owner: 'core-operations',
    version: 1,
    name: 'long-running operations and who hid them from their progress list',
    sql: `
-- What a caller polls while a durable job does the work (core/operations/long-running.ts). Times
-- come from the service's clock. Neither column below is a foreign key: finished jobs are pruned
-- while their operation stays, and an organisation's operations are erased with its data.
CREATE TABLE long_running_operations (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL,
  project_id uuid,
  kind text NOT NULL,
  status text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  job_id bigint NOT NULL,
  run_at timestamptz NOT NULL,
  started_by_kind text CHECK (started_by_kind IN ('person', 'key', 'system')),
  started_by_id text,
  result jsonb,
  error text,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  finished_at timestamptz,
  CHECK ((status IN ('succeeded', 'failed', 'cancelled')) = (finished_at IS NOT NULL))
);
CREATE INDEX long_running_operations_org_time ON long_running_operations (organization_id, created_at DESC, id DESC);

-- An operation a person (or key) hid from their progress list; the others still list it.
CREATE TABLE long_running_hidden (
  viewer text NOT NULL,
  operation_id uuid NOT NULL REFERENCES long_running_operations(id) ON DELETE CASCADE,
  hidden_at timestamptz NOT NULL,
  PRIMARY KEY (viewer, operation_id)
);
CREATE INDEX long_running_hidden_operation ON long_running_hidden (operation_id);
`,
  },
  {
    owner: 'core-key-secrets',
    version: 1,
    name: 'the secrets a recreated key still accepts for an overlap',
    sql: `
-- Recreating a key gives its row a new token_hash; the replaced secret may keep working until
-- expires_at (the overlap the caller chose). Looked up by hash like the current one; the key's
-- row, and with it its settings, caps and usage, stays the same.
CREATE TABLE api_key_retired_secrets (
  token_hash text PRIMARY KEY,
  key_id uuid NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
  expires_at timestamptz NOT NULL
);
CREATE INDEX api_key_retired_secrets_key ON api_key_retired_secrets (key_id);
`,
  },
  {
    owner: 'core',
    version: 7,
    name: "an organisation's people in keyset order",
    sql: `
-- GET /client/employees pages an organisation's members newest first (adapters/sql/keyset.ts).
CREATE INDEX memberships_org_time ON memberships (organization_id, created_at DESC, person_id DESC);
`,
  },
  {
    owner: 'core-job-logs',
    version: 1,
    name: "a running job's log lines, readable from every replica",
    sql: `
-- What a long job prints while it runs (core/jobs/job-logs.ts): its worker writes the lines in
-- chunks, any replica reads them from a line number on. A chunk's lines are numbered from
-- first_line; the stream's lines are the chunks in first_line order. The rows last as long as the
-- job runs (its owner keeps the finished log elsewhere and clears the stream), and an
-- organisation's erasure deletes its streams. Times come from the service's clock.
CREATE TABLE job_log_chunks (
  stream text NOT NULL,
  first_line integer NOT NULL CHECK (first_line >= 0),
  organization_id uuid NOT NULL,
  lines text[] NOT NULL,
  written_at timestamptz NOT NULL,
  PRIMARY KEY (stream, first_line)
);
CREATE INDEX job_log_chunks_org ON job_log_chunks (organization_id);
`,
  },
];

import type { Migration } from '../../core/ports/database.ts';

export const batchMigrations: Migration[] = [
  {
    owner: 'batches',
    version: 1,
    name: 'batches and their lines',
    sql: `
-- A batch of one project, run as the key that created it (key_id; re-checked before every line).
-- hold_id: the spend hold its worst case was placed as at submission (plugins/metering).
CREATE TABLE batches (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  key_id uuid NOT NULL,
  endpoint text NOT NULL,
  input_file_id uuid NOT NULL,
  completion_window text NOT NULL,
  metadata jsonb,
  status text NOT NULL CHECK (status IN
    ('validating', 'in_progress', 'finalizing', 'completed', 'failed', 'cancelling', 'cancelled', 'expired')),
  -- Where the batch is heading once it stops starting lines (finalizing or cancelling).
  outcome text CHECK (outcome IN ('completed', 'failed', 'cancelled', 'expired')),
  hold_id uuid,
  total integer NOT NULL,
  completed integer NOT NULL DEFAULT 0,
  failed integer NOT NULL DEFAULT 0,
  output_file_id uuid,
  error_file_id uuid,
  errors jsonb,
  created_at timestamptz NOT NULL,
  in_progress_at timestamptz,
  expires_at timestamptz NOT NULL,
  finalizing_at timestamptz,
  completed_at timestamptz,
  failed_at timestamptz,
  expired_at timestamptz,
  cancelling_at timestamptz,
  cancelled_at timestamptz
);
CREATE INDEX batches_project_time ON batches (project_id, created_at DESC, id DESC);
CREATE INDEX batches_running_expiry ON batches (expires_at) WHERE status IN ('in_progress', 'cancelling');

-- One line of the input file until the batch is finalized (its output and error files then hold it).
-- state: pending, running while a worker runs it, then succeeded or failed, recorded once (a fenced job
-- completion). A line still pending when its batch ends never ran.
CREATE TABLE batch_lines (
  batch_id uuid NOT NULL REFERENCES batches(id) ON DELETE CASCADE,
  line integer NOT NULL,
  custom_id text NOT NULL,
  body jsonb NOT NULL,
  state text NOT NULL CHECK (state IN ('pending', 'running', 'succeeded', 'failed')),
  started_at timestamptz,
  status_code integer,
  response jsonb,
  PRIMARY KEY (batch_id, line)
);
`,
  },
  {
    owner: 'batches',
    version: 2,
    name: "batches' models, held amount and organisation-wide listing",
    sql: `
-- What the management list shows of a batch without reading its lines (deleted once it ends): the
-- models its lines call, and the worst case held against the balance and caps at submission (null:
-- nothing held, no metering). Batches made before this migration show none.
ALTER TABLE batches ADD COLUMN models text[] NOT NULL DEFAULT '{}';
ALTER TABLE batches ADD COLUMN held_micros bigint;
-- GET /client/batches pages an organisation's batches newest first, filtered by project, key or status.
CREATE INDEX batches_org_time ON batches (organization_id, created_at DESC, id DESC);
CREATE INDEX batches_key_time ON batches (key_id, created_at DESC, id DESC);
`,
  },
];

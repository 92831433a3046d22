import type { Migration } from '../../core/ports/database.ts';

export const webhookMigrations: Migration[] = [
  {
    owner: 'webhooks',
    version: 1,
    name: 'webhook endpoints, their deliveries and every attempt',
    sql: `
-- An endpoint of one project (project_id), or of the whole organisation (NULL). Its signing secrets
-- are in the secret vault (owner kind 'webhook'), never here.
CREATE TABLE webhook_endpoints (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  project_id uuid REFERENCES projects(id) ON DELETE CASCADE,
  url text NOT NULL,
  description text NOT NULL,
  event_types text[] NOT NULL,
  enabled boolean NOT NULL,
  disabled_reason text,
  disabled_at timestamptz,
  -- The first failed attempt since the last one that succeeded; NULL while deliveries succeed.
  failing_since timestamptz,
  -- Until then the previous signing secret still signs too (a rotation's overlap).
  previous_secret_expires_at timestamptz,
  secret_rotated_at timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE INDEX webhook_endpoints_org_time ON webhook_endpoints (organization_id, created_at DESC, id DESC);
CREATE INDEX webhook_endpoints_project_time ON webhook_endpoints (project_id, created_at DESC, id DESC) WHERE project_id IS NOT NULL;

-- One message to one endpoint, with its own copy of the body as signed (events are pruned sooner).
-- message_id is the webhook-id header: the same on every attempt.
CREATE TABLE webhook_deliveries (
  id uuid PRIMARY KEY,
  endpoint_id uuid NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
  organization_id uuid NOT NULL,
  event_id uuid,
  event_type text NOT NULL,
  message_id text NOT NULL UNIQUE,
  body text NOT NULL,
  test boolean NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed', 'cancelled')),
  attempt_count integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  created_at timestamptz NOT NULL,
  finished_at timestamptz,
  -- One delivery per event and endpoint, whatever runs the fan-out twice.
  UNIQUE (endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_endpoint_time ON webhook_deliveries (endpoint_id, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at);

CREATE TABLE webhook_attempts (
  delivery_id uuid NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
  attempt integer NOT NULL,
  attempted_at timestamptz NOT NULL,
  succeeded boolean NOT NULL,
  status_code integer,
  duration_ms integer NOT NULL,
  response_body text,
  response_truncated boolean NOT NULL,
  error_kind text,
  error_message text,
  next_attempt_at timestamptz,
  PRIMARY KEY (delivery_id, attempt)
);
`,
  },
];

import type { Migration } from '../../core/ports/database.ts';

export const auditMigrations: Migration[] = [
  {
    owner: 'audit',
    version: 1,
    name: 'audit log of management writes',
    sql: `
-- One row per management.operation event; event_id makes a delivery that runs twice write once.
CREATE TABLE audit_log (
  id bigserial PRIMARY KEY,
  event_id uuid NOT NULL UNIQUE,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  occurred_at timestamptz NOT NULL,
  operation text NOT NULL,
  method text NOT NULL,
  path text NOT NULL,
  params jsonb NOT NULL,
  target_id text,
  actor_kind text NOT NULL CHECK (actor_kind IN ('person', 'key')),
  actor_id text NOT NULL,
  actor_label text NOT NULL,
  credential_kind text NOT NULL CHECK (credential_kind IN ('session', 'key')),
  credential_id text NOT NULL,
  status integer NOT NULL,
  error_code text,
  request_id text NOT NULL
);
CREATE INDEX audit_log_org_time ON audit_log (organization_id, occurred_at DESC, id DESC);
CREATE INDEX audit_log_org_actor_time ON audit_log (organization_id, actor_id, occurred_at DESC, id DESC);
CREATE INDEX audit_log_org_operation_time ON audit_log (organization_id, operation, occurred_at DESC, id DESC);
`,
  },
  {
    owner: 'audit',
    version: 2,
    name: 'writes by connectors that signed in over OAuth',
    sql: `
ALTER TABLE audit_log DROP CONSTRAINT audit_log_credential_kind_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_credential_kind_check CHECK (credential_kind IN ('session', 'key', 'connector'));
`,
  },
];

import type { Migration } from '../../core/ports/database.ts';

export const hostingMigrations: Migration[] = [
  {
    owner: 'apps-hosting',
    version: 1,
    name: 'instance runs, closed hosting days and zero-balance notices',
    sql: `
-- One process of an app, from its start to its end (README.md: hosting money). No foreign key to the
-- service: a deleted app's runs of a day not yet charged are still charged. seen_at: the last time
-- the runtime's process recorded the run as alive (its heartbeat); a run whose host died is charged
-- up to it, and closed at it when the next host starts.
CREATE TABLE app_instance_runs (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  service_id uuid NOT NULL,
  deployment_id uuid NOT NULL,
  instance text NOT NULL,
  memory_bytes bigint NOT NULL,
  started_at timestamptz NOT NULL,
  seen_at timestamptz NOT NULL,
  stopped_at timestamptz
);
CREATE INDEX app_instance_runs_org_time ON app_instance_runs (organization_id, started_at);
CREATE UNIQUE INDEX app_instance_runs_open ON app_instance_runs (instance) WHERE stopped_at IS NULL;

-- A UTC day of an organisation charged: written in the transaction of its ledger lines, so a day is
-- charged once (the lines' references make a replay post nothing either).
CREATE TABLE app_hosting_days (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  day date NOT NULL,
  entries integer NOT NULL,
  hosting_micros bigint NOT NULL,
  base_fee_micros bigint NOT NULL,
  closed_at timestamptz NOT NULL,
  PRIMARY KEY (organization_id, day)
);

-- An organisation whose balance reached zero while apps ran: warned (the mail), then its services
-- stopped once grace_ends_at passed. Deleted when the balance is above zero again.
CREATE TABLE app_balance_notices (
  organization_id uuid PRIMARY KEY REFERENCES organizations(id) ON DELETE CASCADE,
  balance_micros bigint NOT NULL,
  warned_at timestamptz NOT NULL,
  grace_ends_at timestamptz NOT NULL,
  stopped_at timestamptz
);
`,
  },
];

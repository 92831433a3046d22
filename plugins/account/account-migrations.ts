import type { Migration } from '../../core/ports/database.ts';

export const accountMigrations: Migration[] = [
  {
    owner: 'account',
    version: 1,
    name: 'onboarding answers, organisation details and scheduled account deletions',
    sql: `
-- How a person heard of the service: theirs, whichever organisation they are in.
CREATE TABLE onboarding_heard_from (
  person_id uuid PRIMARY KEY REFERENCES people(id) ON DELETE CASCADE,
  source text NOT NULL,
  detail text,
  answered_at timestamptz NOT NULL
);

-- A person who dismissed an organisation's onboarding checklist (each person dismisses their own view).
CREATE TABLE onboarding_dismissals (
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  person_id uuid NOT NULL REFERENCES people(id) ON DELETE CASCADE,
  dismissed_at timestamptz NOT NULL,
  PRIMARY KEY (organization_id, person_id)
);

-- The organisation's answers to the details step; a later answer replaces the earlier one.
CREATE TABLE organization_details (
  organization_id uuid PRIMARY KEY REFERENCES organizations(id) ON DELETE CASCADE,
  company_name text,
  company_size text,
  use_case text NOT NULL,
  use_case_detail text,
  website text,
  updated_by_person_id uuid,
  updated_at timestamptz NOT NULL
);

-- Deletions of an account: scheduled, then cancelled or completed. The row outlives the data it
-- removed, as the record that it was removed (it names no person but by id).
CREATE TABLE account_deletions (
  operation_id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id),
  state text NOT NULL CHECK (state IN ('scheduled', 'cancelled', 'completed')),
  requested_by_person_id uuid NOT NULL,
  requested_at timestamptz NOT NULL,
  runs_at timestamptz NOT NULL,
  revoked_keys integer NOT NULL,
  cancelled_by_person_id uuid,
  cancelled_at timestamptz,
  completed_at timestamptz
);
CREATE UNIQUE INDEX account_deletions_one_scheduled ON account_deletions (organization_id) WHERE state = 'scheduled';
`,
  },
];

import type { Migration } from '../../core/ports/database.ts';

export const guardrailMigrations: Migration[] = [
  {
    owner: 'guardrails',
    version: 1,
    name: 'data guardrail rules per account',
    sql: `
-- An account's rules, checked on the input of every /v1 call. A pattern rule carries its regular
-- expression; a built-in detector carries none.
CREATE TABLE guardrail_rules (
  id uuid PRIMARY KEY,
  -- The order rules were made in, which is the order redactions apply (created_at can tie).
  position bigserial NOT NULL,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  name text NOT NULL,
  detector text NOT NULL CHECK (detector IN ('email', 'card_number', 'secret', 'pattern')),
  pattern text,
  action text NOT NULL CHECK (action IN ('block', 'redact')),
  enabled boolean NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  CONSTRAINT guardrail_rules_pattern_iff_detector CHECK ((detector = 'pattern') = (pattern IS NOT NULL)),
  CONSTRAINT guardrail_rules_org_name UNIQUE (organization_id, name)
);
CREATE INDEX guardrail_rules_org_position ON guardrail_rules (organization_id, position);
`,
  },
];

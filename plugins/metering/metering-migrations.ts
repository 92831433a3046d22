import type { Migration } from '../../core/ports/database.ts';

/** The request log, prices, the credit ledger, budgets, request bodies and promotion codes. */
export const meteringMigrations: Migration[] = [
  {
    owner: 'metering',
    version: 1,
    name: 'prices, credit ledger, caps, request bodies',
    // Before it created request_logs (the kernel's first migration did): a database that applied it then has the table.
    formerChecksums: ['13df23d39fed6de871682219a139d3ef0cf131efb4d14c2b44e959b028d5be2b'],
    sql: `
-- One row per gateway call, the request log: metering writes it and reads spend windows from it.
-- key_id is not a foreign key on purpose: deleting a key permanently keeps its usage history.
-- IF NOT EXISTS: databases made before the request log was metering's got it from the kernel's
-- first migration, maybe before this plugin was enabled.
CREATE TABLE IF NOT EXISTS request_logs (
  id text PRIMARY KEY,
  organization_id uuid NOT NULL,
  project_id uuid,
  key_id uuid,
  endpoint text NOT NULL,
  model text,
  provider text,
  status_code integer NOT NULL,
  error_code text,
  input_tokens integer NOT NULL DEFAULT 0,
  cached_input_tokens integer NOT NULL DEFAULT 0,
  cache_write_tokens integer NOT NULL DEFAULT 0,
  output_tokens integer NOT NULL DEFAULT 0,
  reasoning_tokens integer NOT NULL DEFAULT 0,
  usage_estimated boolean NOT NULL DEFAULT false,
  cost_micros bigint NOT NULL DEFAULT 0,
  latency_ms integer NOT NULL DEFAULT 0,
  ttft_ms integer,
  streamed boolean NOT NULL DEFAULT false,
  attempts integer NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS request_logs_key_time ON request_logs (key_id, created_at) INCLUDE (cost_micros);
CREATE INDEX IF NOT EXISTS request_logs_project_time ON request_logs (project_id, created_at) INCLUDE (cost_micros);
CREATE INDEX IF NOT EXISTS request_logs_org_time ON request_logs (organization_id, created_at) INCLUDE (cost_micros);

-- Every price set that ever billed a call; request_logs.price_version points here so costs can be recomputed.
CREATE TABLE price_versions (
  id text PRIMARY KEY,
  model text NOT NULL,
  prices jsonb NOT NULL,
  first_seen_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE request_logs ADD COLUMN price_version text;
ALTER TABLE request_logs ADD COLUMN upstream_model text;
CREATE INDEX request_logs_org_created ON request_logs (organization_id, created_at DESC, id DESC);

-- Prompt and response bodies, kept only while the account has request logging on.
CREATE TABLE request_log_bodies (
  request_id text PRIMARY KEY REFERENCES request_logs(id) ON DELETE CASCADE,
  request_body jsonb,
  response_body jsonb
);

CREATE TABLE credit_balances (
  organization_id uuid PRIMARY KEY REFERENCES organizations(id) ON DELETE CASCADE,
  balance_micros bigint NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Append-only. amount is signed (credits positive); balance_after chains every line exactly.
CREATE TABLE credit_ledger (
  id bigserial PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('payment', 'adjustment', 'ai_usage', 'hosting', 'hosting_base_fee')),
  amount_micros bigint NOT NULL,
  balance_after_micros bigint NOT NULL,
  note text,
  reference text,
  covers_utc_day date,
  covers_entries integer,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX credit_ledger_org_time ON credit_ledger (organization_id, created_at DESC, id DESC);
CREATE UNIQUE INDEX credit_ledger_reference ON credit_ledger (organization_id, kind, reference) WHERE reference IS NOT NULL;

-- One alert per scope and period: the unique key makes "once" hold across replicas.
CREATE TABLE budget_alerts (
  scope text NOT NULL CHECK (scope IN ('key', 'project', 'account')),
  scope_id uuid NOT NULL,
  organization_id uuid NOT NULL,
  period_start timestamptz NOT NULL,
  cap_micros bigint NOT NULL,
  spent_micros bigint NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (scope, scope_id, period_start)
);
`,
  },
  {
    owner: 'metering',
    version: 2,
    name: 'drop an index that request_logs_org_time already covers',
    sql: 'DROP INDEX IF EXISTS request_logs_org_created;',
  },
  {
    owner: 'metering',
    version: 3,
    name: 'an alert per cap value: a cap raised mid-period alerts again when reached',
    sql: `
ALTER TABLE budget_alerts DROP CONSTRAINT budget_alerts_pkey;
ALTER TABLE budget_alerts ADD PRIMARY KEY (scope, scope_id, period_start, cap_micros);
`,
  },
  {
    owner: 'metering',
    version: 4,
    name: 'a random identity for this database, naming its billing journal',
    // The journal on local disk holds rows for one database; a data directory shared by deployments
    // on different databases (or test schemas) keeps each one's rows apart by this id.
    sql: `
CREATE TABLE journal_identity (id text PRIMARY KEY);
INSERT INTO journal_identity (id) VALUES (replace(gen_random_uuid()::text, '-', ''));
`,
  },
  {
    owner: 'metering',
    version: 5,
    name: 'request log: the units a call used besides tokens, and their cost',
    // Defaults fill the rows already stored (calls with no units): no rewrite of the table's data.
    sql: `
ALTER TABLE request_logs
  ADD COLUMN web_searches integer NOT NULL DEFAULT 0 CHECK (web_searches >= 0),
  ADD COLUMN images integer NOT NULL DEFAULT 0 CHECK (images >= 0),
  ADD COLUMN image_size text,
  ADD COLUMN image_quality text,
  ADD COLUMN characters integer NOT NULL DEFAULT 0 CHECK (characters >= 0),
  ADD COLUMN audio_seconds integer NOT NULL DEFAULT 0 CHECK (audio_seconds >= 0),
  ADD COLUMN units_cost_micros bigint NOT NULL DEFAULT 0;
`,
  },
  {
    // An owner of its own, after metering's: promotion codes move on their own versions.
    owner: 'metering-promotions',
    version: 1,
    name: 'promotion codes, their redemptions, and promotion lines in the ledger',
    sql: `
-- Codes the operator makes with the CLI (npm run cli -- credits codes create). Only the code's hash
-- is kept; hint is its last four characters, to tell codes apart in the CLI's list.
CREATE TABLE promotion_codes (
  id uuid PRIMARY KEY,
  code_hash text NOT NULL UNIQUE,
  hint text NOT NULL,
  label text NOT NULL,
  amount_micros bigint NOT NULL CHECK (amount_micros > 0),
  expires_at timestamptz NOT NULL,
  max_redemptions integer CHECK (max_redemptions IS NULL OR max_redemptions > 0),
  -- Counted under the code row's lock: the CHECK backs the conditional UPDATE that takes the last one.
  redemptions integer NOT NULL DEFAULT 0 CHECK (redemptions >= 0 AND (max_redemptions IS NULL OR redemptions <= max_redemptions)),
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);
CREATE INDEX promotion_codes_created ON promotion_codes (created_at DESC, id DESC);

-- Once per organisation: the primary key decides between two concurrent redemptions of one organisation.
CREATE TABLE promotion_redemptions (
  code_id uuid NOT NULL REFERENCES promotion_codes(id) ON DELETE CASCADE,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  ledger_line_id bigint,
  redeemed_at timestamptz NOT NULL,
  PRIMARY KEY (code_id, organization_id)
);

ALTER TABLE credit_ledger DROP CONSTRAINT credit_ledger_kind_check;
ALTER TABLE credit_ledger ADD CONSTRAINT credit_ledger_kind_check
  CHECK (kind IN ('payment', 'adjustment', 'promotion', 'ai_usage', 'hosting', 'hosting_base_fee'));
`,
  },
  {
    // An owner of its own, as promotion codes have: spend holds move on their own versions.
    owner: 'metering-holds',
    version: 1,
    name: 'spend holds, and batch lines marked in the request log',
    sql: `
-- Money held for work that outlives a request (a batch): counter seeding subtracts what an open
-- hold's calls have not spent yet (micros less the cost of request-log rows naming it), so the hold
-- outlives restarts and a coordination store losing its data (plugins/metering/README.md).
-- maker_key_ids: the keys that made key_id, whose caps count the hold too.
CREATE TABLE spend_holds (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  project_id uuid,
  key_id uuid,
  maker_key_ids uuid[] NOT NULL DEFAULT '{}',
  micros bigint NOT NULL CHECK (micros >= 0),
  reference text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now(),
  released_at timestamptz
);
CREATE INDEX spend_holds_open ON spend_holds (organization_id) WHERE released_at IS NULL;

-- A batch line's hold and batch; null for every other call (no rewrite of the rows stored).
ALTER TABLE request_logs ADD COLUMN hold_id uuid, ADD COLUMN batch_id text;
CREATE INDEX request_logs_hold ON request_logs (hold_id) INCLUDE (cost_micros) WHERE hold_id IS NOT NULL;
`,
  },
];

import type { Migration } from '../../core/ports/database.ts';

export const filesMigrations: Migration[] = [
  {
    owner: 'files',
    version: 1,
    name: 'files of the /v1 surface',
    sql: `
-- A file of one project: its bytes are a blob (blob_key), this row is what /v1/files shows of it.
-- key_id is the key that uploaded it (no reference: a key deleted for good leaves its files to the
-- project); NULL for a file code created without a key. A project's deletion takes its rows.
CREATE TABLE files (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  key_id uuid,
  purpose text NOT NULL,
  filename text NOT NULL,
  bytes bigint NOT NULL,
  content_type text NOT NULL,
  sha256 text NOT NULL,
  blob_key text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL,
  -- NULL: never. An expired file is not found; the hourly files.expire job deletes it.
  expires_at timestamptz
);
CREATE INDEX files_project_time ON files (project_id, created_at DESC, id DESC);
CREATE INDEX files_organization ON files (organization_id);
CREATE INDEX files_expiry ON files (expires_at) WHERE expires_at IS NOT NULL;
`,
  },
];

import type { Migration } from '../../core/ports/database.ts';

export const peopleMigrations: Migration[] = [
  {
    owner: 'people',
    version: 1,
    name: 'invitations to organisations',
    sql: `
-- An invitation is its own record: the membership is created when it is accepted, never before.
-- status is stored as pending, accepted, revoked, or expired (a lapsed invitation another replaced);
-- a pending one past expires_at reads as expired. Every time is written from the service's clock.
CREATE TABLE invitations (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  email text NOT NULL,
  role text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
  -- [{"projectId": uuid, "role": "admin" | "developer" | "viewer"}], granted on acceptance
  projects jsonb NOT NULL DEFAULT '[]',
  -- SHA-256 of the svc_inv_ token the mail carries; a resend replaces it, so the old link dies
  token_hash text NOT NULL UNIQUE,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'accepted', 'revoked', 'expired')),
  invited_by_person_id uuid REFERENCES people(id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL,
  sent_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  accepted_at timestamptz,
  accepted_person_id uuid REFERENCES people(id) ON DELETE SET NULL,
  revoked_at timestamptz
);
-- One pending invitation per email and organisation.
CREATE UNIQUE INDEX invitations_one_pending ON invitations (organization_id, lower(email)) WHERE status = 'pending';
CREATE INDEX invitations_org_time ON invitations (organization_id, created_at DESC, id DESC);
`,
  },
];

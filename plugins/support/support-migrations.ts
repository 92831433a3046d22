import type { Migration } from '../../core/ports/database.ts';

export const supportMigrations: Migration[] = [
  {
    owner: 'support',
    version: 1,
    name: 'support requests, their messages and attachments',
    sql: `
-- A person's question to the operator. status: open (waiting on support), answered (waiting on the
-- customer), solved (a new message reopens it).
CREATE TABLE support_requests (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  requester_id uuid NOT NULL REFERENCES people(id) ON DELETE CASCADE,
  subject text NOT NULL,
  status text NOT NULL CHECK (status IN ('open', 'answered', 'solved')),
  message_count integer NOT NULL DEFAULT 0,
  last_message_at timestamptz NOT NULL,
  solved_at timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
-- The organisation's list and a requester's own, newest first (core/vocabulary/pagination.ts).
CREATE INDEX support_requests_org_page ON support_requests (organization_id, created_at DESC, id DESC);
CREATE INDEX support_requests_requester_page ON support_requests (organization_id, requester_id, created_at DESC, id DESC);
-- The operator's queue: what waits on support, oldest first.
CREATE INDEX support_requests_status ON support_requests (status, last_message_at);

-- One message of a request: a person of the organisation wrote it, or support (the operator CLI).
CREATE TABLE support_messages (
  id uuid PRIMARY KEY,
  request_id uuid NOT NULL REFERENCES support_requests(id) ON DELETE CASCADE,
  author_kind text NOT NULL CHECK (author_kind IN ('person', 'support')),
  author_id uuid REFERENCES people(id) ON DELETE SET NULL,
  author_name text NOT NULL,
  body text NOT NULL,
  created_at timestamptz NOT NULL,
  -- The order messages were written in (created_at can tie).
  position bigserial NOT NULL
);
CREATE INDEX support_messages_request ON support_messages (request_id, position);

-- A file a message carries; its contents are a blob (core/ports/blobs.ts), typed by sniffing.
CREATE TABLE support_attachments (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  request_id uuid NOT NULL REFERENCES support_requests(id) ON DELETE CASCADE,
  message_id uuid NOT NULL REFERENCES support_messages(id) ON DELETE CASCADE,
  blob_key text NOT NULL,
  filename text NOT NULL,
  content_type text NOT NULL,
  declared_content_type text NOT NULL,
  size bigint NOT NULL,
  sha256 text NOT NULL,
  created_at timestamptz NOT NULL,
  position integer NOT NULL
);
CREATE INDEX support_attachments_message ON support_attachments (message_id, position);
`,
  },
];

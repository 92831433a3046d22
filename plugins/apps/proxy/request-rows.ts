import { BatchedWriter, type BatchedWriterSettings, type BatchedWriterStats } from '../../../core/kernel/batched-writer.ts';
import type { OrganizationEraser } from '../../../core/kernel/organization-erasure.ts';
import type { Migration, Queryable } from '../../../core/ports/database.ts';

/** One request the apps proxy served (or refused for a known app: stopped, unreachable). */
export interface AppRequestRow {
  /** The proxy's request id (core/kernel/request-ids.ts), also sent to the app and the client as `x-request-id`. */
  id: string;
  /** When the request arrived: the millisecond its id was issued in (core/kernel/request-ids.ts). */
  at: Date;
  organizationId: string;
  appId: string;
  serviceId: string;
  deploymentId: string | null;
  method: string;
  /** The path without its query string (a query often carries tokens), at most PATH_MAX characters. */
  path: string;
  status: number;
  /** From arrival to the response's last byte (a websocket: to its close). */
  durationMs: number;
  bytesIn: number;
  bytesOut: number;
}

export const PATH_MAX = 2048;

/**
 * Owned by the proxy rather than the apps plugin, so the two number their migrations
 * independently. Ids are not foreign keys: a row is written after the fact, in batches, and must
 * not fail because its app was deleted meanwhile (the apps plugin deletes an app's rows with it).
 */
export const appsProxyMigrations: Migration[] = [
  {
    owner: 'apps-proxy',
    version: 1,
    name: 'app_requests: one row per request the apps proxy served',
    sql: `
CREATE TABLE app_requests (
  id text PRIMARY KEY,
  created_at timestamptz NOT NULL,
  organization_id uuid NOT NULL,
  app_id uuid NOT NULL,
  service_id uuid NOT NULL,
  deployment_id uuid,
  method text NOT NULL,
  path text NOT NULL,
  status_code integer NOT NULL,
  -- Fractions of a millisecond kept (to the microsecond): most proxied requests take less than one.
  duration_ms double precision NOT NULL,
  bytes_in bigint NOT NULL,
  bytes_out bigint NOT NULL
);
-- The two lists (GET /apps/requests, GET /services/{id}/requests) page newest first by (created_at, id).
CREATE INDEX app_requests_org_time ON app_requests (organization_id, created_at DESC, id DESC);
CREATE INDEX app_requests_service_time ON app_requests (service_id, created_at DESC, id DESC);
`,
  },
  {
    owner: 'apps-proxy',
    version: 2,
    name: 'app_requests: two indexes instead of four, unique by (organization, time, id)',
    sql: `
-- Every index costs each row's insert: the proxy writes a row per request, so the table keeps two.
-- Uniqueness (a retried batch must not store a row twice) moves from the id alone to the
-- organisation's list index, which holds the id: a row's id fixes its organisation and time.
ALTER TABLE app_requests DROP CONSTRAINT app_requests_pkey;
DROP INDEX app_requests_org_time;
CREATE UNIQUE INDEX app_requests_org_time ON app_requests (organization_id, created_at DESC, id DESC);
-- A service's list reads its app's index (apps-traffic): an app has one web service, the only
-- kind the proxy serves.
DROP INDEX app_requests_service_time;
`,
  },
];

/**
 * Writes a batch as one statement: one array per column, unnested by the database. Only a batch
 * that may already be stored (its earlier write failed, perhaps after the commit) pays for ON
 * CONFLICT: that check costs PostgreSQL about a third more per row than the insert without it.
 */
export async function insertAppRequests(db: Queryable, rows: readonly AppRequestRow[], attempt = { mayBeStored: false }): Promise<void> {
  if (rows.length === 0) return;
  const columns: unknown[][] = Array.from({ length: 12 }, () => new Array(rows.length));
  rows.forEach((row, i) => {
    const values = [
      row.id,
      row.at.toISOString(),
      row.organizationId,
      row.appId,
      row.serviceId,
      row.deploymentId,
      row.method,
      row.path,
      row.status,
      Math.round(row.durationMs * 1000) / 1000,
      row.bytesIn,
      row.bytesOut,
    ];
    for (let c = 0; c < values.length; c += 1) (columns[c] as unknown[])[i] = values[c];
  });
  await db.query(
    `INSERT INTO app_requests (id, created_at, organization_id, app_id, service_id, deployment_id,
       method, path, status_code, duration_ms, bytes_in, bytes_out)
     SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::uuid[], $4::uuid[], $5::uuid[], $6::uuid[],
       $7::text[], $8::text[], $9::int[], $10::float8[], $11::bigint[], $12::bigint[])${attempt.mayBeStored ? ' ON CONFLICT (organization_id, created_at, id) DO NOTHING' : ''}`,
    columns,
  );
}

/** The organisation's proxied-request rows go with it. */
export const appRequestsEraser: OrganizationEraser = {
  name: 'app request logs',
  async erase(tx, organizationId) {
    const { rowCount } = await tx.query('DELETE FROM app_requests WHERE organization_id = $1', [organizationId]);
    return rowCount;
  },
};

export const DEFAULT_ROW_SETTINGS: BatchedWriterSettings = { flushIntervalMs: 250, batchSize: 500, maxQueue: 50_000 };

/**
 * The proxy's request rows, written in batches off the request path (core/kernel/batched-writer.ts).
 * While the database is away rows wait in memory up to `maxQueue`, then are dropped and counted
 * (`svc_apps_proxy_rows_dropped_total`): the proxy never waits for or fails on its log.
 */
export class AppRequestRows {
  private readonly writer: BatchedWriter<AppRequestRow>;

  constructor(db: Queryable, settings: BatchedWriterSettings, report: (event: { kind: 'write_failed'; error: unknown; rows: number } | { kind: 'dropping' }) => void) {
    this.writer = new BatchedWriter((rows, attempt) => insertAppRequests(db, rows, attempt), settings, report);
  }

  start(): void {
    this.writer.start();
  }

  record(row: AppRequestRow): void {
    this.writer.enqueue(row);
  }

  flush(): Promise<void> {
    return this.writer.flush();
  }

  snapshot(): BatchedWriterStats {
    return this.writer.snapshot();
  }

  /** Answers the rows that could not be written before the end. */
  stop(): Promise<number> {
    return this.writer.stop();
  }
}

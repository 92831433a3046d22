import { Conditions } from '../../../adapters/sql/conditions.ts';
import { selectPage } from '../../../adapters/sql/keyset.ts';
import type { Row } from '../../../adapters/sql/rows.ts';
import { requestIdIssuedAt } from '../../../core/kernel/request-ids.ts';
import type { Queryable } from '../../../core/ports/database.ts';
import type { Page, PageRequest } from '../../../core/vocabulary/pagination.ts';
import { type Bucketing, bucketStarts } from './buckets.ts';
import type { AppRequestRow } from '../proxy/request-rows.ts';

/**
 * Reads of the apps proxy's request rows (`app_requests`, written by proxy/request-rows.ts): the
 * request lists of GET /apps/requests and GET /services/{id}/requests with their summary, facets and
 * series, and an app's analytics. README.md beside this file says what each figure means.
 */

export const BANDS = ['all', 'errors', '2xx', '3xx', '4xx', '5xx'] as const;
export type Band = (typeof BANDS)[number];

/** Whose rows: an organisation, cut to the projects a caller sees, and to one service for its own list. */
export interface RequestScope {
  organizationId: string;
  /** null: every project of the organisation. */
  projectIds: readonly string[] | null;
  /** One service's own list; its app's id lets the table's app index find its rows. */
  service?: { id: string; appId: string } | undefined;
}

export interface RequestFilters {
  /** [since, until): either bound may be absent. */
  since?: Date | undefined;
  until?: Date | undefined;
  band?: Band | undefined;
  appId?: string | undefined;
  method?: string | undefined;
  path?: string | undefined;
  /** The whole id or a prefix of at least half its length; when given, every other filter is ignored. */
  requestId?: string | undefined;
}

/** A row as the proxy wrote it (proxy/request-rows.ts), read back within its organisation. */
export type AppRequestView = Omit<AppRequestRow, 'organizationId'>;

export interface TrafficTotals {
  requests: number;
  /** Status 400 and above (499: the client went away). */
  errors: number;
  /** Status 500 and above: the app failed, or the proxy could not reach it (502) or it was stopped (503). */
  serverErrors: number;
  p50DurationMs: number | null;
  p95DurationMs: number | null;
  p99DurationMs: number | null;
  bytesIn: number;
  bytesOut: number;
}

export interface TrafficBucket extends TrafficTotals {
  start: Date;
}

export interface Facets {
  methods: Array<{ value: string; count: number }>;
  bands: Array<{ value: '1xx' | '2xx' | '3xx' | '4xx' | '5xx'; count: number }>;
  paths: Array<{ value: string; count: number }>;
  apps: Array<{ id: string; name: string | null; count: number }>;
}

export const TOP_PATHS = 10;

const TOTAL_COLUMNS = `count(*)::bigint AS requests,
  count(*) FILTER (WHERE status_code >= 400)::bigint AS errors,
  count(*) FILTER (WHERE status_code >= 500)::bigint AS server_errors,
  (percentile_disc(0.5) WITHIN GROUP (ORDER BY duration_ms))::float8 AS p50,
  (percentile_disc(0.95) WITHIN GROUP (ORDER BY duration_ms))::float8 AS p95,
  (percentile_disc(0.99) WITHIN GROUP (ORDER BY duration_ms))::float8 AS p99,
  COALESCE(sum(bytes_in), 0)::bigint AS bytes_in,
  COALESCE(sum(bytes_out), 0)::bigint AS bytes_out`;

const numberOrNull = (value: unknown): number | null => (value === null || value === undefined ? null : Number(value));

function toTotals(row: Row | undefined): TrafficTotals {
  return {
    requests: Number(row?.['requests'] ?? 0),
    errors: Number(row?.['errors'] ?? 0),
    serverErrors: Number(row?.['server_errors'] ?? 0),
    p50DurationMs: numberOrNull(row?.['p50']),
    p95DurationMs: numberOrNull(row?.['p95']),
    p99DurationMs: numberOrNull(row?.['p99']),
    bytesIn: Number(row?.['bytes_in'] ?? 0),
    bytesOut: Number(row?.['bytes_out'] ?? 0),
  };
}

const EMPTY: TrafficTotals = toTotals(undefined);

function toView(row: Row): AppRequestView {
  return {
    id: row['id'] as string,
    at: row['created_at'] as Date,
    appId: row['app_id'] as string,
    serviceId: row['service_id'] as string,
    deploymentId: (row['deployment_id'] as string | null) ?? null,
    method: row['method'] as string,
    path: row['path'] as string,
    status: Number(row['status_code']),
    durationMs: Number(row['duration_ms']),
    bytesIn: Number(row['bytes_in']),
    bytesOut: Number(row['bytes_out']),
  };
}

const BAND_CONDITIONS: Record<Exclude<Band, 'all'>, string> = {
  errors: 'status_code >= 400',
  '2xx': 'status_code BETWEEN 200 AND 299',
  '3xx': 'status_code BETWEEN 300 AND 399',
  '4xx': 'status_code BETWEEN 400 AND 499',
  '5xx': 'status_code BETWEEN 500 AND 599',
};

/** The scope: the organisation, the projects the caller sees (through the apps table), the service. */
function scopeConditions(scope: RequestScope): Conditions {
  const c = new Conditions();
  const org = c.param(scope.organizationId);
  c.add(`organization_id = ${org}::uuid`);
  if (scope.projectIds !== null) {
    c.add(`app_id IN (SELECT id FROM apps WHERE organization_id = ${org}::uuid AND project_id = ANY(${c.param(scope.projectIds)}::uuid[]))`);
  }
  if (scope.service !== undefined) {
    // Through its app, whose index the table has (an app has one web service: proxy/request-rows.ts).
    c.add(`app_id = ${c.param(scope.service.appId)}::uuid`);
    c.add(`service_id = ${c.param(scope.service.id)}::uuid`);
  }
  return c;
}

function addTime(c: Conditions, filters: RequestFilters): void {
  if (filters.since) c.add(`created_at >= ${c.param(filters.since)}::timestamptz`);
  if (filters.until) c.add(`created_at < ${c.param(filters.until)}::timestamptz`);
}

const ID_TIME_SLACK_MS = 1_000;

/**
 * The list's conditions. A request id (whole, or a prefix at least half as long as the id) searches
 * every row held in the scope and ignores the other filters.
 */
function listConditions(scope: RequestScope, filters: RequestFilters): Conditions {
  const c = scopeConditions(scope);
  if (filters.requestId !== undefined) {
    const id = c.param(filters.requestId);
    c.add(`(id = ${id}::text OR (char_length(${id}::text) * 2 >= char_length(id) AND left(id, char_length(${id}::text)) = ${id}::text))`);
    // A row's time is its id's millisecond: the index finds it by time. The second either side
    // keeps rows stamped before that held (arrival then read back from the request's end).
    const issuedAt = requestIdIssuedAt(filters.requestId);
    if (issuedAt !== null) {
      c.add(`created_at >= ${c.param(new Date(issuedAt - ID_TIME_SLACK_MS))}::timestamptz`);
      c.add(`created_at < ${c.param(new Date(issuedAt + ID_TIME_SLACK_MS))}::timestamptz`);
    }
    return c;
  }
  addTime(c, filters);
  if (filters.band && filters.band !== 'all') c.add(BAND_CONDITIONS[filters.band]);
  if (filters.appId !== undefined) c.add(`app_id = ${c.param(filters.appId)}::uuid`);
  if (filters.method !== undefined) c.add(`method = ${c.param(filters.method)}::text`);
  if (filters.path !== undefined) c.add(`path = ${c.param(filters.path)}::text`);
  return c;
}

const ROW_COLUMNS = 'id, created_at, app_id, service_id, deployment_id, method, path, status_code, duration_ms, bytes_in, bytes_out';

export class AppRequestStore {
  constructor(private readonly db: Queryable) {}

  /** One page, newest first by (created_at, id): no row skipped or repeated across pages. */
  page(scope: RequestScope, filters: RequestFilters, page: PageRequest): Promise<Page<AppRequestView>> {
    return selectPage(this.db, {
      columns: ROW_COLUMNS,
      from: 'app_requests',
      where: listConditions(scope, filters),
      order: { at: 'created_at', id: 'id', idType: 'text' },
      page,
      toItem: toView,
    });
  }

  /** Totals over every row the list's filters select (all its pages). */
  async summary(scope: RequestScope, filters: RequestFilters): Promise<TrafficTotals> {
    const c = listConditions(scope, filters);
    const { rows } = await this.db.query(`SELECT ${TOTAL_COLUMNS} FROM app_requests WHERE ${c.sql}`, c.params);
    return toTotals(rows[0]);
  }

  /** The list's rows per bucket over [from, to), every bucket present, newest first. */
  async series(scope: RequestScope, filters: RequestFilters, bucketing: Bucketing): Promise<TrafficBucket[]> {
    const c = listConditions(scope, { ...filters, since: undefined, until: undefined });
    c.add(`created_at >= ${c.param(bucketing.from)}::timestamptz`);
    c.add(`created_at < ${c.param(bucketing.to)}::timestamptz`);
    if (filters.requestId === undefined) addTime(c, filters);
    const unit = bucketing.granularity === 'hour' ? 'hour' : 'day';
    const { rows } = await this.db.query(
      `SELECT date_trunc('${unit}', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS start, ${TOTAL_COLUMNS}
       FROM app_requests WHERE ${c.sql} GROUP BY 1`,
      c.params,
    );
    const found = new Map(rows.map((row) => [(row['start'] as Date).getTime(), toTotals(row)]));
    return bucketStarts(bucketing).map((start) => ({ start, ...(found.get(start.getTime()) ?? EMPTY) }));
  }

  /**
   * What the caller could filter by, with counts, over the time window only: band, app, method and
   * path do not narrow them, so choosing one still shows the others.
   */
  async facets(scope: RequestScope, filters: Pick<RequestFilters, 'since' | 'until'>): Promise<Facets> {
    const c = scopeConditions(scope);
    addTime(c, filters);
    const where = `FROM app_requests WHERE ${c.sql}`;
    const [methods, bands, paths, apps] = await Promise.all([
      this.db.query(`SELECT method AS value, count(*)::bigint AS count ${where} GROUP BY method ORDER BY count DESC, method`, c.params),
      this.db.query(`SELECT (status_code / 100)::int AS band, count(*)::bigint AS count ${where} GROUP BY 1 ORDER BY 1`, c.params),
      this.db.query(`SELECT path AS value, count(*)::bigint AS count ${where} GROUP BY path ORDER BY count DESC, path LIMIT ${TOP_PATHS}`, c.params),
      this.db.query(
        `SELECT r.app_id AS id, a.name, r.count FROM (SELECT app_id, count(*)::bigint AS count ${where} GROUP BY app_id) r
         LEFT JOIN apps a ON a.id = r.app_id ORDER BY r.count DESC, r.app_id`,
        c.params,
      ),
    ]);
    return {
      methods: methods.rows.map((row) => ({ value: row['value'] as string, count: Number(row['count']) })),
      bands: bands.rows
        .filter((row) => Number(row['band']) >= 1 && Number(row['band']) <= 5)
        .map((row) => ({ value: `${Number(row['band'])}xx` as Facets['bands'][number]['value'], count: Number(row['count']) })),
      paths: paths.rows.map((row) => ({ value: row['value'] as string, count: Number(row['count']) })),
      apps: apps.rows.map((row) => ({ id: row['id'] as string, name: (row['name'] as string | null) ?? null, count: Number(row['count']) })),
    };
  }

  /** An app's traffic over [from, to): totals, buckets, the busiest paths and the statuses answered. */
  async analytics(
    appId: string,
    bucketing: Bucketing,
  ): Promise<{
    totals: TrafficTotals;
    buckets: TrafficBucket[];
    paths: Array<{ path: string } & TrafficTotals>;
    statuses: Array<{ status: number; count: number }>;
  }> {
    const c = new Conditions();
    c.add(`app_id = ${c.param(appId)}::uuid`);
    c.add(`created_at >= ${c.param(bucketing.from)}::timestamptz`);
    c.add(`created_at < ${c.param(bucketing.to)}::timestamptz`);
    const where = `FROM app_requests WHERE ${c.sql}`;
    const unit = bucketing.granularity === 'hour' ? 'hour' : 'day';
    const [totals, buckets, paths, statuses] = await Promise.all([
      this.db.query(`SELECT ${TOTAL_COLUMNS} ${where}`, c.params),
      this.db.query(`SELECT date_trunc('${unit}', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS start, ${TOTAL_COLUMNS} ${where} GROUP BY 1`, c.params),
      this.db.query(`SELECT path, ${TOTAL_COLUMNS} ${where} GROUP BY path ORDER BY requests DESC, path LIMIT ${TOP_PATHS}`, c.params),
      this.db.query(`SELECT status_code, count(*)::bigint AS count ${where} GROUP BY status_code ORDER BY status_code`, c.params),
    ]);
    const found = new Map(buckets.rows.map((row) => [(row['start'] as Date).getTime(), toTotals(row)]));
    return {
      totals: toTotals(totals.rows[0]),
      buckets: bucketStarts(bucketing).map((start) => ({ start, ...(found.get(start.getTime()) ?? EMPTY) })),
      paths: paths.rows.map((row) => ({ path: row['path'] as string, ...toTotals(row) })),
      statuses: statuses.rows.map((row) => ({ status: Number(row['status_code']), count: Number(row['count']) })),
    };
  }

  /** Requests and bytes of an app over [from, to) (its usage's traffic). */
  async traffic(appId: string, from: Date, to: Date): Promise<TrafficTotals> {
    const { rows } = await this.db.query(`SELECT ${TOTAL_COLUMNS} FROM app_requests WHERE app_id = $1::uuid AND created_at >= $2::timestamptz AND created_at < $3::timestamptz`, [
      appId,
      from,
      to,
    ]);
    return toTotals(rows[0]);
  }
}

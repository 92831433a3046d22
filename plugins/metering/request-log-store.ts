import type { Page, PageRequest } from '../../core/vocabulary/pagination.ts';
import type { Queryable } from '../../core/ports/database.ts';
import type {
  CallSums,
  Granularity,
  ModelTotals,
  RequestBodies,
  RequestFilter,
  RequestLog,
  RequestLogErrorCode,
  RequestLogReader,
  SeriesBucket,
  ModelSeriesBucket,
  UsageFilter,
  UsageTotals,
  Visibility,
  WindowBucket,
  WindowStats,
} from '../../core/ports/metering.ts';
import { Conditions } from '../../adapters/sql/conditions.ts';
import { type KeysetOrder, selectPage } from '../../adapters/sql/keyset.ts';
import { bigintOf, type Row } from '../../adapters/sql/rows.ts';
import { unitsFromColumns } from './request-log-row-values.ts';

/**
 * The request log's read side (core/ports/metering.ts RequestLogReader), which the usage plugin
 * reads through: aggregates and rows from request_logs (one row per gateway model call) and the
 * optional bodies in request_log_bodies. Every query filters organization_id and a
 * created_at range first, so it runs on request_logs_org_time (organization_id, created_at). SQL is parameterised throughout; no caller value is ever spliced into the text.
 */

/** The slow band: a streamed first token over 5 s, or an unstreamed call over 30 s (exactly 5 s / 30 s is not slow). */
export const SLOW_TTFT_MS = 5_000;
export const SLOW_LATENCY_MS = 30_000;

function usageConditions(filter: UsageFilter): Conditions {
  const c = new Conditions();
  c.add(`organization_id = ${c.param(filter.visibility.organizationId)}::uuid`);
  if (filter.from) c.add(`created_at >= ${c.param(filter.from)}::timestamptz`);
  if (filter.to) c.add(`created_at < ${c.param(filter.to)}::timestamptz`);
  if (filter.visibility.projectIds !== null) c.add(`project_id = ANY(${c.param([...filter.visibility.projectIds])}::uuid[])`);
  if (filter.keyId) c.add(`key_id = ${c.param(filter.keyId)}::uuid`);
  if (filter.projectId) c.add(`project_id = ${c.param(filter.projectId)}::uuid`);
  return c;
}

function requestConditions(filter: RequestFilter): Conditions {
  const c = usageConditions(filter);
  if (filter.model !== undefined) c.add(`model = ${c.param(filter.model)}`);
  if (filter.q !== undefined && filter.q !== '') {
    // strpos, not LIKE: the text is matched literally, with no wildcards to escape.
    const q = c.param(filter.q);
    c.add(`(id = ${q} OR strpos(lower(COALESCE(model, '')), lower(${q})) > 0 OR strpos(lower(endpoint), lower(${q})) > 0)`);
  }
  if (filter.band === 'errors') c.add('status_code >= 400');
  if (filter.band === 'slow') {
    c.add(`((streamed AND ttft_ms > ${SLOW_TTFT_MS}) OR (NOT streamed AND latency_ms > ${SLOW_LATENCY_MS}))`);
  }
  return c;
}

/** The request log's keyset order: request ids are unique. */
const REQUEST_ORDER: KeysetOrder = { at: 'created_at', id: 'id', idType: 'text' };

const ROW_COLUMNS = `id, created_at,
  organization_id, project_id, key_id, endpoint, model, provider, upstream_model, status_code, error_code,
  input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, reasoning_tokens, usage_estimated,
  cost_micros, latency_ms, ttft_ms, streamed, attempts, price_version,
  web_searches, images, image_size, image_quality, characters, audio_seconds, units_cost_micros, hold_id, batch_id`;

/** Sums of the unit columns, shared by totals and series buckets. */
const UNIT_SUMS = `COALESCE(sum(web_searches), 0)::bigint AS web_searches,
  COALESCE(sum(images), 0)::bigint AS images,
  COALESCE(sum(characters), 0)::bigint AS characters,
  COALESCE(sum(audio_seconds), 0)::bigint AS audio_seconds,
  COALESCE(sum(units_cost_micros), 0)::bigint AS units_cost_micros`;

const TOTAL_COLUMNS = `count(*)::bigint AS requests,
  count(*) FILTER (WHERE status_code >= 400)::bigint AS errors,
  COALESCE(sum(input_tokens), 0)::bigint AS input_tokens,
  COALESCE(sum(cached_input_tokens), 0)::bigint AS cached_input_tokens,
  COALESCE(sum(cache_write_tokens), 0)::bigint AS cache_write_tokens,
  COALESCE(sum(output_tokens), 0)::bigint AS output_tokens,
  COALESCE(sum(reasoning_tokens), 0)::bigint AS reasoning_tokens,
  COALESCE(sum(cost_micros), 0)::bigint AS cost_micros,
  ${UNIT_SUMS},
  round(avg(latency_ms))::float8 AS avg_latency_ms,
  (percentile_disc(0.5) WITHIN GROUP (ORDER BY latency_ms))::float8 AS p50_latency_ms,
  (percentile_disc(0.95) WITHIN GROUP (ORDER BY latency_ms))::float8 AS p95_latency_ms`;

/** A bucket's sums (series and series by model), read back by callSumsOf. */
const SERIES_SUMS = `count(*)::bigint AS requests,
  count(*) FILTER (WHERE status_code >= 400)::bigint AS errors,
  sum(input_tokens)::bigint AS input_tokens,
  sum(cached_input_tokens)::bigint AS cached_input_tokens,
  sum(cache_write_tokens)::bigint AS cache_write_tokens,
  sum(output_tokens)::bigint AS output_tokens,
  sum(reasoning_tokens)::bigint AS reasoning_tokens,
  sum(cost_micros)::bigint AS cost_micros, ${UNIT_SUMS}`;

const WINDOW_COLUMNS = `count(*)::bigint AS requests,
  count(*) FILTER (WHERE status_code >= 400)::bigint AS errors,
  COALESCE(sum(cost_micros), 0)::bigint AS cost_micros,
  (percentile_disc(0.5) WITHIN GROUP (ORDER BY latency_ms))::float8 AS p50_latency_ms,
  (percentile_disc(0.95) WITHIN GROUP (ORDER BY latency_ms))::float8 AS p95_latency_ms,
  (percentile_disc(0.5) WITHIN GROUP (ORDER BY ttft_ms))::float8 AS p50_ttft_ms`;

const num = (row: Row, column: string): number => Number(row[column] ?? 0);
const numOrNull = (row: Row, column: string): number | null => (row[column] === null || row[column] === undefined ? null : Number(row[column]));
const strOrNull = (row: Row, column: string): string | null => (row[column] as string | null | undefined) ?? null;

function callSumsOf(row: Row): CallSums {
  return {
    requests: num(row, 'requests'),
    errors: num(row, 'errors'),
    inputTokens: num(row, 'input_tokens'),
    cachedInputTokens: num(row, 'cached_input_tokens'),
    cacheWriteTokens: num(row, 'cache_write_tokens'),
    outputTokens: num(row, 'output_tokens'),
    reasoningTokens: num(row, 'reasoning_tokens'),
    costMicros: bigintOf(row, 'cost_micros'),
    ...unitSums(row),
  };
}

function toRequestLog(row: Row): RequestLog {
  return {
    id: row['id'] as string,
    createdAt: row['created_at'] as Date,
    organizationId: row['organization_id'] as string,
    projectId: strOrNull(row, 'project_id'),
    keyId: strOrNull(row, 'key_id'),
    endpoint: row['endpoint'] as string,
    model: strOrNull(row, 'model'),
    provider: strOrNull(row, 'provider'),
    upstreamModel: strOrNull(row, 'upstream_model'),
    statusCode: num(row, 'status_code'),
    // Written by metering, typed when it was (plugins/metering/request-log-error-codes.ts).
    errorCode: strOrNull(row, 'error_code') as RequestLogErrorCode | null,
    inputTokens: num(row, 'input_tokens'),
    cachedInputTokens: num(row, 'cached_input_tokens'),
    cacheWriteTokens: num(row, 'cache_write_tokens'),
    outputTokens: num(row, 'output_tokens'),
    reasoningTokens: num(row, 'reasoning_tokens'),
    usageEstimated: row['usage_estimated'] === true,
    costMicros: bigintOf(row, 'cost_micros'),
    latencyMs: num(row, 'latency_ms'),
    ttftMs: numOrNull(row, 'ttft_ms'),
    streamed: row['streamed'] === true,
    attempts: num(row, 'attempts'),
    priceVersion: strOrNull(row, 'price_version'),
    units: unitsFromColumns(row['web_searches'], row['images'], row['image_size'], row['image_quality'], row['characters'], row['audio_seconds']),
    unitsCostMicros: bigintOf(row, 'units_cost_micros'),
    // Only a batch line has them.
    ...(row['hold_id'] ? { holdId: row['hold_id'] as string } : {}),
    ...(row['batch_id'] ? { batchId: row['batch_id'] as string } : {}),
  };
}

function unitSums(r: Row): Pick<CallSums, 'webSearches' | 'images' | 'characters' | 'audioSeconds' | 'unitsCostMicros'> {
  return {
    webSearches: num(r, 'web_searches'),
    images: num(r, 'images'),
    characters: num(r, 'characters'),
    audioSeconds: num(r, 'audio_seconds'),
    unitsCostMicros: bigintOf(r, 'units_cost_micros'),
  };
}

function toTotals(row: Row | undefined): UsageTotals {
  const r = row ?? {};
  return {
    requests: num(r, 'requests'),
    errors: num(r, 'errors'),
    inputTokens: num(r, 'input_tokens'),
    cachedInputTokens: num(r, 'cached_input_tokens'),
    cacheWriteTokens: num(r, 'cache_write_tokens'),
    outputTokens: num(r, 'output_tokens'),
    reasoningTokens: num(r, 'reasoning_tokens'),
    costMicros: bigintOf(r, 'cost_micros'),
    ...unitSums(r),
    avgLatencyMs: numOrNull(r, 'avg_latency_ms'),
    p50LatencyMs: numOrNull(r, 'p50_latency_ms'),
    p95LatencyMs: numOrNull(r, 'p95_latency_ms'),
  };
}

function toWindowStats(r: Row): WindowStats {
  return {
    requests: num(r, 'requests'),
    errors: num(r, 'errors'),
    costMicros: bigintOf(r, 'cost_micros'),
    p50LatencyMs: numOrNull(r, 'p50_latency_ms'),
    p95LatencyMs: numOrNull(r, 'p95_latency_ms'),
    p50TtftMs: numOrNull(r, 'p50_ttft_ms'),
  };
}

export class SqlRequestLogReader implements RequestLogReader {
  constructor(private readonly db: Queryable) {}

  async totals(filter: UsageFilter): Promise<UsageTotals> {
    const c = usageConditions(filter);
    const { rows } = await this.db.query(`SELECT ${TOTAL_COLUMNS} FROM request_logs WHERE ${c.sql}`, c.params);
    return toTotals(rows[0]);
  }

  /** Per model, costliest first. */
  async byModel(filter: UsageFilter): Promise<ModelTotals[]> {
    const c = usageConditions(filter);
    const { rows } = await this.db.query(
      `SELECT model, ${TOTAL_COLUMNS} FROM request_logs WHERE ${c.sql}
       GROUP BY model ORDER BY cost_micros DESC, requests DESC, model ASC NULLS LAST`,
      c.params,
    );
    return rows.map((row) => ({ model: strOrNull(row, 'model'), ...toTotals(row) }));
  }

  /**
   * Buckets over [from, to), newest first, empty ones included. Buckets are UTC hours or days;
   * the first may start before `from` (it is the bucket `from` falls in), and counts only rows in range.
   */
  async series(filter: UsageFilter & { from: Date; to: Date }, granularity: Granularity): Promise<SeriesBucket[]> {
    const c = usageConditions(filter);
    const unit = c.param(granularity);
    const step = c.param(`1 ${granularity}`);
    const from = c.param(filter.from);
    const to = c.param(filter.to);
    const { rows } = await this.db.query(
      `WITH buckets AS (
         SELECT generate_series(
           date_trunc(${unit}::text, ${from}::timestamptz AT TIME ZONE 'UTC'),
           (${to}::timestamptz AT TIME ZONE 'UTC') - interval '1 microsecond',
           ${step}::interval) AS local_start
       ), sums AS (
         SELECT date_trunc(${unit}::text, created_at AT TIME ZONE 'UTC') AS local_start,
                ${SERIES_SUMS}
         FROM request_logs WHERE ${c.sql}
         GROUP BY 1
       )
       SELECT b.local_start AT TIME ZONE 'UTC' AS start,
              COALESCE(s.requests, 0)::bigint AS requests, COALESCE(s.errors, 0)::bigint AS errors,
              COALESCE(s.input_tokens, 0)::bigint AS input_tokens, COALESCE(s.cached_input_tokens, 0)::bigint AS cached_input_tokens,
              COALESCE(s.cache_write_tokens, 0)::bigint AS cache_write_tokens, COALESCE(s.output_tokens, 0)::bigint AS output_tokens,
              COALESCE(s.reasoning_tokens, 0)::bigint AS reasoning_tokens, COALESCE(s.cost_micros, 0)::bigint AS cost_micros,
              COALESCE(s.web_searches, 0)::bigint AS web_searches, COALESCE(s.images, 0)::bigint AS images,
              COALESCE(s.characters, 0)::bigint AS characters, COALESCE(s.audio_seconds, 0)::bigint AS audio_seconds,
              COALESCE(s.units_cost_micros, 0)::bigint AS units_cost_micros
       FROM buckets b LEFT JOIN sums s ON s.local_start = b.local_start
       ORDER BY b.local_start DESC`,
      c.params,
    );
    return rows.map((row) => ({ start: row['start'] as Date, ...callSumsOf(row) }));
  }

  async seriesByModel(filter: UsageFilter & { from: Date; to: Date }, granularity: Granularity): Promise<ModelSeriesBucket[]> {
    const c = usageConditions(filter);
    const unit = c.param(granularity);
    const { rows } = await this.db.query(
      `SELECT date_trunc(${unit}::text, created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS start, model,
              ${SERIES_SUMS}
       FROM request_logs WHERE ${c.sql}
       GROUP BY 1, 2`,
      c.params,
    );
    return rows.map((row) => ({ start: row['start'] as Date, model: strOrNull(row, 'model'), ...callSumsOf(row) }));
  }

  /** One page of rows, newest first (created_at, then id, both descending). */
  async page(filter: RequestFilter, page: PageRequest): Promise<Page<RequestLog>> {
    return selectPage(this.db, { columns: ROW_COLUMNS, from: 'request_logs', where: requestConditions(filter), order: REQUEST_ORDER, page, toItem: toRequestLog });
  }

  /** The latest rows, at most `limit`, newest first: a fixed window, no further pages. */
  async list(filter: RequestFilter, limit: number): Promise<RequestLog[]> {
    const c = requestConditions(filter);
    const { rows } = await this.db.query(`SELECT ${ROW_COLUMNS} FROM request_logs WHERE ${c.sql} ORDER BY created_at DESC, id DESC LIMIT ${c.param(limit)}::int`, c.params);
    return rows.map(toRequestLog);
  }

  /** One row, or null when it does not exist or lies outside what the caller sees. */
  async get(visibility: Visibility, id: string): Promise<RequestLog | null> {
    const c = usageConditions({ visibility });
    c.add(`id = ${c.param(id)}::text`);
    const { rows } = await this.db.query(`SELECT ${ROW_COLUMNS} FROM request_logs WHERE ${c.sql}`, c.params);
    return rows[0] ? toRequestLog(rows[0]) : null;
  }

  /** Stored prompt and response, or null when nothing was logged for the call. */
  async bodies(id: string): Promise<RequestBodies | null> {
    const { rows } = await this.db.query('SELECT request_body, response_body FROM request_log_bodies WHERE request_id = $1', [id]);
    const row = rows[0];
    if (!row) return null;
    const request = row['request_body'] ?? null;
    const response = row['response_body'] ?? null;
    if (request === null && response === null) return null;
    return { request, response };
  }

  /** Totals and per-minute buckets (newest first, empty ones included) over [from, to); both minute-aligned. */
  async window(filter: UsageFilter & { from: Date; to: Date }): Promise<{ totals: WindowStats; buckets: WindowBucket[] }> {
    const c = usageConditions(filter);
    const totals = await this.db.query(`SELECT ${WINDOW_COLUMNS} FROM request_logs WHERE ${c.sql}`, [...c.params]);
    const from = c.param(filter.from);
    const to = c.param(filter.to);
    const { rows } = await this.db.query(
      `WITH buckets AS (
         SELECT generate_series(${from}::timestamptz, ${to}::timestamptz - interval '1 minute', interval '1 minute') AS start
       ), stats AS (
         SELECT date_trunc('minute', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS start, ${WINDOW_COLUMNS}
         FROM request_logs WHERE ${c.sql}
         GROUP BY 1
       )
       SELECT b.start, COALESCE(s.requests, 0)::bigint AS requests, COALESCE(s.errors, 0)::bigint AS errors,
              COALESCE(s.cost_micros, 0)::bigint AS cost_micros, s.p50_latency_ms, s.p95_latency_ms, s.p50_ttft_ms
       FROM buckets b LEFT JOIN stats s ON s.start = b.start
       ORDER BY b.start DESC`,
      c.params,
    );
    return {
      totals: toWindowStats(totals.rows[0] ?? {}),
      buckets: rows.map((row) => ({ start: row['start'] as Date, ...toWindowStats(row) })),
    };
  }
}

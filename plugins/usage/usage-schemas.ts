import { z } from 'zod';
import { requestId } from '../../core/vocabulary/ids.ts';
import { listOf, pageQuery } from '../../core/vocabulary/pagination.ts';
import { dateOrTimestampSchema, instantView } from '../../core/vocabulary/timestamps.ts';

/** Query parameters and wire shapes of the usage and request-log operations. */

export const USAGE_RECENT_DEFAULT = 100;
export const USAGE_RECENT_MAX = 1_000;
export const REQUESTS_PAGE_DEFAULT = 50;
export const REQUESTS_PAGE_MAX = 200;
export const RECENT_REQUESTS = 20;
export const WINDOW_MINUTES_DEFAULT = 60;
export const WINDOW_MINUTES_MAX = 1_440;

const from = dateOrTimestampSchema.optional().describe('Start of the window, inclusive: YYYY-MM-DD (midnight UTC) or an ISO timestamp');
const to = dateOrTimestampSchema.optional().describe('End of the window, exclusive: YYYY-MM-DD (midnight UTC) or an ISO timestamp');
const keyId = z.uuid().optional().describe('Only calls made with this key; a key outside what the caller sees gives no rows');
const projectId = z.uuid().optional().describe('Only calls of this project; a project outside what the caller reaches answers 404');

export const usageQuery = z.object({
  from: from.describe('Start of the window, inclusive (default: 30 days before `to`)'),
  to: to.describe('End of the window, exclusive (default: now)'),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(USAGE_RECENT_MAX)
    .default(USAGE_RECENT_DEFAULT)
    .describe(`How many recent requests to include (default ${USAGE_RECENT_DEFAULT}, max ${USAGE_RECENT_MAX})`),
  keyId,
  projectId,
});

export const seriesQuery = z.object({
  from: from.describe('Start of the window, inclusive (default: 30 days before `to`)'),
  to: to.describe('End of the window, exclusive (default: now)'),
  keyId,
  projectId,
  granularity: z.enum(['hour', 'day']).optional().describe('Bucket size, UTC; default hour for a window of two days or less, else day'),
  by: z.enum(['model']).optional().describe('model: each bucket also lists its calls per model (`models`), the models with calls only'),
});

export const comparisonQuery = z.object({
  from: from.describe('Start of this window, inclusive (default: 30 days before `to`)'),
  to: to.describe('End of this window, exclusive (default: now)'),
  keyId,
  projectId,
});

export const requestsQuery = pageQuery({ defaultLimit: REQUESTS_PAGE_DEFAULT, maxLimit: REQUESTS_PAGE_MAX, id: requestId }).extend({
  from,
  to,
  keyId,
  projectId,
  model: z.string().min(1).max(200).optional().describe('Exact model name'),
  q: z.string().min(1).max(200).optional().describe('A request id, or text contained in the model or endpoint (case-insensitive)'),
  band: z.enum(['errors', 'slow']).optional().describe('errors: status 400 or above; slow: streamed first token over 5 s, or unstreamed over 30 s'),
});

export const windowQuery = z.object({
  minutes: z.coerce
    .number()
    .int()
    .min(1)
    .max(WINDOW_MINUTES_MAX)
    .default(WINDOW_MINUTES_DEFAULT)
    .describe(`Length of the window in minutes, ending with the current minute (default ${WINDOW_MINUTES_DEFAULT}, max ${WINDOW_MINUTES_MAX})`),
});

export const requestIdParams = z.strictObject({
  id: requestId.describe('Request id (x-request-id of the call)'),
});

const count = z.number().int().nonnegative();
const msOrNull = z.number().nullable();

/* The wire views: named schemas of the OpenAPI document (`.meta({ id })`), declared once. */

export const tokenTotalsView = z
  .object({
    input: count,
    cachedInput: count,
    cacheWrite: count,
    output: count,
    reasoning: count,
  })
  .meta({ id: 'TokenCounts', description: 'Tokens by kind' });

export const unitTotalsView = z
  .object({
    webSearches: count.describe('Hosted web searches run (Responses web_search)'),
    images: count.describe('Images generated'),
    characters: count.describe('Input characters of speech synthesis'),
    audioSeconds: count.describe('Seconds of audio transcribed, each started second counted whole'),
    costUsd: z.number().describe('What these units cost; the rest of costUsd is the tokens’'),
  })
  .meta({ id: 'UnitCounts', description: 'What calls used besides tokens, and its cost' });

export const requestUnitsView = unitTotalsView
  .omit({ images: true })
  .extend({
    images: z.object({ count: count, size: z.string(), quality: z.string().nullable() }).nullable().describe('Images generated, with their size and quality; null for none'),
  })
  .meta({ id: 'RequestUnits', description: 'What one call used besides tokens, and its cost' });

export const requestRowView = z
  .object({
    object: z.literal('request_log'),
    id: z.string(),
    createdAt: instantView,
    keyId: z.string().nullable(),
    projectId: z.string().nullable(),
    endpoint: z.string(),
    model: z.string().nullable(),
    provider: z.string().nullable(),
    upstreamModel: z.string().nullable(),
    status: z.number().int(),
    errorCode: z.string().nullable(),
    tokens: tokenTotalsView.extend({ estimated: z.boolean().describe('Counted by the gateway because the provider reported no usage') }),
    units: requestUnitsView,
    costUsd: z.number().describe('Tokens and units together'),
    latencyMs: z.number().int(),
    ttftMs: z.number().int().nullable().describe('Time to first token, streamed calls'),
    streamed: z.boolean(),
    attempts: z.number().int(),
    priceVersion: z.string().nullable(),
    batchId: z.string().optional().describe('The batch this call was a line of; absent for every other call'),
  })
  .meta({ id: 'RequestLog', description: 'One gateway call as the request log keeps it, without its bodies' });

export const requestDetailView = requestRowView
  .extend({
    request: z.unknown().describe('The prompt as sent; null when hidden or not logged'),
    response: z.unknown().describe('The response as returned; null when hidden or not logged'),
    bodiesHidden: z.enum(['role', 'not_logged']).nullable().describe("Why the bodies are null: 'role' the caller may not read them; 'not_logged' request logging was off for this call"),
  })
  .meta({ id: 'RequestLogDetail', description: 'One gateway call with its request and response bodies, where the caller may read them' });

export const totalsView = z
  .object({
    requests: count,
    errors: count.describe('Calls answered with status 400 or above'),
    tokens: tokenTotalsView,
    units: unitTotalsView,
    costUsd: z.number().describe('Tokens and units together'),
    avgLatencyMs: msOrNull,
    p50LatencyMs: msOrNull,
    p95LatencyMs: msOrNull,
  })
  .meta({ id: 'UsageTotals', description: 'Calls, errors, tokens, cost and latency over a window' });

export const modelTotalsView = totalsView.extend({ model: z.string().nullable() }).meta({ id: 'ModelUsage', description: 'The totals of one model' });

export const usageReportView = z
  .object({
    object: z.literal('usage_report'),
    from: instantView,
    to: instantView,
    keyId: z.string().nullable(),
    projectId: z.string().nullable(),
    totals: totalsView,
    models: z.array(modelTotalsView).describe('Per model, costliest first'),
    recent: z.array(requestRowView).describe('The latest requests of the window, newest first'),
  })
  .meta({ id: 'UsageReport', description: 'Usage over a window: totals, per model, and the latest requests' });

const modelBucketView = z
  .object({ model: z.string().nullable(), requests: count, errors: count, tokens: tokenTotalsView, units: unitTotalsView, costUsd: z.number() })
  .meta({ id: 'UsageModelBucket', description: "One model's calls within a bucket" });

const seriesBucketView = z
  .object({
    start: instantView,
    requests: count,
    errors: count,
    tokens: tokenTotalsView,
    units: unitTotalsView,
    costUsd: z.number(),
    models: z.array(modelBucketView).optional().describe('With by=model: the calls per model, costliest first; they add up to the bucket'),
  })
  .meta({ id: 'UsageBucket', description: 'The usage of one hour or day, UTC' });

export const seriesView = z
  .object({
    object: z.literal('usage_series'),
    from: instantView,
    to: instantView,
    keyId: z.string().nullable(),
    projectId: z.string().nullable(),
    granularity: z.enum(['hour', 'day']),
    buckets: z.array(seriesBucketView).describe('UTC buckets, newest first, empty ones included'),
  })
  .meta({ id: 'UsageSeries', description: 'Usage over a window in hourly or daily buckets' });

const deltaView = z
  .object({
    absolute: z.number().nullable().describe('This window minus the previous; null when either figure is null'),
    percent: z.number().nullable().describe('Change relative to the previous window, in percent; null when the previous is 0 or null'),
  })
  .meta({ id: 'UsageDelta', description: 'How a figure changed from the previous window' });

const periodTotalsView = z.object({ from: instantView, to: instantView, totals: totalsView }).meta({ id: 'UsagePeriod', description: 'The totals of one window' });

export const comparisonView = z
  .object({
    object: z.literal('usage_comparison'),
    keyId: z.string().nullable(),
    projectId: z.string().nullable(),
    current: periodTotalsView,
    previous: periodTotalsView,
    deltas: z.object({
      requests: deltaView,
      errors: deltaView,
      tokens: z.object({ input: deltaView, cachedInput: deltaView, cacheWrite: deltaView, output: deltaView, reasoning: deltaView }),
      costUsd: deltaView,
      avgLatencyMs: deltaView,
      p50LatencyMs: deltaView,
      p95LatencyMs: deltaView,
    }),
  })
  .meta({ id: 'UsageComparison', description: 'A window against the one of the same length before it' });

const windowStatsShape = {
  requests: count,
  errors: count,
  costUsd: z.number(),
  p50LatencyMs: msOrNull,
  p95LatencyMs: msOrNull,
  p50TtftMs: msOrNull.describe('Median time to first token of streamed calls'),
};

const windowBucketView = z.object({ start: instantView, ...windowStatsShape }).meta({ id: 'RequestWindowBucket', description: 'The calls of one minute' });

export const windowView = z
  .object({
    object: z.literal('request_window'),
    minutes: z.number().int(),
    from: instantView,
    to: instantView,
    ...windowStatsShape,
    buckets: z.array(windowBucketView).describe('One per minute, newest first, empty ones included'),
  })
  .meta({ id: 'RequestWindow', description: 'The latest minutes of calls, minute by minute' });

export const requestListView = listOf(requestRowView);

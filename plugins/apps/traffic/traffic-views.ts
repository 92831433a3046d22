import { z } from 'zod';
import { requestId } from '../../../core/vocabulary/ids.ts';
import { listOf, pageQuery } from '../../../core/vocabulary/pagination.ts';
import { instantView, timestampSchema } from '../../../core/vocabulary/timestamps.ts';
import { PATH_MAX } from '../proxy/request-rows.ts';
import type { AppRequestView, TrafficBucket, TrafficTotals } from './request-store.ts';
import { BANDS } from './request-store.ts';

/** The wire shapes of the request lists, analytics and usage (README.md beside this file). */

export const REQUESTS_PER_PAGE = 50;
export const MAX_REQUESTS_PER_PAGE = 200;

const page = pageQuery({ defaultLimit: REQUESTS_PER_PAGE, maxLimit: MAX_REQUESTS_PER_PAGE, id: requestId }).shape;

const serviceFilters = {
  ...page,
  since: timestampSchema.optional().describe('Only requests that arrived at or after this instant'),
  until: timestampSchema.optional().describe('Only requests that arrived before this instant (exclusive)'),
  band: z.enum(BANDS).default('all').describe('errors: status 400 and above (499: the client went away first); 2xx…5xx: that status class'),
  method: z
    .string()
    .regex(/^[A-Za-z]{1,16}$/, 'an HTTP method')
    .transform((method) => method.toUpperCase())
    .optional()
    .describe('Only requests of this method (any case)'),
  path: z.string().min(1).max(PATH_MAX).optional().describe('Only requests to exactly this path (without a query string)'),
  requestId: requestId.optional().describe('A request id (x-request-id), whole or its first half at least: searches every request held and ignores the other filters'),
};

export const serviceRequestsQuery = z.strictObject(serviceFilters);
export const appRequestsQuery = z.strictObject({ ...serviceFilters, appId: z.uuid().optional().describe('Only requests to this app') });

export const appRequestView = z
  .object({
    object: z.literal('app_request'),
    id: z.string().describe('The request id the proxy sent the app and the client (x-request-id)'),
    at: instantView.describe('When the request arrived'),
    appId: z.string(),
    serviceId: z.string(),
    deploymentId: z.string().nullable().describe('The deployment that served it; null when nothing was running'),
    method: z.string(),
    path: z.string().describe('Without its query string'),
    status: z.number().int().describe('499: the client went away before the answer was complete'),
    durationMs: z.number().describe('From arrival to the last byte of the answer (a websocket: to its close)'),
    bytesIn: z.number().int(),
    bytesOut: z.number().int(),
  })
  .meta({ id: 'AppRequest', description: 'One request the apps proxy served' });

const totalsShape = {
  requests: z.number().int(),
  errors: z.number().int().describe('Status 400 and above'),
  errorRate: z.number().nullable().describe('errors / requests, 0 to 1; null without requests'),
  serverErrors: z.number().int().describe('Status 500 and above (502: the app could not be reached; 503: it was stopped)'),
  p50DurationMs: z.number().nullable().describe('Median duration; null without requests'),
  p95DurationMs: z.number().nullable(),
  p99DurationMs: z.number().nullable(),
  bytesIn: z.number().int(),
  bytesOut: z.number().int(),
};

export const trafficTotalsView = z.object(totalsShape).meta({ id: 'AppTrafficTotals', description: 'Requests, errors, durations and bytes' });

const trafficBucketView = z
  .object({ start: instantView.describe('UTC start of the bucket'), ...totalsShape })
  .meta({ id: 'AppTrafficBucket', description: 'Traffic within one UTC hour or day' });

const seriesView = z
  .object({
    granularity: z.enum(['hour', 'day']).describe('hour for a window of two days or less, else day'),
    from: instantView,
    to: instantView.describe('Exclusive'),
    buckets: z.array(trafficBucketView).describe('Newest first, empty ones included'),
  })
  .meta({ id: 'AppRequestSeries', description: 'The filtered requests per bucket' });

const count = z.number().int();
const facetsView = z
  .object({
    methods: z.array(z.object({ value: z.string(), count })).describe('Busiest first'),
    bands: z.array(z.object({ value: z.enum(['1xx', '2xx', '3xx', '4xx', '5xx']), count })).describe('Status classes with requests'),
    paths: z.array(z.object({ value: z.string(), count })).describe('The 10 busiest paths'),
    apps: z.array(z.object({ id: z.string(), name: z.string().nullable(), count })).describe('Busiest first'),
  })
  .meta({
    id: 'AppRequestFacets',
    description: 'Counts of what the list can be filtered by, over the time window only (band, app, method and path do not narrow them)',
  });

export const appRequestListView = listOf(appRequestView, {
  summary: trafficTotalsView.nullable().describe('First page only (null after): totals over every request the filters select'),
  facets: facetsView.nullable().describe('First page only (null after)'),
  series: seriesView.nullable().describe('First page only (null after): the filtered requests over [since, until), since defaulting to a day before until'),
});

export function totalsView(totals: TrafficTotals) {
  return { ...totals, errorRate: totals.requests === 0 ? null : totals.errors / totals.requests };
}

export function bucketView(bucket: TrafficBucket) {
  return { ...totalsView(bucket), start: bucket.start.toISOString() };
}

export function toAppRequestView(row: AppRequestView) {
  return { object: 'app_request' as const, ...row, at: row.at.toISOString() };
}

export const windowQuery = z.strictObject({
  from: timestampSchema.optional().describe('Start of the window (default: a day before `to`)'),
  to: timestampSchema.optional().describe('End of the window, exclusive (default: now)'),
  granularity: z.enum(['hour', 'day']).optional().describe('Bucket size (default: hour for two days or less, else day)'),
});

export const analyticsView = z
  .object({
    object: z.literal('app_analytics'),
    appId: z.string(),
    from: instantView,
    to: instantView.describe('Exclusive'),
    granularity: z.enum(['hour', 'day']),
    totals: trafficTotalsView,
    buckets: z.array(trafficBucketView).describe('Newest first, empty ones included'),
    topPaths: z.array(z.object({ path: z.string(), ...totalsShape }).meta({ id: 'AppPathTraffic', description: 'One path’s traffic' })).describe('The 10 busiest paths'),
    statuses: z.array(z.object({ status: z.number().int(), count })).describe('Every status answered, ascending'),
  })
  .meta({ id: 'AppAnalytics', description: 'An app’s traffic over a window: totals, per bucket, busiest paths, statuses' });

const costView = z
  .object({
    micros: z.number().int().describe('µUSD: instance-seconds × the hourly price of each sample’s memory tier, rounded down once'),
    usd: z.number().describe('micros / 1e6'),
    instanceSeconds: z.number().describe('Running time of the app’s instances in the window'),
    tiers: z
      .array(z.object({ upToBytes: z.number().int(), microsPerHour: z.number().int(), instanceSeconds: z.number(), micros: z.number().int() }))
      .describe('The memory tiers the samples fell in'),
  })
  .meta({ id: 'AppHostingCost', description: 'What running the app cost in the window' });

const figure = z.number().nullable();

export const usageView = z
  .object({
    object: z.literal('app_usage'),
    appId: z.string(),
    from: instantView,
    to: instantView.describe('Exclusive'),
    sampleEveryMs: z.number().int().describe('How often the runtime’s instances are sampled'),
    latestSampleAt: instantView.nullable().describe('The newest sample in the window; null without one'),
    instances: z.number().int().describe('Instances in the newest sample (two during a swap, 0 when stopped)'),
    memory: z
      .object({
        latestBytes: figure.describe('Resident memory of the instances in the newest sample'),
        averageBytes: figure.describe('Per instance, weighted by running time'),
        peakBytes: figure.describe('The most one instance held in a sample'),
      })
      .describe('Resident memory of each instance’s whole process tree; null without samples'),
    cpu: z
      .object({
        latestCores: figure.describe('CPU time per second of the newest sample (1 = one core busy)'),
        averageCores: figure.describe('Per instance, weighted by running time'),
        peakCores: figure,
      })
      .describe('CPU use; null without samples'),
    traffic: trafficTotalsView,
    cost: costView,
  })
  .meta({ id: 'AppUsage', description: 'Memory, CPU and traffic of an app over a window, sampled by the runtime, and what it cost' });

export const usageSeriesView = z
  .object({
    object: z.literal('app_usage_series'),
    appId: z.string(),
    from: instantView,
    to: instantView.describe('Exclusive'),
    granularity: z.enum(['hour', 'day']),
    buckets: z
      .array(
        z
          .object({
            start: instantView,
            instanceSeconds: z.number(),
            memoryAverageBytes: figure,
            memoryPeakBytes: figure,
            cpuAverageCores: figure,
            cpuPeakCores: figure,
            requests: z.number().int(),
            errors: z.number().int(),
            bytesIn: z.number().int(),
            bytesOut: z.number().int(),
            costMicros: z.number().int().describe('The bucket’s samples priced on their own (rounded down)'),
          })
          .meta({ id: 'AppUsageBucket', description: 'An app’s usage within one UTC hour or day' }),
      )
      .describe('Newest first, empty ones included; a sample counts in the bucket it was taken in'),
  })
  .meta({ id: 'AppUsageSeries', description: 'An app’s memory, CPU, traffic and cost per bucket' });

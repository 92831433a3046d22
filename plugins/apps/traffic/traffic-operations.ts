import { z } from 'zod';
import { authorizedRecord } from '../../../core/identity/authorization.ts';
import { visibleProjectIds } from '../../../core/identity/project-access.ts';
import { defineOperation, type AnyOperation } from '../../../core/operations/operations.ts';
import { listResponse } from '../../../core/vocabulary/pagination.ts';
import type { IdentityStores } from '../../../core/ports/identity.ts';
import { appRecordKind, serviceRecordKind } from '../apps-operations.ts';
import type { AppsStore } from '../apps-store.ts';
import type { HostingPrices } from '../hosting-price.ts';
import { bucketStart, bucketStarts, resolveBucketing } from './buckets.ts';
import type { AppRequestStore, RequestFilters, RequestScope } from './request-store.ts';
import {
  analyticsView,
  appRequestListView,
  appRequestsQuery,
  bucketView,
  serviceRequestsQuery,
  toAppRequestView,
  totalsView,
  usageSeriesView,
  usageView,
  windowQuery,
} from './traffic-views.ts';
import { costOf, latestRound, usageFigures } from './usage-figures.ts';
import type { UsageSample, UsageSampleStore } from './usage-samples.ts';
import { hostingCostMicros } from '../hosting-price.ts';

export interface TrafficOperationDeps {
  store: AppsStore;
  requests: AppRequestStore;
  samples: UsageSampleStore;
  identity: IdentityStores;
  clock: () => Date;
  prices: HostingPrices;
  sampleEveryMs: number;
}

const idParams = z.strictObject({ id: z.uuid() });

const FILTERS_DESCRIPTION =
  'Newest first; pass nextCursor back as cursor, with the same filters, for the next page (no request is skipped or repeated). ' +
  'Filters combine: since/until ([since, until)), band, method, path (exact). requestId (the whole id, or at least its first ' +
  'half) searches every request held and ignores the other filters. The first page adds summary (every request the filters ' +
  'select), facets (counts per method, status class, path and app over the time window only: the other filters do not ' +
  'narrow them) and series (the filtered requests per hour, or per day for a window over two days; since defaults to a day ' +
  'before until there).';

/**
 * The apps proxy's request rows read back: the lists of GET /apps/requests and GET
 * /services/{id}/requests, an app's analytics, and its usage (README.md beside this file).
 */
export function trafficOperations(deps: TrafficOperationDeps): AnyOperation[] {
  const { requests, samples, clock } = deps;
  const appKind = appRecordKind(deps.store);
  const serviceKind = serviceRecordKind(deps.store);

  async function listPage(scope: RequestScope, query: z.output<typeof appRequestsQuery>) {
    const filters: RequestFilters = {
      since: query.since,
      until: query.until,
      band: query.band,
      appId: query.appId,
      method: query.method,
      path: query.path,
      requestId: query.requestId,
    };
    const page = await requests.page(scope, filters, query);
    const answer = listResponse(page, toAppRequestView);
    if (query.cursor !== undefined) return { ...answer, summary: null, facets: null, series: null };
    const byId = filters.requestId !== undefined;
    const window = byId ? {} : { since: filters.since, until: filters.until };
    const bucketing = resolveBucketing({ from: window.since, to: window.until }, clock(), 'since');
    const [summary, facets, series] = await Promise.all([requests.summary(scope, filters), requests.facets(scope, window), requests.series(scope, filters, bucketing)]);
    return {
      ...answer,
      summary: totalsView(summary),
      facets,
      series: {
        granularity: bucketing.granularity,
        from: bucketing.from.toISOString(),
        to: bucketing.to.toISOString(),
        buckets: series.map(bucketView),
      },
    };
  }

  const appRequests = defineOperation({
    name: 'apps.requests',
    method: 'GET',
    path: '/apps/requests',
    summary: 'HTTP requests the apps served, across the apps the caller sees',
    description: `${FILTERS_DESCRIPTION} appId narrows to one app (another project's app is its 404). Scope apps:read.`,
    scope: 'apps:read',
    readOnly: true,
    query: appRequestsQuery,
    resource: { kind: appKind, access: 'read', in: 'query', field: 'appId' },
    output: appRequestListView,
    async handler({ query }, { credential }) {
      const projectIds = await visibleProjectIds(deps.identity, credential);
      return listPage({ organizationId: credential.organizationId, projectIds }, query);
    },
  });

  const serviceRequests = defineOperation({
    name: 'services.requests',
    method: 'GET',
    path: '/services/:id/requests',
    summary: 'HTTP requests one service served',
    description: `${FILTERS_DESCRIPTION} Only this service's requests, the requestId search included.`,
    scope: null,
    readOnly: true,
    params: idParams,
    query: serviceRequestsQuery,
    resource: { kind: serviceKind, access: 'read', in: 'path', field: 'id' },
    output: appRequestListView,
    async handler({ query }, { authorization }) {
      const { service } = authorizedRecord(authorization, serviceKind).record;
      return listPage({ organizationId: service.organizationId, projectIds: null, service: { id: service.id, appId: service.appId } }, query);
    },
  });

  const analytics = defineOperation({
    name: 'apps.analytics',
    method: 'GET',
    path: '/apps/:id/analytics',
    summary: 'An app’s traffic over a window: requests, errors, durations and bytes per bucket, busiest paths, statuses',
    description:
      'Over [from, to) (default: the last day), per hour for two days or less, else per day (or as `granularity` asks; at most ' +
      '500 buckets). Durations are the 50th, 95th and 99th percentiles in ms; errors are statuses 400 and above, server errors ' +
      '500 and above.',
    scope: null,
    readOnly: true,
    params: idParams,
    query: windowQuery,
    resource: { kind: appKind, access: 'read', in: 'path', field: 'id' },
    output: analyticsView,
    async handler({ query }, { authorization }) {
      const app = authorizedRecord(authorization, appKind).record;
      const bucketing = resolveBucketing(query, clock(), 'from');
      const found = await requests.analytics(app.id, bucketing);
      return {
        object: 'app_analytics' as const,
        appId: app.id,
        from: bucketing.from.toISOString(),
        to: bucketing.to.toISOString(),
        granularity: bucketing.granularity,
        totals: totalsView(found.totals),
        buckets: found.buckets.map(bucketView),
        topPaths: found.paths.map((path) => ({ ...totalsView(path), path: path.path })),
        statuses: found.statuses,
      };
    },
  });

  const usage = defineOperation({
    name: 'apps.usage',
    method: 'GET',
    path: '/apps/:id/usage',
    summary: 'Memory, CPU and traffic of an app, sampled by the runtime, and what running it cost',
    description:
      'Over [from, to) (default: the last day). Memory and CPU come from samples the runtime takes of each instance every ' +
      '`usage.sampleEveryMs`; the cost is instance-seconds × the hourly price of the memory tier each sample fell in ' +
      '(a stopped app has no instances, so costs nothing). Traffic counts the requests the apps proxy served.',
    scope: null,
    readOnly: true,
    params: idParams,
    query: windowQuery.omit({ granularity: true }),
    resource: { kind: appKind, access: 'read', in: 'path', field: 'id' },
    output: usageView,
    async handler({ query }, { authorization }) {
      const app = authorizedRecord(authorization, appKind).record;
      const { from, to } = resolveBucketing(query, clock(), 'from');
      const [held, traffic] = await Promise.all([samples.between({ appId: app.id }, from, to), requests.traffic(app.id, from, to)]);
      const figures = usageFigures(held);
      const latest = latestRound(held);
      return {
        object: 'app_usage' as const,
        appId: app.id,
        from: from.toISOString(),
        to: to.toISOString(),
        sampleEveryMs: deps.sampleEveryMs,
        latestSampleAt: latest.at?.toISOString() ?? null,
        instances: latest.instances,
        memory: { latestBytes: latest.memoryBytes, averageBytes: figures.memoryAverageBytes, peakBytes: figures.memoryPeakBytes },
        cpu: { latestCores: latest.cores, averageCores: figures.cpuAverageCores, peakCores: figures.cpuPeakCores },
        traffic: totalsView(traffic),
        cost: costOf(held, deps.prices),
      };
    },
  });

  const usageSeries = defineOperation({
    name: 'apps.usage_series',
    method: 'GET',
    path: '/apps/:id/usage/series',
    summary: 'An app’s memory, CPU, traffic and cost per hour or day',
    description:
      'Over [from, to) (default: the last day), per hour for two days or less, else per day (or as `granularity` asks). A ' +
      'sample counts in the bucket it was taken in, as in the daily hosting charge.',
    scope: null,
    readOnly: true,
    params: idParams,
    query: windowQuery,
    resource: { kind: appKind, access: 'read', in: 'path', field: 'id' },
    output: usageSeriesView,
    async handler({ query }, { authorization }) {
      const app = authorizedRecord(authorization, appKind).record;
      const bucketing = resolveBucketing(query, clock(), 'from');
      const [held, traffic] = await Promise.all([samples.between({ appId: app.id }, bucketing.from, bucketing.to), requests.analytics(app.id, bucketing)]);
      const byBucket = new Map<number, UsageSample[]>();
      for (const sample of held) {
        const start = bucketStart(sample.sampledAt, bucketing.granularity).getTime();
        byBucket.set(start, [...(byBucket.get(start) ?? []), sample]);
      }
      const trafficOf = new Map(traffic.buckets.map((bucket) => [bucket.start.getTime(), bucket]));
      return {
        object: 'app_usage_series' as const,
        appId: app.id,
        from: bucketing.from.toISOString(),
        to: bucketing.to.toISOString(),
        granularity: bucketing.granularity,
        buckets: bucketStarts(bucketing).map((start) => {
          const own = byBucket.get(start.getTime()) ?? [];
          const moved = trafficOf.get(start.getTime());
          return {
            start: start.toISOString(),
            ...usageFigures(own),
            requests: moved?.requests ?? 0,
            errors: moved?.errors ?? 0,
            bytesIn: moved?.bytesIn ?? 0,
            bytesOut: moved?.bytesOut ?? 0,
            costMicros: hostingCostMicros(own, deps.prices),
          };
        }),
      };
    },
  });

  return [appRequests, serviceRequests, analytics, usage, usageSeries];
}

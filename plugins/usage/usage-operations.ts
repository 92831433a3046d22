import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import { usageVisibility, VISIBILITY } from './usage-access.ts';
import { previousRange, resolveGranularity, resolveRange } from './usage-query.ts';
import { comparisonQuery, comparisonView, seriesQuery, seriesView, usageQuery, usageReportView } from './usage-schemas.ts';
import type { ModelSeriesBucket, RequestLogReader } from '../../core/ports/metering.ts';
import { toDeltasView, toModelBucketView, toRequestRowView, toSeriesBucketView, toTotalsView } from './usage-view.ts';

export interface UsageDeps {
  /** The request log, metering's, read through its port. */
  store: RequestLogReader;
  identity: IdentityStores;
  clock: () => Date;
}

export function usageOperations({ store, identity, clock }: UsageDeps): AnyOperation[] {
  const report = defineOperation({
    name: 'usage.get',
    method: 'GET',
    path: '/usage',
    summary: 'Usage report: headline totals, per-model breakdown and recent requests',
    description: `Model calls in [from, to) (default: the last 30 days): requests, errors, tokens, units besides tokens (web searches, images, characters, audio seconds) with their cost, total cost and latency, per model, and the latest \`limit\` requests (newest first). costUsd is tokens and units together. ${VISIBILITY} Scope usage:read.`,
    scope: 'usage:read',
    readOnly: true,
    query: usageQuery,
    resource: { kind: 'project', access: 'read', in: 'query', field: 'projectId' },
    output: usageReportView,
    async handler({ query }, { credential }) {
      const range = resolveRange(query, clock());
      const filter = { visibility: await usageVisibility(identity, credential), ...range, keyId: query.keyId, projectId: query.projectId };
      const [totals, models, recent] = await Promise.all([store.totals(filter), store.byModel(filter), store.list(filter, query.limit)]);
      return {
        object: 'usage_report' as const,
        from: range.from.toISOString(),
        to: range.to.toISOString(),
        keyId: query.keyId ?? null,
        projectId: query.projectId ?? null,
        totals: toTotalsView(totals),
        models: models.map((m) => ({ model: m.model, ...toTotalsView(m) })),
        recent: recent.map(toRequestRowView),
      };
    },
  });

  const series = defineOperation({
    name: 'usage.series',
    method: 'GET',
    path: '/usage/series',
    summary: 'Requests, tokens, units and cost per hour or per day',
    description: `UTC buckets over [from, to) (default: the last 30 days), newest first, empty buckets included. Granularity defaults to hour for a window of two days or less, else day; at most 2000 buckets. keyId and projectId narrow it; by=model adds each bucket's calls per model. ${VISIBILITY} Scope usage:read, like the usage report it charts.`,
    scope: 'usage:read',
    readOnly: true,
    query: seriesQuery,
    resource: { kind: 'project', access: 'read', in: 'query', field: 'projectId' },
    output: seriesView,
    async handler({ query }, { credential }) {
      const range = resolveRange(query, clock());
      const granularity = resolveGranularity(range, query.granularity);
      const filter = { visibility: await usageVisibility(identity, credential), ...range, keyId: query.keyId, projectId: query.projectId };
      const [buckets, byModel] = await Promise.all([store.series(filter, granularity), query.by === 'model' ? store.seriesByModel(filter, granularity) : null]);
      const modelsAt = byModel === null ? null : modelsByBucket(byModel);
      return {
        object: 'usage_series' as const,
        from: range.from.toISOString(),
        to: range.to.toISOString(),
        keyId: query.keyId ?? null,
        projectId: query.projectId ?? null,
        granularity,
        buckets: buckets.map((bucket) => ({
          ...toSeriesBucketView(bucket),
          ...(modelsAt === null ? {} : { models: (modelsAt.get(bucket.start.getTime()) ?? []).map(toModelBucketView) }),
        })),
      };
    },
  });

  const comparison = defineOperation({
    name: 'usage.comparison',
    method: 'GET',
    path: '/usage/comparison',
    summary: 'This window against the previous window of the same length',
    description: `Totals of [from, to) (default: the last 30 days) and of the same length just before it, with absolute and percentage changes (percentage null when the previous figure is 0). ${VISIBILITY} Scope usage:read, like the usage report.`,
    scope: 'usage:read',
    readOnly: true,
    query: comparisonQuery,
    resource: { kind: 'project', access: 'read', in: 'query', field: 'projectId' },
    output: comparisonView,
    async handler({ query }, { credential }) {
      const current = resolveRange(query, clock());
      const previous = previousRange(current);
      const visibility = await usageVisibility(identity, credential);
      const scope = { visibility, keyId: query.keyId, projectId: query.projectId };
      const [now, before] = await Promise.all([store.totals({ ...scope, ...current }), store.totals({ ...scope, ...previous })]);
      return {
        object: 'usage_comparison' as const,
        keyId: query.keyId ?? null,
        projectId: query.projectId ?? null,
        current: { from: current.from.toISOString(), to: current.to.toISOString(), totals: toTotalsView(now) },
        previous: { from: previous.from.toISOString(), to: previous.to.toISOString(), totals: toTotalsView(before) },
        deltas: toDeltasView(now, before),
      };
    },
  });

  return [report, series, comparison];
}

/** Each bucket's models, costliest first (then most calls, then by name). */
function modelsByBucket(rows: readonly ModelSeriesBucket[]): Map<number, ModelSeriesBucket[]> {
  const byStart = new Map<number, ModelSeriesBucket[]>();
  for (const row of rows) {
    const at = row.start.getTime();
    byStart.set(at, [...(byStart.get(at) ?? []), row]);
  }
  for (const models of byStart.values()) {
    models.sort((a, b) => (a.costMicros === b.costMicros ? b.requests - a.requests || (a.model ?? '').localeCompare(b.model ?? '') : a.costMicros > b.costMicros ? -1 : 1));
  }
  return byStart;
}

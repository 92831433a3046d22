import { ApiError } from '../../core/kernel/errors.ts';
import { listResponse } from '../../core/vocabulary/pagination.ts';
import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import { mayReadBodies, usageVisibility, VISIBILITY } from './usage-access.ts';
import type { UsageDeps } from './usage-operations.ts';
import { minuteWindow, resolveOpenRange } from './usage-query.ts';
import { RECENT_REQUESTS, requestDetailView, requestIdParams, requestListView, requestsQuery, windowQuery, windowView } from './usage-schemas.ts';
import { toRequestRowView, toWindowStatsView } from './usage-view.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './usage-errors.ts';

export function requestOperations({ store, identity, clock }: UsageDeps): AnyOperation[] {
  const list = defineOperation({
    name: 'requests.list',
    method: 'GET',
    path: '/requests',
    summary: 'Gateway request log, newest first, with keyset pagination',
    description: `Filters combine: from/to ([from, to), no bound when absent), keyId, projectId, model (exact), q (request id, or text in the model or endpoint, case-insensitive), band (errors: status >= 400; slow: streamed first token over 5 s, or unstreamed over 30 s). Pass nextCursor back as cursor, with the same filters, for the next page; nextCursor is null on the last page. ${VISIBILITY} Scope usage:read.`,
    scope: 'usage:read',
    readOnly: true,
    query: requestsQuery,
    resource: { kind: 'project', access: 'read', in: 'query', field: 'projectId' },
    output: requestListView,
    async handler({ query }, { credential }) {
      const page = await store.page(
        {
          visibility: await usageVisibility(identity, credential),
          ...resolveOpenRange(query),
          keyId: query.keyId,
          projectId: query.projectId,
          model: query.model,
          q: query.q,
          band: query.band,
        },
        query,
      );
      return listResponse(page, toRequestRowView);
    },
  });

  const recent = defineOperation({
    name: 'requests.recent',
    method: 'GET',
    path: '/requests/recent',
    summary: `The latest ${RECENT_REQUESTS} gateway requests, for dashboards`,
    description: `Newest first. ${VISIBILITY} Scope usage:read, like the request log it is the head of.`,
    scope: 'usage:read',
    readOnly: true,
    output: requestListView,
    async handler(_input, { credential }) {
      const rows = await store.list({ visibility: await usageVisibility(identity, credential) }, RECENT_REQUESTS);
      return { object: 'list' as const, data: rows.map(toRequestRowView), nextCursor: null };
    },
  });

  const window = defineOperation({
    name: 'requests.window',
    method: 'GET',
    path: '/requests/window',
    summary: 'Requests, errors, cost and latency over the last N minutes, per minute',
    description: `The last \`minutes\` whole UTC minutes (default 60, max 1440), the current minute included as the newest bucket; buckets newest first, empty ones included. Latency and time-to-first-token figures are medians and 95th percentiles in ms (null with no calls). ${VISIBILITY} Scope usage:read, like the request log it summarises.`,
    scope: 'usage:read',
    readOnly: true,
    query: windowQuery,
    output: windowView,
    async handler({ query }, { credential }) {
      const range = minuteWindow(clock(), query.minutes);
      const { totals, buckets } = await store.window({ visibility: await usageVisibility(identity, credential), ...range });
      return {
        object: 'request_window' as const,
        minutes: query.minutes,
        from: range.from.toISOString(),
        to: range.to.toISOString(),
        ...toWindowStatsView(totals),
        buckets: buckets.map((b) => ({ start: b.start.toISOString(), ...toWindowStatsView(b) })),
      };
    },
  });

  const get = defineOperation({
    name: 'requests.get',
    method: 'GET',
    path: '/requests/:id',
    summary: 'One gateway request in full, with its prompt and response when the caller may read them',
    description: `Bodies are included only for a key holding requests:read, or a session of an owner or admin, or of an admin or developer of the call's project, and only when request logging was on for the call; otherwise request and response are null and bodiesHidden says why ('role' or 'not_logged'). ${VISIBILITY} A request outside that answers 404. Scope usage:read.`,
    scope: 'usage:read',
    readOnly: true,
    params: requestIdParams,
    errors: ['request_not_found'],
    output: requestDetailView,
    async handler({ params }, { credential }) {
      const row = await store.get(await usageVisibility(identity, credential), params.id);
      if (!row) throw new ApiError('request_not_found', `No request ${params.id}`, { param: 'id' });
      const view = toRequestRowView(row);
      if (!(await mayReadBodies(identity, credential, row.projectId))) {
        return { ...view, request: null, response: null, bodiesHidden: 'role' as const };
      }
      const bodies = await store.bodies(row.id);
      if (!bodies) return { ...view, request: null, response: null, bodiesHidden: 'not_logged' as const };
      return { ...view, request: bodies.request, response: bodies.response, bodiesHidden: null };
    },
  });

  return [list, recent, window, get];
}

import { z } from 'zod';
import { authorizedRecord } from '../../../core/identity/authorization.ts';
import { visibleProjectIds } from '../../../core/identity/project-access.ts';
import { defineOperation, type AnyOperation } from '../../../core/operations/operations.ts';
import type { IdentityStores } from '../../../core/ports/identity.ts';
import { serviceRecordKind } from '../apps-operations.ts';
import type { AppsStore } from '../apps-store.ts';
import type { UpkeepStore } from './upkeep-store.ts';

export interface EgressDeps {
  store: AppsStore;
  upkeep: UpkeepStore;
  identity: IdentityStores;
  clock: () => Date;
  alertBytesPerDay: number;
}

const WINDOW_MS = 24 * 3_600_000;

const egressView = z
  .object({
    object: z.literal('egress_alert'),
    serviceId: z.string(),
    appId: z.string(),
    appName: z.string(),
    alerting: z.boolean().describe('Whether bytesOut is over thresholdBytes'),
    bytesOut: z.number().describe('Bytes the app answered through the apps proxy in the window'),
    thresholdBytes: z.number().describe('`plugins.apps.egress.alertBytesPerDay`'),
    windowStart: z.string(),
    windowEnd: z.string(),
    measuredAt: z.literal('proxy').describe('What is measured: responses through the apps proxy (not the app’s own outbound connections)'),
  })
  .meta({ id: 'EgressAlert', description: 'What an app sent in the last 24 hours, against the alert threshold' });

const egressListView = z.object({ object: z.literal('list'), data: z.array(egressView) }).meta({ id: 'EgressAlertList', description: 'Egress per service' });

/**
 * Egress alerts: what each app answered through the apps proxy in the last 24 hours (the proxy's
 * request rows, `bytes_out`), against `plugins.apps.egress.alertBytesPerDay`. The local runtime
 * shares the host's network, so an app's own outbound connections are not measured here
 * (README.md "Egress alerts").
 */
export function egressOperations(deps: EgressDeps): AnyOperation[] {
  const { store, upkeep, clock } = deps;
  const serviceKind = serviceRecordKind(store);

  async function measure(organizationId: string, services: Array<{ id: string; app: { id: string; name: string } }>) {
    const end = clock();
    const start = new Date(end.getTime() - WINDOW_MS);
    const bytes = await upkeep.bytesOut(
      organizationId,
      start,
      services.map((service) => service.id),
    );
    return services.map((service) => {
      const bytesOut = bytes.get(service.id) ?? 0;
      return {
        object: 'egress_alert' as const,
        serviceId: service.id,
        appId: service.app.id,
        appName: service.app.name,
        alerting: bytesOut > deps.alertBytesPerDay,
        bytesOut,
        thresholdBytes: deps.alertBytesPerDay,
        windowStart: start.toISOString(),
        windowEnd: end.toISOString(),
        measuredAt: 'proxy' as const,
      };
    });
  }

  const one = defineOperation({
    name: 'services.egress_alert',
    method: 'GET',
    path: '/services/:id/egress-alert',
    summary: 'What the service sent in the last 24 hours, and whether that is over the alert threshold',
    scope: null,
    readOnly: true,
    params: z.strictObject({ id: z.uuid() }),
    resource: { kind: serviceKind, access: 'read', in: 'path', field: 'id' },
    output: egressView,
    async handler(_input, { authorization }) {
      const { service, app } = authorizedRecord(authorization, serviceKind).record;
      const [measured] = await measure(service.organizationId, [{ id: service.id, app }]);
      return measured!;
    },
  });

  const all = defineOperation({
    name: 'apps.egress_alerts',
    method: 'GET',
    path: '/egress-alerts',
    summary: 'The apps over the egress alert threshold in the last 24 hours',
    description: 'Only alerting services, most bytes first; `all=1` lists every service the caller may see.',
    scope: 'apps:read',
    readOnly: true,
    query: z.strictObject({ all: z.enum(['0', '1']).optional().describe('1: every service, alerting or not') }),
    output: egressListView,
    async handler({ query }, { credential }) {
      const visible = await visibleProjectIds(deps.identity, credential);
      const apps = await store.apps(credential.organizationId, visible);
      const services = (await Promise.all(apps.map(async (app) => (await store.services(app.id)).map((service) => ({ id: service.id, app }))))).flat();
      const measured = await measure(credential.organizationId, services);
      const data = (query.all === '1' ? measured : measured.filter((entry) => entry.alerting)).sort((a, b) => b.bytesOut - a.bytesOut);
      return { object: 'list' as const, data };
    },
  });

  return [one, all];
}

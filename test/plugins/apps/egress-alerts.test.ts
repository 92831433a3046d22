import { randomUUID } from 'node:crypto';
import t from 'tap';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { insertAppRequests } from '../../../plugins/apps/proxy/index.ts';
import { addPerson, buildTestApp, createKey } from '../../helpers/app.ts';
import { storedApp } from './apps-fixtures.ts';

/**
 * Egress alerts (plugins/apps/README.md "Egress alerts"): what each app answered through the apps
 * proxy in the last 24 hours (the proxy's request rows), against `egress.alertBytesPerDay`.
 */
t.setTimeout(120_000);
let now = new Date('2026-03-10T12:00:00Z');
const test = await buildTestApp(t, {
  clock: () => now,
  plugins: { keys: {}, projects: {}, githost: {}, apps: { proxy: { port: 0 }, egress: { alertBytesPerDay: 1_000 } } },
});
const db = test.app.svc.container.resolve(Tokens.Database);

async function served(app: { appId: string; serviceId: string; deploymentId: string }, at: Date, bytesOut: number) {
  await insertAppRequests(db, [
    {
      id: randomUUID(),
      at,
      organizationId: test.organizationId,
      appId: app.appId,
      serviceId: app.serviceId,
      deploymentId: app.deploymentId,
      method: 'GET',
      path: '/',
      status: 200,
      durationMs: 1,
      bytesIn: 10,
      bytesOut,
    },
  ]);
}

const hoursAgo = (hours: number) => new Date(now.getTime() - hours * 3_600_000);
const busy = await storedApp(test, 'egress-busy');
const quiet = await storedApp(test, 'egress-quiet');
await served(busy, hoursAgo(1), 700);
await served(busy, hoursAgo(23), 400);
await served(busy, hoursAgo(25), 5_000);
await served(quiet, hoursAgo(2), 300);

t.test('a service’s egress is the bytes it answered in the last 24 hours, alerting over the threshold', async (t) => {
  const response = await test.call('GET', `/client/services/${busy.serviceId}/egress-alert`);
  t.equal(response.statusCode, 200, response.body);
  t.same(response.json(), {
    object: 'egress_alert',
    serviceId: busy.serviceId,
    appId: busy.appId,
    appName: 'egress-busy',
    alerting: true,
    bytesOut: 1_100,
    thresholdBytes: 1_000,
    windowStart: '2026-03-09T12:00:00.000Z',
    windowEnd: '2026-03-10T12:00:00.000Z',
    measuredAt: 'proxy',
  });
  t.match((await test.call('GET', `/client/services/${quiet.serviceId}/egress-alert`)).json(), { alerting: false, bytesOut: 300 });
});

t.test('the window moves with the clock: traffic older than 24 hours stops counting', async (t) => {
  now = new Date(now.getTime() + 2 * 3_600_000);
  t.teardown(() => {
    now = new Date(now.getTime() - 2 * 3_600_000);
  });
  t.match((await test.call('GET', `/client/services/${busy.serviceId}/egress-alert`)).json(), { alerting: false, bytesOut: 700 });
});

t.test('GET /egress-alerts lists only the alerting services; all=1 lists every one, most bytes first', async (t) => {
  const alerts = (await test.call('GET', '/client/egress-alerts')).json();
  t.same(
    alerts.data.map((entry: { appName: string }) => entry.appName),
    ['egress-busy'],
  );
  const every = (await test.call('GET', '/client/egress-alerts?all=1')).json();
  t.same(
    every.data.map((entry: { appName: string; bytesOut: number }) => [entry.appName, entry.bytesOut]),
    [
      ['egress-busy', 1_100],
      ['egress-quiet', 300],
    ],
  );
});

t.test('GET /egress-alerts lists the apps of the projects the caller sees, and takes apps:read', async (t) => {
  const project = (await test.call('POST', '/client/projects', { body: { name: 'elsewhere' } })).json();
  const hidden = await storedApp(test, 'egress-hidden', { organizationId: test.organizationId, projectId: project.id });
  await served(hidden, hoursAgo(1), 9_999);
  const member = await addPerson(test, { role: 'member' });
  const seen = (await test.call('GET', '/client/egress-alerts?all=1', { token: member.token })).json();
  t.notOk(
    seen.data.some((entry: { appName: string }) => entry.appName === 'egress-hidden'),
    'a member outside the project does not see its app',
  );
  const deployer = await createKey(test, { scopes: ['apps:deploy'] });
  t.equal((await test.call('GET', '/client/egress-alerts', { token: deployer.key })).statusCode, 403);
});

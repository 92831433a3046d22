import t from 'tap';
import { Tokens } from '../../../../core/kernel/di-tokens.ts';
import { hostingCostMicros, priceTiersOf } from '../../../../plugins/apps/hosting-price.ts';
import type { InstanceUsage } from '../../../../plugins/apps/runtime/index.ts';
import { sampleUsage, UsageSampleStore } from '../../../../plugins/apps/traffic/usage-samples.ts';
import { createKey, type TestApp } from '../../../helpers/app.ts';
import { storedApp, TEST_HOSTING_PRICES, trafficServer, writeRows } from './traffic-fixtures.ts';

const MiB = 1024 * 1024;
const START = new Date('2026-03-10T10:00:00.000Z');
const at = (minutes: number) => new Date(START.getTime() + minutes * 60_000);

/** Samples an instance through the sampler: one round per entry, the clock moved to each. */
async function sampleRounds(
  test: TestApp,
  now: { at: Date },
  owner: { serviceId: string; deploymentId: string },
  rounds: Array<{ at: Date; instances: Array<{ name: string; startedAt: Date; memoryBytes: number; cpuMs: number }> }>,
): Promise<void> {
  const samples = new UsageSampleStore(test.app.svc.container.resolve(Tokens.Database));
  for (const round of rounds) {
    now.at = round.at;
    const usage: InstanceUsage[] = round.instances.map((instance) => ({
      ...owner,
      instance: instance.name,
      startedAt: instance.startedAt.toISOString(),
      memoryBytes: instance.memoryBytes,
      cpuMs: instance.cpuMs,
      processes: 1,
    }));
    await sampleUsage({ samples, clock: () => now.at, retentionMs: 90 * 86_400_000 }, { usage: async () => usage });
  }
}

t.test('usage: memory, CPU and traffic over the window, and the cost of the instance-time by memory tier', async (t) => {
  const now = { at: START };
  const test = await trafficServer(t, now);
  const app = await storedApp(test, 'used');
  const a = { name: 'a', startedAt: at(0) };
  const b = { name: 'b', startedAt: at(19) };
  await sampleRounds(test, now, app, [
    { at: at(10), instances: [{ ...a, memoryBytes: 200 * MiB, cpuMs: 60_000 }] },
    {
      at: at(20),
      instances: [
        { ...a, memoryBytes: 400 * MiB, cpuMs: 90_000 },
        { ...b, memoryBytes: 100 * MiB, cpuMs: 6_000 },
      ],
    },
    { at: at(30), instances: [{ ...b, memoryBytes: 100 * MiB, cpuMs: 66_000 }] },
  ]);
  await writeRows(test, app, [
    { at: at(5), status: 200, bytesIn: 10, bytesOut: 1_000 },
    { at: at(25), status: 503, bytesIn: 20, bytesOut: 50 },
  ]);
  now.at = at(35);
  const response = await test.call('GET', `/client/apps/${app.appId}/usage`);
  t.equal(response.statusCode, 200, response.body);
  const usage = response.json();
  // a: 10 min at 200 MiB (60 s CPU), 10 min at 400 MiB (30 s); b: 1 min at 100 MiB (6 s), 10 min at 100 MiB (60 s).
  const covered = [
    { coversMs: 600_000, memoryBytes: 200 * MiB },
    { coversMs: 600_000, memoryBytes: 400 * MiB },
    { coversMs: 60_000, memoryBytes: 100 * MiB },
    { coversMs: 600_000, memoryBytes: 100 * MiB },
  ];
  const micros = hostingCostMicros(covered, priceTiersOf(TEST_HOSTING_PRICES));
  t.equal(micros, Math.floor((1_260_000 * 2_000 + 600_000 * 4_000) / 3_600_000));
  t.match(usage, {
    object: 'app_usage',
    appId: app.appId,
    from: at(35 - 24 * 60).toISOString(),
    to: at(35).toISOString(),
    sampleEveryMs: 60_000,
    latestSampleAt: at(30).toISOString(),
    instances: 1,
    memory: { latestBytes: 100 * MiB, peakBytes: 400 * MiB },
    cpu: { latestCores: 0.1, peakCores: 0.1 },
    traffic: { requests: 2, errors: 1, serverErrors: 1, bytesIn: 30, bytesOut: 1_050 },
    cost: { micros, usd: micros / 1e6, instanceSeconds: 1_860 },
  });
  t.equal(usage.memory.averageBytes, Math.round(((600 * 200 + 600 * 400 + 60 * 100 + 600 * 100) * MiB) / 1_860));
  t.equal(usage.cpu.averageCores, (60_000 + 30_000 + 6_000 + 60_000) / 1_860_000);
  t.same(
    usage.cost.tiers.map((tier: { upToBytes: number; instanceSeconds: number }) => [tier.upToBytes / MiB, tier.instanceSeconds]),
    [
      [256, 1_260],
      [512, 600],
    ],
  );

  const narrow = (await test.call('GET', `/client/apps/${app.appId}/usage?from=${at(15).toISOString()}&to=${at(26).toISOString()}`)).json();
  t.equal(narrow.cost.instanceSeconds, 660, 'a sample counts in the window it was taken in');
  t.equal(narrow.traffic.requests, 1);
  t.equal(narrow.instances, 2, 'two instances in that round: the swap');
  t.equal(narrow.memory.latestBytes, 500 * MiB);
});

t.test('a window without samples: nothing ran, nothing is owed', async (t) => {
  const now = { at: START };
  const test = await trafficServer(t, now);
  const app = await storedApp(test, 'idle');
  const usage = (await test.call('GET', `/client/apps/${app.appId}/usage`)).json();
  t.match(usage, {
    latestSampleAt: null,
    instances: 0,
    memory: { latestBytes: null, averageBytes: null, peakBytes: null },
    cpu: { latestCores: null, averageCores: null, peakCores: null },
    cost: { micros: 0, usd: 0, instanceSeconds: 0, tiers: [] },
  });
});

t.test('usage series: per hour, each bucket its own samples, traffic and cost', async (t) => {
  const now = { at: START };
  const test = await trafficServer(t, now);
  const app = await storedApp(test, 'series');
  const a = { name: 'a', startedAt: at(-30) };
  await sampleRounds(test, now, app, [
    { at: at(-10), instances: [{ ...a, memoryBytes: 300 * MiB, cpuMs: 1_200 }] },
    { at: at(50), instances: [{ ...a, memoryBytes: 100 * MiB, cpuMs: 4_800 }] },
  ]);
  await writeRows(test, app, [{ at: at(55), status: 200, bytesOut: 7 }]);
  now.at = at(60);
  const response = await test.call('GET', `/client/apps/${app.appId}/usage/series?from=${at(-60).toISOString()}`);
  t.equal(response.statusCode, 200, response.body);
  const series = response.json();
  t.equal(series.granularity, 'hour');
  t.same(
    series.buckets.map((bucket: { start: string }) => bucket.start),
    [at(0).toISOString(), at(-60).toISOString()],
  );
  t.same(series.buckets[0], {
    start: at(0).toISOString(),
    instanceSeconds: 3_600,
    memoryAverageBytes: 100 * MiB,
    memoryPeakBytes: 100 * MiB,
    cpuAverageCores: 3_600 / 3_600_000,
    cpuPeakCores: 3_600 / 3_600_000,
    requests: 1,
    errors: 0,
    bytesIn: 0,
    bytesOut: 7,
    costMicros: 2_000,
  });
  t.match(series.buckets[1], { instanceSeconds: 1_200, memoryPeakBytes: 300 * MiB, requests: 0, costMicros: Math.floor((1_200_000 * 4_000) / 3_600_000) });
});

t.test('analytics: totals, buckets, busiest paths and statuses of one app', async (t) => {
  const now = { at: at(120) };
  const test = await trafficServer(t, now);
  const app = await storedApp(test, 'analysed');
  const other = await storedApp(test, 'unrelated');
  await writeRows(test, app, [
    { at: at(10), path: '/a', status: 200, durationMs: 10, bytesOut: 100 },
    { at: at(20), path: '/a', status: 200, durationMs: 20, bytesOut: 100 },
    { at: at(70), path: '/b', status: 404, durationMs: 30, bytesOut: 10 },
    { at: at(80), path: '/a', status: 500, durationMs: 40, bytesOut: 10 },
  ]);
  await writeRows(test, other, [{ at: at(10) }]);
  const response = await test.call('GET', `/client/apps/${app.appId}/analytics?from=${at(0).toISOString()}`);
  t.equal(response.statusCode, 200, response.body);
  const analytics = response.json();
  t.match(analytics, {
    object: 'app_analytics',
    granularity: 'hour',
    totals: { requests: 4, errors: 2, errorRate: 0.5, serverErrors: 1, p50DurationMs: 20, p95DurationMs: 40, bytesOut: 220 },
    statuses: [
      { status: 200, count: 2 },
      { status: 404, count: 1 },
      { status: 500, count: 1 },
    ],
  });
  t.same(
    analytics.buckets.map((bucket: { start: string; requests: number; errors: number }) => [bucket.start, bucket.requests, bucket.errors]),
    [
      [at(60).toISOString(), 2, 2],
      [at(0).toISOString(), 2, 0],
    ],
  );
  t.same(
    analytics.topPaths.map((path: { path: string; requests: number; serverErrors: number }) => [path.path, path.requests, path.serverErrors]),
    [
      ['/a', 3, 1],
      ['/b', 1, 0],
    ],
  );
  const reversed = await test.call('GET', `/client/apps/${app.appId}/analytics?from=${at(200).toISOString()}`);
  t.equal(reversed.statusCode, 400);
  t.equal(reversed.json().error.param, 'from');
  const tooMany = await test.call('GET', `/client/apps/${app.appId}/analytics?from=${at(-60 * 24 * 60).toISOString()}&granularity=hour`);
  t.equal(tooMany.statusCode, 400);
  t.equal(tooMany.json().error.param, 'granularity');
});

t.test('another project’s app: its analytics and usage are 404s', async (t) => {
  const test = await trafficServer(t, { at: START });
  const project = (await test.call('POST', '/client/projects', { body: { name: 'apart' } })).json();
  const theirs = await storedApp(test, 'apart', { organizationId: test.organizationId, projectId: project.id });
  const { key } = await createKey(test, { scopes: ['apps:read'] });
  for (const suffix of ['analytics', 'usage', 'usage/series']) {
    const response = await test.call('GET', `/client/apps/${theirs.appId}/${suffix}`, { token: key });
    t.equal(response.statusCode, 404, suffix);
    t.equal(response.json().error.code, 'app_not_found');
  }
});

t.test('deleting an app deletes its samples and request rows', async (t) => {
  const now = { at: START };
  const test = await trafficServer(t, now);
  const app = await storedApp(test, 'deleted');
  await sampleRounds(test, now, app, [{ at: at(1), instances: [{ name: 'x', startedAt: at(0), memoryBytes: MiB, cpuMs: 1 }] }]);
  await writeRows(test, app, [{ at: at(1) }]);
  const removed = await test.call('DELETE', `/client/apps/${app.appId}`);
  t.equal(removed.statusCode, 200, removed.body);
  const database = test.app.svc.container.resolve(Tokens.Database);
  const { rows } = await database.query(
    'SELECT (SELECT count(*) FROM app_usage_samples WHERE app_id = $1)::int AS samples, (SELECT count(*) FROM app_requests WHERE app_id = $1)::int AS requests',
    [app.appId],
  );
  t.same(rows[0], { samples: 0, requests: 0 });
});

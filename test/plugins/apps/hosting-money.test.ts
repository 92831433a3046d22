import t, { type Test } from 'tap';
import { SqlMailOutbox } from '../../../adapters/sql/mail-outbox.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import type { HostingBilling } from '../../../plugins/apps/hosting-billing.ts';
import type { HostingMeter } from '../../../plugins/apps/hosting-meter.ts';
import { AppsTokens } from '../../../plugins/apps/index.ts';
import { allPlugins, buildTestApp, type TestApp } from '../../helpers/app.ts';
import { storedApp } from './apps-fixtures.ts';

/**
 * Hosting money (plugins/apps/README.md): instance runs metered with the injected clock, one
 * `hosting` and one `hosting_base_fee` line per organisation and closed UTC day, posted once, and
 * the zero-balance rule (warning mail, grace, services stopped).
 */
t.setTimeout(600_000);

const MiB = 1024 * 1024;
const HOUR = 3_600_000;

interface Harness {
  test: TestApp;
  meter: HostingMeter;
  billing: HostingBilling;
  at(iso: string): void;
  advance(ms: number): void;
}

async function hostingApp(t: Test, settings: { initialCreditUsd?: number; hosting?: Record<string, unknown> } = {}): Promise<Harness> {
  let now = Date.parse('2026-03-02T09:00:00.000Z');
  const plugins = allPlugins();
  const test = await buildTestApp(t, {
    clock: () => new Date(now),
    plugins: {
      ...plugins,
      metering: { initialCreditUsd: settings.initialCreditUsd ?? 100 },
      apps: { proxy: { port: 0 }, hosting: { baseFeeUsdPerDay: 0.01, closeDelayMinutes: 15, heartbeatSeconds: 60, graceHours: 24, ...settings.hosting } },
    },
  });
  const meter = test.app.svc.container.resolve(AppsTokens.Meter);
  const billing = test.app.svc.container.resolve(AppsTokens.Host).billing!;
  return {
    test,
    meter,
    billing,
    at: (iso) => void (now = Date.parse(iso)),
    advance: (ms) => void (now += ms),
  };
}

/** A started or exited instance as the runtime reports it, seen by the meter at the clock's time. */
async function instance(h: Harness, kind: 'started' | 'exited', ids: { serviceId: string; deploymentId: string }, name: string, memoryMiB = 512): Promise<void> {
  if (kind === 'started') h.meter.record({ kind, ...ids, instance: name, memoryBytes: memoryMiB * MiB });
  else h.meter.record({ kind, ...ids, instance: name, code: 0, signal: null });
  await h.meter.settled();
}

t.test('a metered day: ledger = entries = /credits/hosting = /credits/summary, to the µUSD', async (t) => {
  const h = await hostingApp(t);
  const { test } = h;
  const shop = await storedApp(test, 'shop');
  const blog = await storedApp(test, 'blog');

  // shop: 10:00–12:00 at 512 MiB ($0.005/h) = 10,000 µ$.
  h.at('2026-03-02T10:00:00.000Z');
  await instance(h, 'started', shop, 'shop-1');
  h.at('2026-03-02T12:00:00.000Z');
  await instance(h, 'exited', shop, 'shop-1');
  // shop again: 12:00:00.5 onwards, its host dies after the 12:30 heartbeat; the next host closes it there (0.49986 h: 2,499.3 µ$, 2,499).
  h.at('2026-03-02T12:00:00.500Z');
  await instance(h, 'started', shop, 'shop-2');
  h.at('2026-03-02T12:30:00.000Z');
  await h.meter.heartbeat();
  h.at('2026-03-02T15:00:00.000Z');
  t.equal(await h.meter.closeAbandoned(), 1, 'the dead host’s run is closed at its last heartbeat');
  // blog: 23:00 to 01:30 the next day at 1 GiB ($0.01/h): one hour on the 2nd = 10,000 µ$.
  h.at('2026-03-02T23:00:00.000Z');
  await instance(h, 'started', blog, 'blog-1', 1024);
  h.at('2026-03-03T00:16:00.000Z');
  await h.meter.heartbeat();

  const day = await h.billing.day(test.organizationId, '2026-03-02');
  t.same(
    day.entries.map((entry) => [entry.serviceId, entry.ms, entry.tier, entry.costMicros]),
    [
      [shop.serviceId, 2 * HOUR, '512MiB', 10_000n],
      [shop.serviceId, HOUR / 2 - 500, '512MiB', 2_499n],
      [blog.serviceId, HOUR, '1024MiB', 10_000n],
    ],
  );
  t.equal(day.hostingMicros, 22_499n);
  t.equal(day.baseFeeMicros, 10_000n);

  t.same(await h.billing.dueDays(new Date('2026-03-03T00:14:59.999Z')), [], 'not due before the close delay');
  await h.billing.tick();

  const lines = (await test.call('GET', '/client/credits/hosting')).json().data;
  t.equal(lines.length, 2, 'one hosting line and one base fee line');
  const hosting = lines.find((line: { kind: string }) => line.kind === 'hosting');
  const fee = lines.find((line: { kind: string }) => line.kind === 'hosting_base_fee');
  t.match(hosting, { amountUsd: -0.022499, coversUtcDay: '2026-03-02', coversEntries: 3, reference: 'hosting:2026-03-02' });
  t.match(fee, { amountUsd: -0.01, coversUtcDay: '2026-03-02', coversEntries: null, note: 'App hosting base fee for 2026-03-02' });
  const summary = (await test.call('GET', '/client/credits/summary')).json();
  t.equal(summary.micros.hosting, String(day.hostingMicros + day.baseFeeMicros), 'summary hosting = entries + base fee');
  t.equal(summary.micros.closing, String(100_000_000n - 32_499n));
  const credits = (await test.call('GET', '/client/credits')).json();
  t.equal(credits.balanceMicros, summary.micros.closing);

  // Model calls only: the usage report and its series carry no hosting money; the ledger's AI share is theirs.
  const usage = (await test.call('GET', '/client/usage?from=2026-03-01&to=2026-03-04')).json();
  t.equal(usage.totals.costUsd, 0);
  t.equal(summary.aiUsd, 0);
  const series = (await test.call('GET', '/client/usage/series?from=2026-03-01&to=2026-03-04')).json();
  t.ok(series.buckets.length > 0 && series.buckets.every((bucket: { costUsd: number }) => bucket.costUsd === 0), 'no bucket counts hosting');

  t.test('a replayed close posts nothing more', async (t) => {
    t.same(await h.billing.closeDay(test.organizationId, '2026-03-02'), []);
    t.equal(await h.billing.closeDue(), 0);
    h.advance(HOUR);
    await h.billing.tick();
    const again = (await test.call('GET', '/client/credits/hosting')).json().data;
    t.equal(again.length, 2);
    t.equal((await test.call('GET', '/client/credits/summary')).json().micros.hosting, '32499');
  });

  t.test('the next day charges the rest of the run that crossed midnight', async (t) => {
    h.at('2026-03-03T01:30:00.000Z');
    await instance(h, 'exited', blog, 'blog-1', 1024);
    h.at('2026-03-04T00:15:00.000Z');
    await h.billing.tick();
    const lines = (await test.call('GET', '/client/credits/hosting')).json().data;
    const day3 = lines.filter((line: { coversUtcDay: string }) => line.coversUtcDay === '2026-03-03');
    t.same(
      day3.map((line: { kind: string; amountUsd: number; coversUtcDay: string; coversEntries: number | null }) => [line.kind, line.amountUsd, line.coversUtcDay, line.coversEntries]).sort(),
      [
        ['hosting', -0.015, '2026-03-03', 1],
        ['hosting_base_fee', -0.01, '2026-03-03', null],
      ],
    );
  });

  t.test('a day without a running instance is not charged, not even the base fee', async (t) => {
    h.at('2026-03-06T00:15:00.000Z');
    await h.billing.tick();
    t.equal((await test.call('GET', '/client/credits/hosting')).json().data.length, 4);
  });
});

t.test('a stopped service costs nothing: its run ends with the stop', async (t) => {
  const h = await hostingApp(t);
  const shop = await storedApp(h.test, 'shop');
  h.at('2026-03-02T10:00:00.000Z');
  await instance(h, 'started', shop, 'shop-1');
  h.at('2026-03-02T11:00:00.000Z');
  await instance(h, 'exited', shop, 'shop-1');
  h.at('2026-03-02T18:00:00.000Z');
  await h.meter.heartbeat();
  const day = await h.billing.day(h.test.organizationId, '2026-03-02');
  t.same(
    day.entries.map((entry) => entry.ms),
    [HOUR],
  );
});

t.test('at a zero balance: a warning mail, the grace, then the services are stopped (paused), and a top-up starts nothing', async (t) => {
  const h = await hostingApp(t, { initialCreditUsd: 0, hosting: { graceHours: 24 } });
  const { test } = h;
  const database = test.app.svc.container.resolve(Tokens.Database);
  const outbox = new SqlMailOutbox(database, test.config.mail.from);
  const ownerEmail = (await test.call('GET', '/client/whoami')).json().credential.email as string;
  t.equal((await test.call('GET', '/client/credits')).json().balanceMicros, '0');
  const shop = await storedApp(test, 'shop');
  await database.query("UPDATE app_deployments SET status = 'live' WHERE id = $1", [shop.deploymentId]);
  const eventsOf = async (type: string) =>
    (await database.query<{ data: unknown }>('SELECT data FROM events WHERE type = $1 AND organization_id = $2', [type, test.organizationId])).rows.map((row) =>
      typeof row.data === 'string' ? JSON.parse(row.data) : row.data,
    );
  const desired = async () => (await database.query<{ desired: string }>('SELECT desired FROM app_services WHERE id = $1', [shop.serviceId])).rows[0]?.desired;

  h.at('2026-03-02T10:00:00.000Z');
  t.same(await h.billing.enforceBalances(), { warned: [test.organizationId], stopped: [] });
  await test.app.svc.workers.runUntilIdle();
  t.match(await eventsOf('hosting.balance_exhausted'), [{ balanceMicros: '0', runningServices: 1, graceEndsAt: '2026-03-03T10:00:00.000Z' }]);
  const warnings = (await outbox.read({ to: ownerEmail })).filter((mail) => mail.subject.startsWith('Your apps will be stopped'));
  t.equal(warnings.length, 1, 'the owner is mailed once');

  h.at('2026-03-03T09:59:59.999Z');
  t.same(await h.billing.enforceBalances(), { warned: [], stopped: [] }, 'nothing more within the grace');
  t.equal(await desired(), 'running');

  h.at('2026-03-03T10:00:00.000Z');
  t.same(await h.billing.enforceBalances(), { warned: [], stopped: [test.organizationId] });
  t.equal(await desired(), 'stopped', 'the service is paused');
  t.match(await eventsOf('hosting.services_stopped'), [{ balanceMicros: '0', serviceIds: [shop.serviceId] }]);
  const app = (await test.call('GET', `/client/apps/${shop.appId}`)).json();
  t.equal(app.services[0].state, 'stopped');
  await test.app.svc.workers.runUntilIdle();
  t.equal((await outbox.read({ to: ownerEmail })).filter((mail) => / stopped: the credit balance/.test(mail.subject)).length, 1, 'and told');

  t.test('a top-up clears the notice and starts nothing', async (t) => {
    t.equal((await test.call('POST', '/client/credits/topup', { body: { amountUsd: 5 } })).statusCode, 201);
    await h.billing.enforceBalances();
    t.equal(await desired(), 'stopped');
    const notices = await database.query('SELECT 1 FROM app_balance_notices WHERE organization_id = $1', [test.organizationId]);
    t.equal(notices.rowCount, 0);
  });
});

t.test('a restarted host closes the runs its predecessor left open at their last heartbeat, before it restores anything', async (t) => {
  const h = await hostingApp(t);
  const shop = await storedApp(h.test, 'shop');
  const host = h.test.app.svc.container.resolve(AppsTokens.Host);
  const database = h.test.app.svc.container.resolve(Tokens.Database);
  h.at('2026-03-02T10:00:00.000Z');
  await instance(h, 'started', shop, 'shop-1');
  h.at('2026-03-02T10:30:00.000Z');
  await h.meter.heartbeat();
  h.at('2026-03-02T13:00:00.000Z');
  await host.stop();
  await host.start();
  const { rows } = await database.query<{ stopped_at: Date }>('SELECT stopped_at FROM app_instance_runs WHERE instance = $1', ['shop-1']);
  t.same(
    rows.map((row) => row.stopped_at.toISOString()),
    ['2026-03-02T10:30:00.000Z'],
  );
});

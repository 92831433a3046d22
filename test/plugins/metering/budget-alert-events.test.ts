import t from 'tap';
import { randomUUID } from 'node:crypto';
import { runMigrations } from '../../../adapters/sql/migrator.ts';
import { coreMigrations } from '../../../adapters/sql/core-migrations.ts';
import { budgetAlertSubscriber, BudgetAlerts, type BudgetAlert } from '../../../plugins/metering/budget-alerts.ts';
import { meteringMigrations } from '../../../plugins/metering/metering-migrations.ts';
import { databaseBackends } from '../../helpers/databases.ts';
import { jobKit, testClock } from '../../helpers/jobs.ts';

/** Alert-only caps: the alert is a `budget.threshold_reached` event, and the sink is its subscriber. */
for (const backend of databaseBackends()) {
  t.test(backend.name, async (t) => {
    const { db, cleanup } = await backend.create();
    t.teardown(cleanup);
    await runMigrations(db, [...coreMigrations, ...meteringMigrations]);
    const clock = testClock('2026-03-02T10:00:00.000Z');
    const kit = await jobKit(db, { clock });
    const received: BudgetAlert[] = [];
    let failNext = false;
    kit.events.subscribe(
      budgetAlertSubscriber({
        async notify(alert) {
          if (failNext) {
            failNext = false;
            throw new Error('the alert channel is down');
          }
          received.push(alert);
        },
      }),
    );
    const alerts = new BudgetAlerts(db, kit.events);
    const runner = kit.runner();
    const organizationId = randomUUID();
    const scopeId = randomUUID();
    const cap = { limitMicros: 9_007_199_254_740_993n, period: 'day' as const, mode: 'alert' as const };

    t.test('a cap reached records one event, and the sink hears of it after the commit', async (t) => {
      t.equal(await alerts.record({ scope: 'key', scopeId, organizationId, projectId: null, cap, spentMicros: 9_007_199_254_740_995n, now: clock() }), true);
      t.equal(await alerts.record({ scope: 'key', scopeId, organizationId, projectId: null, cap, spentMicros: 9_007_199_254_740_999n, now: clock() }), false, 'once per period');
      t.same(received, [], 'not before the worker runs');
      await runner.runUntilIdle();
      t.same(received, [{ scope: 'key', scopeId, organizationId, projectId: null, cap, spentMicros: 9_007_199_254_740_995n, periodStart: new Date('2026-03-02T00:00:00.000Z') }]);
      const { rows } = await db.query<{ type: string; subject: string }>("SELECT type, subject FROM events WHERE type = 'budget.threshold_reached'");
      t.same(rows, [{ type: 'budget.threshold_reached', subject: scopeId }]);
    });

    t.test('a sink that fails is retried', async (t) => {
      received.length = 0;
      failNext = true;
      clock.advance(24 * 3_600_000);
      t.equal(await alerts.record({ scope: 'key', scopeId, organizationId, projectId: null, cap, spentMicros: 1n, now: clock() }), true, 'the next day alerts again');
      await runner.runUntilIdle();
      t.same(received, [], 'the first delivery failed');
      clock.advance(1_000);
      await runner.runUntilIdle();
      t.equal(received.length, 1, 'the retry delivered it');
      t.same(received[0]?.periodStart, new Date('2026-03-03T00:00:00.000Z'));
    });
  });
}

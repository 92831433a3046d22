import t from 'tap';
import { runMigrations } from '../../../adapters/sql/migrator.ts';
import { coreMigrations } from '../../../adapters/sql/core-migrations.ts';
import { sqlIdentityStores } from '../../../adapters/sql/identity-stores.ts';
import { createOrganizationWithOwner } from '../../../core/identity/identity-admin.ts';
import { eventTypeEntry } from '../../../core/events/event-catalogue.ts';
import { SqlCreditLedger } from '../../../plugins/metering/credit-ledger-store.ts';
import { CREDIT_LOW_MICROS } from '../../../plugins/metering/credit-events.ts';
import { meteringMigrations } from '../../../plugins/metering/metering-migrations.ts';
import { SqlUsageRecorder } from '../../../plugins/metering/usage-recorder.ts';
import { databaseBackends } from '../../helpers/databases.ts';
import { jobKit, testClock } from '../../helpers/jobs.ts';
import { requestLogRow } from '../../helpers/request-log-rows.ts';

/** credit.low and credit.exhausted: written with the charge that crosses the threshold, once per crossing. */
for (const backend of databaseBackends()) {
  t.test(backend.name, async (t) => {
    const { db, cleanup } = await backend.create();
    t.teardown(cleanup);
    await runMigrations(db, [...coreMigrations, ...meteringMigrations]);
    const kit = await jobKit(db, { clock: testClock('2026-03-02T10:00:00.000Z') });
    const recorder = new SqlUsageRecorder(db, kit.events);
    const ledger = new SqlCreditLedger(db);
    const { organization } = await createOrganizationWithOwner(db, sqlIdentityStores, { name: 'Credit events', ownerEmail: 'owner@credit.test', ownerName: 'Owner' });
    const organizationId = organization.id;
    // $5 and 30 µ$: a 20 µ$ call stays above the threshold, the next one crosses it.
    await ledger.ensureAccount(organizationId, CREDIT_LOW_MICROS + 30n);
    const charge = (costMicros: bigint) => recorder.record([requestLogRow({ organizationId, costMicros })]);
    const creditEvents = async () =>
      (await db.query<{ type: string; data: unknown }>("SELECT type, data FROM events WHERE organization_id = $1 AND type LIKE 'credit.%' ORDER BY type", [organizationId])).rows.map(
        (row) => ({ type: row.type, data: (typeof row.data === 'string' ? JSON.parse(row.data) : row.data) as Record<string, unknown> }),
      );

    t.test('a charge that leaves the balance above $5 says nothing', async (t) => {
      await charge(20n);
      t.same(await creditEvents(), []);
    });

    t.test('the charge that takes the balance under $5 emits one credit.low; the next ones under it emit nothing', async (t) => {
      await charge(20n);
      await charge(20n);
      const events = await creditEvents();
      t.same(
        events.map((e) => e.type),
        ['credit.low'],
      );
      t.match(events[0]?.data, { balanceMicros: String(CREDIT_LOW_MICROS - 10n), thresholdMicros: String(CREDIT_LOW_MICROS) });
      t.ok(eventTypeEntry('credit.low').schema.safeParse(events[0]?.data).success, 'the data matches the declared schema');
    });

    t.test('the charge that takes the balance to zero or less emits one credit.exhausted', async (t) => {
      await charge(CREDIT_LOW_MICROS);
      await charge(20n);
      const events = await creditEvents();
      t.same(
        events.map((e) => e.type),
        ['credit.exhausted', 'credit.low'],
        'by type: the test clock stands still',
      );
      t.match(events[0]?.data, { balanceMicros: '-30' });
      t.ok(eventTypeEntry('credit.exhausted').schema.safeParse(events[0]?.data).success, 'the data matches the declared schema');
    });
  });
}

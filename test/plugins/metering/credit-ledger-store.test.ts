import t from 'tap';
import { coreMigrations } from '../../../adapters/sql/core-migrations.ts';
import { sqlIdentityStores } from '../../../adapters/sql/identity-stores.ts';
import { runMigrations } from '../../../adapters/sql/migrator.ts';
import { createOrganizationWithOwner } from '../../../core/identity/identity-admin.ts';
import type { LedgerLine } from '../../../core/ports/metering.ts';
import { SqlCreditLedger } from '../../../plugins/metering/credit-ledger-store.ts';
import { meteringMigrations } from '../../../plugins/metering/metering-migrations.ts';
import { databaseBackends } from '../../helpers/databases.ts';

// East of UTC, where node-postgres's local-midnight Date for a `date` column would read a day early.
process.env.TZ = 'Asia/Tokyo';

// The credit ledger's store, method by method, on one database per backend (each test its own organisation):
// fast enough to judge the store's mutants (mutation/groups.mjs, group ledger-store).

const amounts = (lines: LedgerLine[]) => lines.map((line) => [line.kind, line.amountMicros, line.balanceAfterMicros]);

for (const backend of databaseBackends()) {
  t.test(backend.name, async (t) => {
    const { db, cleanup } = await backend.create();
    t.teardown(cleanup);
    await runMigrations(db, [...coreMigrations, ...meteringMigrations]);
    const ledger = new SqlCreditLedger(db);
    let organizations = 0;
    const newOrganization = async () => {
      organizations += 1;
      const { organization } = await createOrganizationWithOwner(db, sqlIdentityStores, {
        name: `Org ${organizations}`,
        ownerEmail: `owner${organizations}@ledger.test`,
        ownerName: 'Owner',
      });
      return organization.id;
    };
    /** Puts the organisation's lines at the given instants, oldest first, so windows can be tested. */
    const dated = async (org: string, instants: string[]) => {
      const { rows } = await db.query<{ id: string }>('SELECT id::text AS id FROM credit_ledger WHERE organization_id = $1 ORDER BY id', [org]);
      for (const [i, row] of rows.entries()) await db.query('UPDATE credit_ledger SET created_at = $2 WHERE id = $1', [row.id, instants[i]]);
    };

    t.test('ensureAccount opens the balance with its opening credit as one adjustment line', async (t) => {
      const org = await newOrganization();
      t.equal(await ledger.balance(org), null, 'no balance before the account exists');
      await ledger.ensureAccount(org, 5_000_000n);
      t.equal(await ledger.balance(org), 5_000_000n);
      const [line, ...rest] = await ledger.lines(org, { limit: 10 });
      t.same(rest, []);
      t.match(line, {
        organizationId: org,
        kind: 'adjustment',
        amountMicros: 5_000_000n,
        balanceAfterMicros: 5_000_000n,
        note: 'Opening credit',
        reference: 'opening-credit',
        coversUtcDay: null,
        coversEntries: null,
      });
      t.type(line?.createdAt, Date);
    });

    t.test('ensureAccount a second time changes nothing', async (t) => {
      const org = await newOrganization();
      await ledger.ensureAccount(org, 5n);
      await ledger.append(org, { kind: 'ai_usage', amountMicros: -5n });
      await ledger.ensureAccount(org, 5n);
      t.equal(await ledger.balance(org), 0n);
      t.equal((await ledger.lines(org, { limit: 10 })).length, 2);
    });

    t.test('ensureAccount on an account its first line already opened adds no opening credit', async (t) => {
      const org = await newOrganization();
      await ledger.append(org, { kind: 'payment', amountMicros: 40n });
      await ledger.ensureAccount(org, 5_000n);
      t.equal(await ledger.balance(org), 40n);
      t.same(amounts(await ledger.lines(org, { limit: 10 })), [['payment', 40n, 40n]]);
    });

    t.test('ensureAccount without opening credit makes a zero balance and no line', async (t) => {
      const org = await newOrganization();
      await ledger.ensureAccount(org, 0n);
      t.equal(await ledger.balance(org), 0n);
      t.same(await ledger.lines(org, { limit: 10 }), []);
    });

    t.test("an account's first line creates its balance; each line records the balance after it", async (t) => {
      const org = await newOrganization();
      const first = await ledger.append(org, { kind: 'payment', amountMicros: 300n, note: 'Top-up' });
      const second = await ledger.append(org, { kind: 'ai_usage', amountMicros: -120n, coversUtcDay: '2026-03-02', coversEntries: 7 });
      t.match(first, { kind: 'payment', amountMicros: 300n, balanceAfterMicros: 300n, note: 'Top-up', reference: null });
      t.match(second, { kind: 'ai_usage', amountMicros: -120n, balanceAfterMicros: 180n, note: null, coversUtcDay: '2026-03-02', coversEntries: 7 });
      t.equal(await ledger.balance(org), 180n);
      t.ok(BigInt(second!.id) > BigInt(first!.id), 'lines are numbered in order');
      t.equal(second?.coversUtcDay, '2026-03-02', 'the covered day is a date, without a time');
    });

    t.test('a reference is taken once per kind: the repeat is refused and moves nothing', async (t) => {
      const org = await newOrganization();
      t.ok(await ledger.append(org, { kind: 'payment', amountMicros: 50n, reference: 'inv-1' }));
      t.equal(await ledger.append(org, { kind: 'payment', amountMicros: 50n, reference: 'inv-1' }), null);
      t.match(await ledger.append(org, { kind: 'adjustment', amountMicros: 1n, reference: 'inv-1' }), { balanceAfterMicros: 51n }, 'another kind may use it');
      t.equal(await ledger.balance(org), 51n);
      const other = await newOrganization();
      t.match(await ledger.append(other, { kind: 'payment', amountMicros: 9n, reference: 'inv-1' }), { balanceAfterMicros: 9n }, 'another organisation may use it');
    });

    t.test('a line with a reference on an account with no balance yet creates it', async (t) => {
      const org = await newOrganization();
      t.match(await ledger.append(org, { kind: 'payment', amountMicros: 70n, reference: 'first' }), { amountMicros: 70n, balanceAfterMicros: 70n });
      t.equal(await ledger.balance(org), 70n);
    });

    t.test("append inside the caller's transaction commits or rolls back with it", async (t) => {
      const org = await newOrganization();
      await ledger.ensureAccount(org, 0n);
      await t.rejects(
        db.transaction(async (tx) => {
          t.match(await ledger.append(org, { kind: 'payment', amountMicros: 10n }, tx), { balanceAfterMicros: 10n });
          throw new Error('rolled back');
        }),
        /rolled back/,
      );
      t.equal(await ledger.balance(org), 0n);
      await db.transaction((tx) => ledger.append(org, { kind: 'payment', amountMicros: 10n, reference: 'in-tx' }, tx));
      t.equal(await ledger.balance(org), 10n);
    });

    t.test('concurrent appends with references chain balance_after exactly, each reference once', async (t) => {
      const org = await newOrganization();
      await ledger.ensureAccount(org, 0n);
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => ledger.append(org, { kind: 'payment', amountMicros: 10n, reference: `ref-${i % 10}` })));
      t.equal(results.filter((line) => line === null).length, 10, 'each repeated reference refused');
      const lines = (await ledger.lines(org, { limit: 100 })).reverse();
      t.same(
        lines.map((line) => line.balanceAfterMicros),
        lines.map((_, i) => BigInt((i + 1) * 10)),
      );
      t.equal(await ledger.balance(org), 100n);
    });

    t.test('lines: newest first, at most limit, narrowed by kinds, from (inclusive) and to (exclusive)', async (t) => {
      const org = await newOrganization();
      await ledger.append(org, { kind: 'payment', amountMicros: 100n });
      await ledger.append(org, { kind: 'ai_usage', amountMicros: -10n });
      await ledger.append(org, { kind: 'hosting', amountMicros: -20n });
      await ledger.append(org, { kind: 'payment', amountMicros: 5n });
      await dated(org, ['2026-03-01T00:00:00Z', '2026-03-02T00:00:00Z', '2026-03-03T00:00:00Z', '2026-03-04T00:00:00Z']);
      t.same(amounts(await ledger.lines(org, { limit: 10 })), [
        ['payment', 5n, 75n],
        ['hosting', -20n, 70n],
        ['ai_usage', -10n, 90n],
        ['payment', 100n, 100n],
      ]);
      t.same(amounts(await ledger.lines(org, { limit: 2 })), [
        ['payment', 5n, 75n],
        ['hosting', -20n, 70n],
      ]);
      t.same(amounts(await ledger.lines(org, { limit: 10, kinds: ['payment', 'hosting'] })), [
        ['payment', 5n, 75n],
        ['hosting', -20n, 70n],
        ['payment', 100n, 100n],
      ]);
      const from = new Date('2026-03-02T00:00:00Z');
      const to = new Date('2026-03-04T00:00:00Z');
      t.same(amounts(await ledger.lines(org, { limit: 10, from, to })), [
        ['hosting', -20n, 70n],
        ['ai_usage', -10n, 90n],
      ]);
      t.same(await ledger.lines(await newOrganization(), { limit: 10 }), [], "another organisation's lines are not listed");
    });

    t.test('page: the same lines a page at a time, with the same filters', async (t) => {
      const org = await newOrganization();
      for (const amount of [1n, 2n, 3n, 4n, 5n]) await ledger.append(org, { kind: amount === 3n ? 'adjustment' : 'payment', amountMicros: amount });
      await dated(org, ['2026-03-01T00:00:00Z', '2026-03-02T00:00:00Z', '2026-03-03T00:00:00Z', '2026-03-04T00:00:00Z', '2026-03-05T00:00:00Z']);
      const first = await ledger.page(org, {}, { limit: 2 });
      t.same(
        first.items.map((line) => line.amountMicros),
        [5n, 4n],
      );
      t.ok(first.next);
      const second = await ledger.page(org, {}, { limit: 2, cursor: first.next! });
      t.same(
        second.items.map((line) => line.amountMicros),
        [3n, 2n],
      );
      t.same(
        (await ledger.page(org, { kinds: ['payment'] }, { limit: 10 })).items.map((line) => line.amountMicros),
        [5n, 4n, 2n, 1n],
      );
      const window = { from: new Date('2026-03-02T00:00:00Z'), to: new Date('2026-03-04T00:00:00Z') };
      t.same(
        (await ledger.page(org, window, { limit: 10 })).items.map((line) => line.amountMicros),
        [3n, 2n],
      );
      t.same((await ledger.page(await newOrganization(), {}, { limit: 10 })).items, [], "another organisation's lines are not paged");
    });

    t.test('summary sums each kind over the window; opening is the balance before it, closing follows', async (t) => {
      const org = await newOrganization();
      await ledger.append(org, { kind: 'payment', amountMicros: 1_000n });
      await ledger.append(org, { kind: 'payment', amountMicros: 500n });
      await ledger.append(org, { kind: 'adjustment', amountMicros: -30n });
      await ledger.append(org, { kind: 'hosting', amountMicros: -100n });
      await ledger.append(org, { kind: 'hosting_base_fee', amountMicros: -20n });
      await ledger.append(org, { kind: 'ai_usage', amountMicros: -7n });
      await ledger.append(org, { kind: 'ai_usage', amountMicros: -3n });
      await dated(org, [
        '2026-03-01T00:00:00Z',
        '2026-03-02T00:00:00Z',
        '2026-03-02T01:00:00Z',
        '2026-03-02T02:00:00Z',
        '2026-03-02T03:00:00Z',
        '2026-03-02T04:00:00Z',
        '2026-03-03T00:00:00Z',
      ]);
      t.same(await ledger.summary(org, {}), {
        openingMicros: 0n,
        paymentsMicros: 1_500n,
        adjustmentsMicros: -30n,
        hostingMicros: 120n,
        aiMicros: 10n,
        closingMicros: 1_340n,
      });
      t.same(await ledger.summary(org, { from: new Date('2026-03-02T00:00:00Z'), to: new Date('2026-03-03T00:00:00Z') }), {
        openingMicros: 1_000n,
        paymentsMicros: 500n,
        adjustmentsMicros: -30n,
        hostingMicros: 120n,
        aiMicros: 7n,
        closingMicros: 1_343n,
      });
      t.same(
        await ledger.summary(org, { from: new Date('2026-02-01T00:00:00Z') }),
        {
          openingMicros: 0n,
          paymentsMicros: 1_500n,
          adjustmentsMicros: -30n,
          hostingMicros: 120n,
          aiMicros: 10n,
          closingMicros: 1_340n,
        },
        'a window starting before the first line opens at zero',
      );
      t.same(
        await ledger.summary(await newOrganization(), { from: new Date('2026-03-02T00:00:00Z') }),
        {
          openingMicros: 0n,
          paymentsMicros: 0n,
          adjustmentsMicros: 0n,
          hostingMicros: 0n,
          aiMicros: 0n,
          closingMicros: 0n,
        },
        'an account without lines sums to zero',
      );
    });
  });
}

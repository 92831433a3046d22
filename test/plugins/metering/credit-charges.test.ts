import t, { type Test } from 'tap';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { LedgerCharges } from '../../../plugins/metering/credit-charges.ts';
import { creditCounterKey } from '../../../plugins/metering/credit-grants.ts';
import { MeteringTokens } from '../../../plugins/metering/index.ts';
import { buildTestApp } from '../../helpers/app.ts';

/**
 * Charges that are no gateway call (a day of app hosting): the lines and the caller's writes in one
 * transaction, posted once per reference, the opening credit first, and the admission's live credit
 * counter lowered by exactly what was recorded.
 */

const TTL = 60_000;

async function setup(t: Test) {
  // initialCreditUsd: 100 (test/helpers/app.ts); nothing has read the account yet.
  const test = await buildTestApp(t);
  const { container } = test.app.svc;
  const db = container.resolve(Tokens.Database);
  const coordination = container.resolve(Tokens.Coordination);
  const ledger = container.resolve(MeteringTokens.Ledger);
  const charges = new LedgerCharges({ db, ledger, events: container.resolve(Tokens.Events), coordination, counterTtlMs: TTL, initialCreditMicros: 100_000_000n });
  const key = creditCounterKey(test.organizationId);
  const counter = async () => (await coordination.allowances.peek([key]))[0];
  return { test, db, ledger, charges, coordination, key, counter, org: test.organizationId };
}

const day = (reference: string, amountMicros: bigint) => ({ kind: 'hosting' as const, amountMicros, reference, coversUtcDay: '2026-03-02', coversEntries: 2 });

t.test('an account first charged here gets its opening credit before the charge', async (t) => {
  const { charges, ledger, org } = await setup(t);
  const [line] = await charges.charge(org, [day('hosting:2026-03-02', -1_234n)]);
  t.equal(line?.balanceAfterMicros, 100_000_000n - 1_234n);
  t.equal(await ledger.balance(org), 100_000_000n - 1_234n);
});

t.test('the live credit counter is lowered by what was recorded, and a replay lowers it by nothing', async (t) => {
  const { charges, coordination, key, counter, org } = await setup(t);
  await coordination.allowances.seed(key, 100_000_000, TTL);
  const lines = [day('hosting:2026-03-02', -22_499n), { kind: 'hosting_base_fee' as const, amountMicros: -10_000n, reference: 'hosting-base-fee:2026-03-02' }];
  const first = await charges.charge(org, lines);
  t.equal(first.filter((line) => line !== null).length, 2);
  t.equal(await counter(), 100_000_000 - 32_499);
  t.same(await charges.charge(org, lines), [null, null], 'the references were used: nothing is written');
  t.equal(await counter(), 100_000_000 - 32_499, 'nor taken again');
});

t.test("the caller's writes commit with the lines, and a failing one takes the lines back", async (t) => {
  const { charges, db, ledger, org } = await setup(t);
  await db.query('CREATE TABLE charge_marks (reference text PRIMARY KEY)');
  await charges.charge(org, [day('hosting:2026-03-03', -5n)], async (tx) => void (await tx.query("INSERT INTO charge_marks VALUES ('a')")));
  t.equal((await db.query('SELECT 1 FROM charge_marks')).rowCount, 1);
  const before = await ledger.balance(org);
  await t.rejects(charges.charge(org, [day('hosting:2026-03-04', -5n)], async (tx) => void (await tx.query("INSERT INTO charge_marks VALUES ('a')"))));
  t.equal(await ledger.balance(org), before, 'no line of the failed charge');
  t.same(await ledger.lines(org, { kinds: ['hosting'], limit: 10 }).then((lines) => lines.map((line) => line.reference)), ['hosting:2026-03-03']);
});

t.test('a charge that uses the balance up emits credit.exhausted in its transaction', async (t) => {
  const { charges, db, org } = await setup(t);
  const [line] = await charges.charge(org, [day('hosting:2026-03-05', -100_000_001n)]);
  const { rows } = await db.query<{ data: unknown }>("SELECT data FROM events WHERE type = 'credit.exhausted' AND organization_id = $1", [org]);
  const data = rows.map((row) => (typeof row.data === 'string' ? JSON.parse(row.data) : row.data));
  t.same(data, [{ balanceMicros: '-1', ledgerLineId: line?.id }]);
});

t.test('a charge never adds credit', async (t) => {
  const { charges, org } = await setup(t);
  await t.rejects(charges.charge(org, [day('hosting:2026-03-06', 5n)]), /a charge takes credit/);
});

import t from 'tap';
import { createMemoryCoordination } from '../../../adapters/memory/memory-coordination.ts';
import type { Transaction } from '../../../core/ports/database.ts';
import type { LedgerLine } from '../../../core/ports/metering.ts';
import { CreditGrants, creditCounterKey, type InTransaction } from '../../../plugins/metering/credit-grants.ts';

/** The one way credit is added: the admission counter moves with the ledger line, and only with it. */

const ORG = '0b5d7c7e-2f4e-4d0a-9a51-2f6f1c1f0a11';
const TTL = 60_000;

const line = (amountMicros: bigint): LedgerLine => ({
  id: '1',
  organizationId: ORG,
  kind: 'promotion',
  amountMicros,
  balanceAfterMicros: amountMicros,
  note: null,
  reference: null,
  coversUtcDay: null,
  coversEntries: null,
  createdAt: new Date(),
});

/** Runs `fn` with a stand-in transaction (the grant never touches it; `record` does). */
const transaction: InTransaction = (fn) => fn({} as Transaction);

async function setup(seeded: number | null = 1_000) {
  const coordination = createMemoryCoordination();
  if (seeded !== null) await coordination.allowances.seed(creditCounterKey(ORG), seeded, TTL);
  const counter = async () => (await coordination.allowances.peek([creditCounterKey(ORG)]))[0];
  return { grants: new CreditGrants({ coordination, counterTtlMs: TTL }), counter };
}

t.test('a grant credits the counter with the line it records', async (t) => {
  const { grants, counter } = await setup();
  const recorded = await grants.grant({ organizationId: ORG, amountMicros: 250n, record: async () => line(250n) }, transaction);
  t.equal(recorded?.amountMicros, 250n);
  t.equal(await counter(), 1_250);
});

t.test('the counter holds the credit while the line is being recorded, so a re-seed then cannot miss it', async (t) => {
  const { grants, counter } = await setup();
  let during: number | null | undefined;
  await grants.grant(
    {
      organizationId: ORG,
      amountMicros: 40n,
      record: async () => {
        during = await counter();
        return line(40n);
      },
    },
    transaction,
  );
  t.equal(during, 1_040);
});

t.test('a grant that records nothing (a repeated payment reference) gives the counter its credit back', async (t) => {
  const { grants, counter } = await setup();
  t.equal(await grants.grant({ organizationId: ORG, amountMicros: 250n, record: async () => null }, transaction), null);
  t.equal(await counter(), 1_000);
});

t.test('a grant whose recording fails gives the counter its credit back and fails with the same error', async (t) => {
  const { grants, counter } = await setup();
  const refusal = new Error('refused in the transaction');
  await t.rejects(grants.grant({ organizationId: ORG, amountMicros: 250n, record: () => Promise.reject(refusal) }, transaction), refusal);
  t.equal(await counter(), 1_000);
});

t.test('a line recorded for another amount than asked moves the counter by the line’s amount', async (t) => {
  const { grants, counter } = await setup();
  await grants.grant({ organizationId: ORG, amountMicros: 250n, record: async () => line(200n) }, transaction);
  t.equal(await counter(), 1_200);
});

t.test('an organisation without a live counter keeps none: its next seed reads the ledger', async (t) => {
  const { grants, counter } = await setup(null);
  await grants.grant({ organizationId: ORG, amountMicros: 250n, record: async () => line(250n) }, transaction);
  t.equal(await counter(), null);
});

t.test('a grant of nothing or less is refused before anything moves', async (t) => {
  const { grants, counter } = await setup();
  for (const amount of [0n, -5n]) {
    await t.rejects(grants.grant({ organizationId: ORG, amountMicros: amount, record: async () => line(amount) }, transaction), /adds credit/);
  }
  t.equal(await counter(), 1_000);
});

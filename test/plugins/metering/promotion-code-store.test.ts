import t, { type Test } from 'tap';
import { coreMigrations } from '../../../adapters/sql/core-migrations.ts';
import { sqlIdentityStores } from '../../../adapters/sql/identity-stores.ts';
import { runMigrations } from '../../../adapters/sql/migrator.ts';
import { createOrganizationWithOwner } from '../../../core/identity/identity-admin.ts';
import type { Database } from '../../../core/ports/database.ts';
import { meteringMigrations } from '../../../plugins/metering/metering-migrations.ts';
import { generatePromotionCode, normalisePromotionCode, SqlPromotionCodes } from '../../../plugins/metering/promotion-codes.ts';
import { databaseBackends } from '../../helpers/databases.ts';

/**
 * The promotion codes store on every backend. The races are staged so the second transaction
 * starts while the first holds its claim uncommitted: on PostgreSQL it then waits on the first's
 * locks, on PGlite (one connection) for the first to end; either way it must see the first's outcome.
 */

const NOW = new Date('2026-06-01T12:00:00Z');
const LATER = new Date('2027-01-01T00:00:00Z');

/** A promise and the function that settles it: holds a transaction open until the test says. */
function gate(): { opened: Promise<void>; open(): void } {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open: () => open() };
}

async function storeSuite(t: Test, db: Database) {
  await runMigrations(db, [...coreMigrations, ...meteringMigrations]);
  const codes = new SqlPromotionCodes(db);
  let orgCount = 0;
  const organization = async () => {
    orgCount += 1;
    const made = await createOrganizationWithOwner(db, sqlIdentityStores, { name: `Org ${orgCount}`, ownerEmail: `o${orgCount}@example.com`, ownerName: 'O' });
    return made.organization.id;
  };
  const make = (options: { max?: number | null; expiresAt?: Date } = {}) => {
    const code = generatePromotionCode();
    return codes.create({ code, label: 'Test', amountMicros: 1_000_000n, expiresAt: options.expiresAt ?? LATER, maxRedemptions: options.max ?? null }).then((created) => ({ code, created }));
  };
  const claimIn = (organizationId: string, codeId: string) => db.transaction((tx) => new SqlPromotionCodes(tx).claim(codeId, organizationId, NOW));

  t.test('a code is kept only as its hash and found by its text in any case or grouping', async (t) => {
    const { code, created } = await make();
    const org = await organization();
    const { rows } = await db.query<{ code_hash: string; hint: string }>('SELECT code_hash, hint FROM promotion_codes WHERE id = $1', [created.id]);
    t.notOk(rows[0]!.code_hash.includes(normalisePromotionCode(code)), 'not the code itself');
    t.equal(rows[0]!.hint, normalisePromotionCode(code).slice(-4));
    t.equal((await codes.find(code.toLowerCase().replaceAll('-', ''), org))?.code.id, created.id);
    t.equal(await codes.find(generatePromotionCode(), org), null, 'another code finds nothing');
  });

  t.test('an organisation claims a code once; find then says it redeemed it', async (t) => {
    const { code, created } = await make();
    const org = await organization();
    t.equal(await claimIn(org, created.id), null);
    t.equal(await claimIn(org, created.id), 'already_redeemed');
    t.same(await codes.find(code, org).then((found) => [found?.redeemed, found?.code.redemptions]), [true, 1]);
  });

  t.test('an expired or withdrawn code is refused at claim time', async (t) => {
    const org = await organization();
    const expired = await make({ expiresAt: NOW });
    t.equal(await claimIn(org, expired.created.id), 'expired');
    const withdrawn = await make();
    t.equal((await codes.revoke(withdrawn.created.id, NOW))?.revokedAt?.toISOString(), NOW.toISOString());
    t.equal(await claimIn(org, withdrawn.created.id), 'revoked');
    t.equal((await codes.find(withdrawn.code, org))?.redeemed, false, 'a refused claim leaves no redemption behind');
  });

  t.test('two organisations racing for the last redemption: the second finds none left', async (t) => {
    const { created } = await make({ max: 1 });
    const [first, second] = [await organization(), await organization()];
    const hold = gate();
    const claimed = gate();
    const firstClaim = db.transaction(async (tx) => {
      const outcome = await new SqlPromotionCodes(tx).claim(created.id, first, NOW);
      claimed.open();
      await hold.opened;
      return outcome;
    });
    await claimed.opened;
    const secondClaim = claimIn(second, created.id);
    hold.open();
    t.same(await Promise.all([firstClaim, secondClaim]), [null, 'used_up']);
    t.equal((await codes.list()).find((code) => code.id === created.id)?.redemptions, 1, 'counted once');
  });

  t.test('one organisation claiming twice at once: the second finds it redeemed', async (t) => {
    const { created } = await make();
    const org = await organization();
    const hold = gate();
    const claimed = gate();
    const firstClaim = db.transaction(async (tx) => {
      const outcome = await new SqlPromotionCodes(tx).claim(created.id, org, NOW);
      claimed.open();
      await hold.opened;
      return outcome;
    });
    await claimed.opened;
    const secondClaim = claimIn(org, created.id);
    hold.open();
    t.same(await Promise.all([firstClaim, secondClaim]), [null, 'already_redeemed']);
  });

  t.test('a claim rolled back (its redemption failed later) leaves the redemption to the next one', async (t) => {
    const { created } = await make({ max: 1 });
    const [first, second] = [await organization(), await organization()];
    const hold = gate();
    const claimed = gate();
    const failing = db.transaction(async (tx) => {
      await new SqlPromotionCodes(tx).claim(created.id, first, NOW);
      claimed.open();
      await hold.opened;
      throw new Error('the ledger refused');
    });
    await claimed.opened;
    const next = claimIn(second, created.id);
    hold.open();
    await t.rejects(failing, /the ledger refused/);
    t.equal(await next, null, 'the other organisation gets it');
    t.equal(await claimIn(first, created.id), 'used_up', 'and the first may not take it again');
  });

  t.test('revoke withdraws once and keeps its first time; list shows every code, newest first', async (t) => {
    const { created } = await make();
    await codes.revoke(created.id, NOW);
    t.equal((await codes.revoke(created.id, LATER))?.revokedAt?.toISOString(), NOW.toISOString());
    t.equal(await codes.revoke('5a0c1e7e-0000-4000-8000-000000000000', NOW), null);
    const listed = await codes.list();
    t.equal(listed[0]?.id, created.id);
    t.ok(listed.length >= 8);
  });
}

for (const backend of databaseBackends()) {
  t.test(backend.name, async (t) => {
    const { db, cleanup } = await backend.create();
    t.teardown(cleanup);
    await storeSuite(t, db);
  });
}

import t, { type Test } from 'tap';
import { randomUUID } from 'node:crypto';
import { coreMigrations } from '../../adapters/sql/core-migrations.ts';
import { SqlLongRunningStore } from '../../adapters/sql/long-running-store.ts';
import { runMigrations } from '../../adapters/sql/migrator.ts';
import type { Database } from '../../core/ports/database.ts';
import type { LongRunningOperation } from '../../core/ports/long-running.ts';
import { databaseBackends } from '../helpers/databases.ts';

const ORG = '0b5d7c7e-2f4e-4d0a-9a51-2f6f1c1f0a11';
const OTHER_ORG = '9e8d7c6b-5a49-4382-9170-6f5e4d3c2b1a';
const PROJECT_A = '4f1c2a8e-7d3b-4e65-9a0c-1b2d3e4f5a6b';
const PROJECT_B = '5d1f0c3a-8e2b-4f7a-9c61-0a2b3c4d5e6f';

function operation(at: string, overrides: Partial<LongRunningOperation> = {}): LongRunningOperation {
  const when = new Date(at);
  return {
    id: randomUUID(),
    organizationId: ORG,
    projectId: null,
    kind: 'tests.work',
    status: 'queued',
    jobId: '1',
    runAt: when,
    startedBy: { kind: 'person', id: randomUUID() },
    result: null,
    error: null,
    createdAt: when,
    updatedAt: when,
    finishedAt: null,
    ...overrides,
  };
}

/** The long-running operations store on every database backend the machine offers. */
async function storeContract(t: Test, db: Database) {
  await runMigrations(db, coreMigrations);
  const store = new SqlLongRunningStore(db);
  const account = operation('2026-03-01T10:00:00.000Z');
  const inA = operation('2026-03-01T11:00:00.000Z', { projectId: PROJECT_A });
  const inB = operation('2026-03-01T12:00:00.000Z', { projectId: PROJECT_B });
  const elsewhere = operation('2026-03-01T13:00:00.000Z', { organizationId: OTHER_ORG });
  for (const op of [account, inA, inB, elsewhere]) await store.insert(db, op);
  const now = new Date('2026-03-01T14:00:00.000Z');
  const filter = (viewer: string, projectIds: string[] | null) => ({ viewer, projectIds, finishedSince: new Date(now.getTime() - 86_400_000) });
  const ids = async (viewer: string, projectIds: string[] | null) => (await store.page(ORG, filter(viewer, projectIds), { limit: 10 })).items.map((op) => op.id);

  t.test('an operation round-trips, and is found only in its organisation', async (t) => {
    t.same(await store.get(ORG, inA.id), inA);
    t.equal(await store.get(OTHER_ORG, inA.id), null);
    t.equal(await store.get(ORG, 'not-a-uuid'), null);
  });

  t.test('a list shows the projects given and the operations of no project, newest first', async (t) => {
    t.same(await ids('person:x', null), [inB.id, inA.id, account.id]);
    t.same(await ids('person:x', [PROJECT_A]), [inA.id, account.id]);
    const first = await store.page(ORG, filter('person:x', null), { limit: 2 });
    t.same(
      first.items.map((op) => op.id),
      [inB.id, inA.id],
    );
    const second = await store.page(ORG, filter('person:x', null), { limit: 2, cursor: first.next! });
    t.same(
      second.items.map((op) => op.id),
      [account.id],
      'the next page goes on where the first stopped',
    );
  });

  t.test('running, then finished once; a finished operation drops off the list after the window', async (t) => {
    t.equal((await store.markRunning(inA.id, now))?.status, 'running');
    t.equal(await store.finish(db, inA.id, { status: 'succeeded', result: { ok: 1 } }, now), true);
    t.equal(await store.finish(db, inA.id, { status: 'failed', error: 'late' }, now), false, 'finished already');
    t.equal(await store.markRunning(inA.id, now), null, 'a finished operation does not run again');
    t.match(await store.get(ORG, inA.id), { status: 'succeeded', result: { ok: 1 }, error: null, finishedAt: now });
    const later = { viewer: 'person:x', projectIds: null, finishedSince: new Date(now.getTime() + 1) };
    t.notOk((await store.page(ORG, later, { limit: 10 })).items.some((op) => op.id === inA.id));
  });

  t.test('only a queued operation is cancelled', async (t) => {
    t.equal(await store.cancelQueued(db, account.id, 'not wanted', now), true);
    t.match(await store.get(ORG, account.id), { status: 'cancelled', error: { message: 'not wanted' } });
    t.equal(await store.cancelQueued(db, account.id, 'again', now), false);
  });

  t.test("hiding is per viewer, within the viewer's projects and organisation", async (t) => {
    t.equal(await store.hide(ORG, filter('person:a', [PROJECT_A]), [inB.id, elsewhere.id], now), 0, 'not on its list');
    t.equal(await store.hide(ORG, filter('person:a', null), [inB.id], now), 1);
    t.equal(await store.hide(ORG, filter('person:a', null), [inB.id], now), 0, 'hidden already');
    t.notOk((await ids('person:a', null)).includes(inB.id));
    t.ok((await ids('person:b', null)).includes(inB.id));
    t.equal(await store.hide(ORG, filter('person:b', null), 'all', now), 3);
    t.same(await ids('person:b', null), []);
  });

  t.test("erasing an organisation's operations keeps the ones named and the other organisations'", async (t) => {
    t.equal(await store.eraseForOrganization(db, ORG, [account.id]), 2);
    t.ok(await store.get(ORG, account.id));
    t.equal(await store.get(ORG, inB.id), null);
    t.ok(await store.get(OTHER_ORG, elsewhere.id));
  });
}

for (const backend of databaseBackends()) {
  t.test(`long-running operations store on ${backend.name}`, async (t) => {
    const { db, cleanup } = await backend.create();
    t.teardown(cleanup);
    await storeContract(t, db);
  });
}

import t, { type Test } from 'tap';
import { SqlCoordinationEpochs } from '../../adapters/sql/coordination-epochs.ts';
import { coreMigrations } from '../../adapters/sql/core-migrations.ts';
import { SqlCreditLedger } from '../../plugins/metering/credit-ledger-store.ts';
import { sqlIdentityStores } from '../../adapters/sql/identity-stores.ts';
import { runMigrations } from '../../adapters/sql/migrator.ts';
import { SqlUsageRecorder } from '../../plugins/metering/usage-recorder.ts';
import { SqlSpendReader } from '../../plugins/metering/spend-reader.ts';
import { addPersonTo, createOrganizationWithOwner } from '../../core/identity/identity-admin.ts';
import type { Database } from '../../core/ports/database.ts';
import { requestLogRow } from '../helpers/request-log-rows.ts';
import type { RequestLogRow } from '../../core/ports/metering.ts';
import type { Page, PageRequest } from '../../core/vocabulary/pagination.ts';
import { meteringMigrations } from '../../plugins/metering/metering-migrations.ts';
import { databaseBackends } from '../helpers/databases.ts';
import { eventually } from '../helpers/eventually.ts';

/** The SQL stores, run against every database backend the machine offers. */
async function storeContract(t: Test, db: Database) {
  await runMigrations(db, [...coreMigrations, ...meteringMigrations]);
  const stores = sqlIdentityStores(db);
  // Spend is read from the request log, metering's table.
  const spend = new SqlSpendReader(db);
  const { organization, project, owner } = await createOrganizationWithOwner(db, sqlIdentityStores, { name: 'Acme', ownerEmail: 'Boss@Acme.test', ownerName: 'Boss' });

  t.test('an organisation starts with a default project and an owner', async (t) => {
    t.equal((await stores.projects.getDefault(organization.id))?.id, project.id);
    t.equal((await stores.memberships.get(organization.id, owner.id))?.role, 'owner');
    t.equal((await stores.people.get(owner.id))?.defaultOrganizationId, organization.id);
  });

  t.test('people are found by email whatever its case, and not created twice', async (t) => {
    t.equal((await stores.people.getByEmail('boss@acme.TEST'))?.id, owner.id);
    const again = await addPersonTo(stores, { organizationId: organization.id, email: 'BOSS@acme.test', name: 'x', role: 'admin' });
    t.equal(again.id, owner.id);
    t.equal((await stores.memberships.get(organization.id, owner.id))?.role, 'admin');
    await stores.memberships.update(organization.id, owner.id, { role: 'owner' });
  });

  t.test('a person changes their own name; an unknown person is null', async (t) => {
    const changed = await stores.people.update(owner.id, { name: 'The Boss' });
    t.match(changed, { id: owner.id, name: 'The Boss', email: 'Boss@Acme.test' });
    t.equal((await stores.people.get(owner.id))?.name, 'The Boss');
    t.equal((await stores.people.update(owner.id, {}))?.name, 'The Boss', 'nothing named, nothing changed');
    t.equal(await stores.people.update('00000000-0000-4000-8000-000000000000', { name: 'x' }), null);
  });

  t.test("erasing an organisation's contents removes its keys, projects and memberships, and the people who belong nowhere else", async (t) => {
    const doomed = await createOrganizationWithOwner(db, sqlIdentityStores, { name: 'Doomed', ownerEmail: 'doomed@acme.test', ownerName: 'Doomed' });
    const shared = await addPersonTo(stores, { organizationId: organization.id, email: 'both@acme.test', name: 'Both', role: 'member' });
    await addPersonTo(stores, { organizationId: doomed.organization.id, email: 'both@acme.test', name: 'Both', role: 'member' });
    await stores.projectMembers.upsert({ projectId: doomed.project.id, personId: shared.id, role: 'viewer' });
    await stores.apiKeys.create({
      organizationId: doomed.organization.id,
      projectId: doomed.project.id,
      name: 'doomed key',
      tokenHash: `hash-${Math.random()}`,
      hint: 'x',
      scopes: ['inference'],
      modelAllowList: null,
      expiresAt: null,
      spendCap: null,
      createdByPersonId: doomed.owner.id,
      createdByKeyId: null,
    });
    const erased = await db.transaction((tx) => sqlIdentityStores(tx).organizations.eraseContents(doomed.organization.id));
    t.same(erased, { keys: 1, projects: 1, memberships: 2, people: 1 });
    t.equal(await stores.people.get(doomed.owner.id), null, 'its owner belonged nowhere else');
    t.ok(await stores.people.get(shared.id), 'a person of another organisation stays');
    t.same(
      (await stores.memberships.listForPerson(shared.id)).map((m) => m.organizationId),
      [organization.id],
    );
    t.same(await stores.projects.list(doomed.organization.id), []);
    t.same(await stores.apiKeys.list(doomed.organization.id), []);
    t.ok(await stores.organizations.get(doomed.organization.id), 'the row stays for the records that name it');
    t.ok(await stores.projects.get(organization.id, project.id), "another organisation's project is untouched");
  });

  t.test('project names are unique per organisation, ignoring case', async (t) => {
    await stores.projects.create({ organizationId: organization.id, name: 'Research' });
    await t.rejects(stores.projects.create({ organizationId: organization.id, name: 'research' }));
  });

  t.test('project members are upserted, listed and removed', async (t) => {
    const dev = await addPersonTo(stores, { organizationId: organization.id, email: 'dev@acme.test', name: 'Dev', role: 'member' });
    await stores.projectMembers.upsert({ projectId: project.id, personId: dev.id, role: 'viewer' });
    await stores.projectMembers.upsert({ projectId: project.id, personId: dev.id, role: 'developer' });
    t.same(
      (await stores.projectMembers.list(project.id)).map((m) => [m.email, m.role]),
      [['dev@acme.test', 'developer']],
    );
    t.equal(await stores.projectMembers.remove(project.id, dev.id), true);
    t.equal(await stores.projectMembers.remove(project.id, dev.id), false);
  });

  t.test('a key round-trips every field, caps as exact bigints', async (t) => {
    const tokenHash = `hash-${Math.random()}`;
    const key = await stores.apiKeys.create({
      organizationId: organization.id,
      projectId: project.id,
      name: 'k',
      tokenHash,
      hint: 'svc_live_…abcd',
      scopes: ['inference', 'usage:read'],
      modelAllowList: ['a', 'b'],
      expiresAt: new Date('2030-01-01T00:00:00Z'),
      spendCap: { limitMicros: 9_007_199_254_740_993n, period: 'week', mode: 'alert' },
      rateLimits: { requestsPerMinute: 10, tokensPerMinute: null, concurrency: 2 },
      createdByPersonId: owner.id,
      createdByKeyId: null,
    });
    const read = await stores.apiKeys.get(organization.id, key.id);
    t.same(read?.spendCap, { limitMicros: 9_007_199_254_740_993n, period: 'week', mode: 'alert' });
    t.same(read?.rateLimits, { requestsPerMinute: 10, tokensPerMinute: null, concurrency: 2 });
    t.same(read?.modelAllowList, ['a', 'b']);
    const updated = await stores.apiKeys.update(organization.id, key.id, { spendCap: null, modelAllowList: null, disabled: true });
    t.equal(updated?.spendCap, null);
    t.equal(updated?.modelAllowList, null);
    t.equal(updated?.disabled, true);
    t.same(updated?.scopes, ['inference', 'usage:read'], 'fields not sent are kept');
    const auth = await stores.credentials.findKeyByTokenHash(tokenHash);
    t.equal(auth?.key.id, key.id);
    t.equal(auth?.organizationStatus, 'active');
    t.equal(await stores.apiKeys.delete(organization.id, key.id), true);
    t.equal(await stores.apiKeys.get(organization.id, key.id), null);
  });

  t.test('replaceSecret gives a key a new secret and keeps its row; the old secret is found with the end of its overlap, or not at all', async (t) => {
    const first = `first-${Math.random()}`;
    const key = await stores.apiKeys.create({
      organizationId: organization.id,
      projectId: project.id,
      name: 'rotating',
      tokenHash: first,
      hint: 'svc_live_…1111',
      scopes: ['inference'],
      modelAllowList: null,
      expiresAt: null,
      spendCap: null,
      createdByPersonId: owner.id,
      createdByKeyId: null,
    });
    const now = new Date('2026-06-01T12:00:00Z');
    const until = new Date('2026-06-01T12:10:00Z');
    const second = `second-${Math.random()}`;
    const replaced = await db.transaction((tx) =>
      sqlIdentityStores(tx).apiKeys.replaceSecret(organization.id, key.id, { tokenHash: second, hint: 'svc_live_…2222', retiredUntil: until, now }),
    );
    t.same([replaced?.id, replaced?.hint, replaced?.name], [key.id, 'svc_live_…2222', 'rotating']);
    t.same((await stores.credentials.findKeyByTokenHash(second))?.secretExpiresAt, null, 'the current secret has no end');
    const old = await stores.credentials.findKeyByTokenHash(first);
    t.same([old?.key.id, old?.secretExpiresAt?.toISOString()], [key.id, until.toISOString()], 'the replaced one ends with its overlap');
    t.equal((await stores.credentials.findKeyById(key.id))?.secretExpiresAt, null, 'a lookup by id names no secret');

    const third = `third-${Math.random()}`;
    await db.transaction((tx) => sqlIdentityStores(tx).apiKeys.replaceSecret(organization.id, key.id, { tokenHash: third, hint: 'h3', retiredUntil: null, now }));
    t.equal(await stores.credentials.findKeyByTokenHash(second), null, 'no overlap: the replaced secret is gone');
    t.equal(await stores.credentials.findKeyByTokenHash(first), null, 'and an older one no longer outlives it');
    t.equal((await stores.credentials.findKeyByTokenHash(third))?.key.id, key.id);
    t.equal(await stores.apiKeys.replaceSecret(organization.id, '5a0c1e7e-0000-4000-8000-000000000000', { tokenHash: 'x', hint: 'x', retiredUntil: null, now }), null);
  });

  t.test('keys are invisible across organisations', async (t) => {
    const other = await createOrganizationWithOwner(db, sqlIdentityStores, { name: 'Other', ownerEmail: 'o@other.test', ownerName: 'O' });
    const key = await stores.apiKeys.create({
      organizationId: other.organization.id,
      projectId: other.project.id,
      name: 'theirs',
      tokenHash: `h-${Math.random()}`,
      hint: 'h',
      scopes: ['inference'],
      modelAllowList: null,
      expiresAt: null,
      spendCap: null,
      createdByPersonId: null,
      createdByKeyId: null,
    });
    t.equal(await stores.apiKeys.get(organization.id, key.id), null);
    t.equal(await stores.apiKeys.revoke(organization.id, key.id), null);
    t.equal(await stores.apiKeys.delete(organization.id, key.id), false);
  });

  t.test('keys made by keys: the lookup reads the chain of makers, revoking revokes the keys made, spend counts theirs', async (t) => {
    const make = (name: string, createdByKeyId: string | null) =>
      stores.apiKeys.create({
        organizationId: organization.id,
        projectId: project.id,
        name,
        tokenHash: `${name}-${Math.random()}`,
        hint: 'h',
        scopes: ['inference'],
        modelAllowList: null,
        expiresAt: null,
        spendCap: null,
        createdByPersonId: createdByKeyId ? null : owner.id,
        createdByKeyId,
      });
    const root = await make('root', null);
    const child = await make('child', root.id);
    const grandchild = await make('grandchild', child.id);
    const { rows } = await db.query<{ token_hash: string }>('SELECT token_hash FROM api_keys WHERE id = $1', [grandchild.id]);
    const auth = await stores.credentials.findKeyByTokenHash(rows[0]!.token_hash);
    t.same(
      auth?.ancestors.map((maker) => maker.id),
      [child.id, root.id],
      'nearest maker first',
    );
    await db.query(
      `INSERT INTO request_logs (id, organization_id, project_id, key_id, endpoint, status_code, cost_micros) VALUES
      ('req_a', $1, $2, $3, '/v1/chat/completions', 200, 5), ('req_b', $1, $2, $4, '/v1/chat/completions', 200, 7)`,
      [organization.id, project.id, root.id, grandchild.id],
    );
    t.equal((await spend.forKey(root.id, new Date())).totalMicros, 12n, "a key's spend counts what the keys it made spent");
    t.equal((await spend.forKey(child.id, new Date())).totalMicros, 7n);
    const paused = await stores.apiKeys.update(organization.id, child.id, { disabled: true, disabledBy: { kind: 'key', id: root.id } });
    t.same(paused?.disabledBy, { kind: 'key', id: root.id }, 'a pause records who paused');
    const resumed = await stores.apiKeys.update(organization.id, child.id, { disabled: false });
    t.equal(resumed?.disabledBy, null, 'resuming clears it');
    t.ok(await stores.apiKeys.revoke(organization.id, root.id));
    for (const key of [child, grandchild]) t.ok((await stores.apiKeys.get(organization.id, key.id))?.revokedAt, `${key.name} is revoked with its maker`);
  });

  /** Follows a store's pages to the end, `limit` at a time. */
  async function allPages<T>(page: (request: PageRequest) => Promise<Page<T>>, limit: number): Promise<{ items: T[]; pages: number }> {
    const items: T[] = [];
    let request: PageRequest = { limit };
    for (let pages = 1; ; pages++) {
      const result = await page(request);
      items.push(...result.items);
      if (!result.next) return { items, pages };
      request = { limit, cursor: result.next };
    }
  }

  t.test('key pages run newest first, a tie at the same microsecond broken by the higher uuid', async (t) => {
    const other = await stores.projects.create({ organizationId: organization.id, name: 'Paged' });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const key = await stores.apiKeys.create({
        organizationId: organization.id,
        projectId: other.id,
        name: `paged ${i}`,
        tokenHash: `paged-${i}-${Math.random()}`,
        hint: 'x',
        scopes: ['inference'],
        modelAllowList: null,
        expiresAt: null,
        spendCap: null,
        createdByPersonId: null,
        createdByKeyId: null,
      });
      ids.push(key.id);
    }
    // Keys 0-1 and 2-3 share an instant; key 4 is the newest. Microseconds must survive the cursor.
    const instants = ['2026-01-01T00:00:00.000001Z', '2026-01-01T00:00:00.000001Z', '2026-01-01T00:00:00.000002Z', '2026-01-01T00:00:00.000002Z', '2026-01-01T00:00:00.000003Z'];
    for (const [i, id] of ids.entries()) await db.query('UPDATE api_keys SET created_at = $2::timestamptz WHERE id = $1', [id, instants[i]]);
    const desc = (a: string, b: string) => (a < b ? 1 : -1);
    const expected = [ids[4], ...[ids[2]!, ids[3]!].sort(desc), ...[ids[0]!, ids[1]!].sort(desc)];
    const paged = await allPages((page) => stores.apiKeys.page(organization.id, { projectId: other.id, projectIds: null }, page), 2);
    t.same(
      paged.items.map((key) => key.id),
      expected,
    );
    t.equal(paged.pages, 3);
    const narrowed = await stores.apiKeys.page(organization.id, { projectIds: [project.id] }, { limit: 10 });
    t.notOk(
      narrowed.items.some((key) => key.projectId === other.id),
      'projectIds narrows the rows in the query',
    );
  });

  t.test('ledger pages run newest first by row number, with filters', async (t) => {
    const ledger = new SqlCreditLedger(db);
    await ledger.ensureAccount(organization.id, 0n);
    for (let i = 0; i < 5; i++) await ledger.append(organization.id, { kind: 'payment', amountMicros: 1n, reference: `paged-${i}` });
    await db.query("UPDATE credit_ledger SET created_at = '2026-01-01T00:00:00.000001Z' WHERE organization_id = $1", [organization.id]);
    const all = await ledger.lines(organization.id, { kinds: ['payment'], limit: 100 });
    const paged = await allPages((page) => ledger.page(organization.id, { kinds: ['payment'] }, page), 2);
    t.same(
      paged.items.map((line) => line.id),
      all.map((line) => line.id),
    );
    t.same(
      paged.items.map((line) => BigInt(line.id)),
      paged.items.map((line) => BigInt(line.id)).sort((a, b) => (a < b ? 1 : -1)),
      'the row number breaks the tie',
    );
  });

  t.test("a person's projects are the ones they have a role on, in their organisation only", async (t) => {
    const dev = await addPersonTo(stores, { organizationId: organization.id, email: 'projects-of@acme.test', name: 'Dev', role: 'member' });
    const research = await stores.projects.create({ organizationId: organization.id, name: 'Projects of' });
    await stores.projectMembers.upsert({ projectId: research.id, personId: dev.id, role: 'viewer' });
    t.same(await stores.projectMembers.projectIdsOf(organization.id, dev.id), [research.id]);
  });

  t.test("an organisation's members page newest first with their email and name, a tie broken by the higher person id", async (t) => {
    const { organization: team, owner: founder } = await createOrganizationWithOwner(db, sqlIdentityStores, { name: 'Paged team', ownerEmail: 'founder@paged.test', ownerName: 'Founder' });
    const joined: string[] = [];
    for (let i = 0; i < 4; i++) joined.push((await addPersonTo(stores, { organizationId: team.id, email: `member-${i}@paged.test`, name: `Member ${i}`, role: 'member' })).id);
    const instants = ['2026-01-01T00:00:00.000001Z', '2026-01-01T00:00:00.000002Z', '2026-01-01T00:00:00.000002Z', '2026-01-01T00:00:00.000003Z'];
    for (const [i, id] of joined.entries()) await db.query('UPDATE memberships SET created_at = $3::timestamptz WHERE organization_id = $1 AND person_id = $2', [team.id, id, instants[i]]);
    await db.query("UPDATE memberships SET created_at = '2025-01-01T00:00:00Z' WHERE organization_id = $1 AND person_id = $2", [team.id, founder.id]);
    const desc = (a: string, b: string) => (a < b ? 1 : -1);
    const paged = await allPages((page) => stores.memberships.pageForOrganization(team.id, page), 2);
    t.same(
      paged.items.map((m) => m.personId),
      [joined[3], ...[joined[1]!, joined[2]!].sort(desc), joined[0], founder.id],
    );
    t.match(paged.items.at(-1), { email: 'founder@paged.test', name: 'Founder', role: 'owner', status: 'active', organizationId: team.id, organizationName: 'Paged team' });
    t.notOk(
      paged.items.some((m) => m.personId === owner.id),
      'only this organisation’s people',
    );
  });

  t.test('removing a membership removes only it, stops it being the default organisation, and answers what it removed', async (t) => {
    const { organization: first } = await createOrganizationWithOwner(db, sqlIdentityStores, { name: 'First of two', ownerEmail: 'first-owner@two.test', ownerName: 'O' });
    const { organization: second } = await createOrganizationWithOwner(db, sqlIdentityStores, { name: 'Second of two', ownerEmail: 'second-owner@two.test', ownerName: 'O' });
    const person = await addPersonTo(stores, { organizationId: first.id, email: 'in-two@two.test', name: 'Two', role: 'admin' });
    await addPersonTo(stores, { organizationId: second.id, email: 'in-two@two.test', name: 'Two', role: 'member' });
    t.equal((await stores.people.get(person.id))?.defaultOrganizationId, first.id);
    t.match(await stores.memberships.remove(first.id, person.id), { organizationId: first.id, personId: person.id, role: 'admin' });
    t.equal(await stores.memberships.get(first.id, person.id), null);
    t.match(await stores.memberships.get(second.id, person.id), { role: 'member' });
    t.equal((await stores.people.get(person.id))?.defaultOrganizationId, null, 'the removed organisation is no longer the default');
    t.equal(await stores.memberships.remove(first.id, person.id), null, 'removing again removes nothing');
    await stores.memberships.remove(second.id, person.id);
    t.ok(await stores.people.get(person.id), 'the person stays');
  });

  t.test("removing a person's project roles in one organisation leaves their roles in another", async (t) => {
    const { organization: here, project: herePro } = await createOrganizationWithOwner(db, sqlIdentityStores, { name: 'Roles here', ownerEmail: 'o@here.test', ownerName: 'O' });
    const { organization: there, project: therePro } = await createOrganizationWithOwner(db, sqlIdentityStores, { name: 'Roles there', ownerEmail: 'o@there.test', ownerName: 'O' });
    const person = await addPersonTo(stores, { organizationId: here.id, email: 'roles@both.test', name: 'Roles', role: 'member' });
    await addPersonTo(stores, { organizationId: there.id, email: 'roles@both.test', name: 'Roles', role: 'member' });
    const extra = await stores.projects.create({ organizationId: here.id, name: 'Extra' });
    await stores.projectMembers.upsert({ projectId: herePro.id, personId: person.id, role: 'developer' });
    await stores.projectMembers.upsert({ projectId: extra.id, personId: person.id, role: 'viewer' });
    await stores.projectMembers.upsert({ projectId: therePro.id, personId: person.id, role: 'admin' });
    const removed = await stores.projectMembers.removeAllInOrganization(here.id, person.id);
    t.same(
      removed.map((r) => [r.projectId, r.role, r.email]).sort(),
      [
        [herePro.id, 'developer', 'roles@both.test'],
        [extra.id, 'viewer', 'roles@both.test'],
      ].sort(),
    );
    t.same(await stores.projectMembers.projectIdsOf(here.id, person.id), []);
    t.same(await stores.projectMembers.projectIdsOf(there.id, person.id), [therePro.id]);
    t.same(await stores.projectMembers.removeAllInOrganization(here.id, person.id), [], 'nothing left to remove');
  });

  t.test('people are renamed; a patch without a name keeps it; an unknown person is null', async (t) => {
    const person = await stores.people.create({ email: 'rename@acme.test', name: 'Before' });
    t.match(await stores.people.update(person.id, { name: 'After' }), { id: person.id, name: 'After', email: 'rename@acme.test' });
    t.match(await stores.people.update(person.id, {}), { name: 'After' });
    t.equal(await stores.people.update('00000000-0000-4000-8000-000000000000', { name: 'Nobody' }), null);
  });

  t.test('lockOwners lists the active owners, and a second transaction waits for the first and sees its change', async (t) => {
    const { organization: team, owner: first } = await createOrganizationWithOwner(db, sqlIdentityStores, { name: 'Owners', ownerEmail: 'first@owners.test', ownerName: 'First' });
    const second = await addPersonTo(stores, { organizationId: team.id, email: 'second@owners.test', name: 'Second', role: 'owner' });
    const suspended = await addPersonTo(stores, { organizationId: team.id, email: 'third@owners.test', name: 'Third', role: 'owner' });
    await stores.memberships.update(team.id, suspended.id, { status: 'suspended' });
    await addPersonTo(stores, { organizationId: team.id, email: 'admin@owners.test', name: 'Admin', role: 'admin' });
    t.same((await stores.memberships.lockOwners(team.id)).sort(), [first.id, second.id].sort());
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let locked!: () => void;
    const lockTaken = new Promise<void>((resolve) => (locked = resolve));
    const demoting = db.transaction(async (tx) => {
      const owners = sqlIdentityStores(tx);
      await owners.memberships.lockOwners(team.id);
      locked();
      await held;
      await owners.memberships.update(team.id, second.id, { role: 'admin' });
    });
    await lockTaken;
    let seen: string[] | null = null;
    const waiting = db.transaction(async (tx) => {
      seen = await sqlIdentityStores(tx).memberships.lockOwners(team.id);
    });
    // On PostgreSQL the second transaction is seen waiting for the row lock; PGlite's one session runs them in turn.
    if (db.kind === 'postgres') {
      const waitingOnLock = "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE%'";
      await eventually(async () => (await db.query<{ n: number }>(waitingOnLock)).rows[0]!.n > 0, 'the second transaction waits for the owners’ rows');
    }
    t.equal(seen, null, 'not read while the first transaction holds the rows');
    release();
    await demoting;
    await waiting;
    t.same(seen, [first.id], 'the waiting transaction reads the owners as the first left them');
  });

  t.test('the ledger chains balance_after exactly under concurrent appends', async (t) => {
    const ledger = new SqlCreditLedger(db);
    await ledger.ensureAccount(organization.id, 1_000_000n);
    await ledger.ensureAccount(organization.id, 1_000_000n);
    await Promise.all(Array.from({ length: 40 }, (_, i) => ledger.append(organization.id, { kind: i % 2 ? 'payment' : 'adjustment', amountMicros: BigInt(i * 1000 - 7000) })));
    const { rows } = await db.query<{ amount_micros: bigint; balance_after_micros: bigint }>(
      'SELECT amount_micros, balance_after_micros FROM credit_ledger WHERE organization_id = $1 ORDER BY id',
      [organization.id],
    );
    let running = 0n;
    for (const row of rows) {
      running += row.amount_micros;
      t.equal(row.balance_after_micros, running);
    }
    t.equal(await ledger.balance(organization.id), running);
    const summary = await ledger.summary(organization.id, {});
    t.equal(summary.closingMicros, running);
  });

  t.test('a reference is charged once', async (t) => {
    const ledger = new SqlCreditLedger(db);
    t.ok(await ledger.append(organization.id, { kind: 'payment', amountMicros: 5n, reference: 'inv-1' }));
    t.equal(await ledger.append(organization.id, { kind: 'payment', amountMicros: 5n, reference: 'inv-1' }), null);
  });

  t.test('recording usage stores rows once and charges exactly them', async (t) => {
    const ledger = new SqlCreditLedger(db);
    const before = (await ledger.balance(organization.id)) ?? 0n;
    const row = (id: string, cost: bigint): RequestLogRow =>
      requestLogRow({ id, organizationId: organization.id, projectId: project.id, costMicros: cost, bodies: id === 'r1' ? { request: { text: 'a\u0000b' }, response: null } : null });
    const recorder = new SqlUsageRecorder(db);
    t.equal(await recorder.record([row('r1', 100n), row('r2', 250n)]), 2);
    t.equal(await recorder.record([row('r2', 250n), row('r3', 1n)]), 1, 'a retried row is not stored or charged again');
    t.equal(await ledger.balance(organization.id), before - 351n);
    const stored = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM request_log_bodies WHERE request_id = 'r1'");
    t.equal(stored.rows[0]?.n, 1, 'a NUL character in a body does not stop the write');
  });

  t.test('recent calls of a key, project or account are the rows created since a moment, with their tokens', async (t) => {
    const keyId = '00000000-0000-4000-8000-0000000000a1';
    const at = (id: string, createdAt: string, tokens: number) =>
      requestLogRow({ id, organizationId: organization.id, projectId: project.id, keyId, createdAt: new Date(createdAt), inputTokens: tokens, outputTokens: 1, costMicros: 0n });
    await new SqlUsageRecorder(db).record([at('recent-old', '2026-01-01T00:00:00Z', 100), at('recent-1', '2026-01-01T00:01:00Z', 10), at('recent-2', '2026-01-01T00:01:30Z', 20)]);
    const since = new Date('2026-01-01T00:01:00Z');
    t.same(await spend.recentCalls('key', keyId, since), { requests: 2, tokens: 32 }, 'the older row is left out');
    // Other tests' rows in this project are newer still: the difference between two moments isolates these.
    const between = async (scope: 'project' | 'account', id: string, from: string, to: string) => {
      const [early, late] = [await spend.recentCalls(scope, id, new Date(from)), await spend.recentCalls(scope, id, new Date(to))];
      return { requests: early.requests - late.requests, tokens: early.tokens - late.tokens };
    };
    t.same(await between('project', project.id, '2026-01-01T00:01:00Z', '2026-01-01T00:02:00Z'), { requests: 2, tokens: 32 });
    t.same(await between('account', organization.id, '2026-01-01T00:01:01Z', '2026-01-01T00:02:00Z'), { requests: 1, tokens: 21 });
  });

  t.test('a coordination epoch: the first recorded wins, and only an established one is replaced after a loss', async (t) => {
    const [a, b] = [new SqlCoordinationEpochs(db, 'svc:'), new SqlCoordinationEpochs(db, 'svc:')];
    t.equal(await a.read(), null, 'a new store: nothing recorded');
    await Promise.all([a.begin('first-a'), b.begin('first-b')]);
    const first = await a.read();
    t.match(first, { established: false, afterLoss: false }, 'one of two replicas starting together recorded its epoch');
    await b.replace(first!.epoch, 'too-early');
    t.same(await a.read(), first, 'an epoch never established cannot have lost anything: it is not replaced');
    await a.establish(first!.epoch);
    await Promise.all([a.replace(first!.epoch, 'after-a'), b.replace(first!.epoch, 'after-b')]);
    t.match(await b.read(), { established: false, afterLoss: true }, 'one replacement after the loss wins');
    t.equal(await new SqlCoordinationEpochs(db, 'other:').read(), null, 'each key prefix is its own store');
    await a.heartbeat('replica-a');
    await b.heartbeat('replica-b');
    t.same((await a.liveReplicas(60_000)).sort(), ['replica-a', 'replica-b']);
    await b.forget('replica-b');
    t.same(await a.liveReplicas(60_000), ['replica-a'], 'a replica that closed is no longer waited for');
  });

  t.test('stored bodies replace NUL characters and keep text that only spells an escape', async (t) => {
    const bodies = { request: { nul: 'a\u0000b', spelled: 'path C:\\u0000\\x', slashes: '\\' }, response: null };
    const row = requestLogRow({ id: 'bodies-1', organizationId: organization.id, projectId: project.id, costMicros: 0n, bodies });
    await new SqlUsageRecorder(db).record([row]);
    const stored = await db.query<{ body: Record<string, string> }>("SELECT request_body AS body FROM request_log_bodies WHERE request_id = 'bodies-1'");
    t.same(stored.rows[0]?.body, { nul: 'a\ufffdb', spelled: 'path C:\\u0000\\x', slashes: '\\' });
  });

  t.test('stored bodies replace lone surrogates, which jsonb refuses, and keep paired ones', async (t) => {
    const bodies = { request: { high: 'a\ud800b', low: '\udfff', pair: 'emoji \ud83d\ude00', spelled: 'C:\\ud800' }, response: null };
    const row = requestLogRow({ id: 'bodies-2', organizationId: organization.id, projectId: project.id, costMicros: 1n, bodies });
    t.equal(await new SqlUsageRecorder(db).record([row]), 1, 'the batch is written');
    const stored = await db.query<{ body: Record<string, string> }>("SELECT request_body AS body FROM request_log_bodies WHERE request_id = 'bodies-2'");
    t.same(stored.rows[0]?.body, { high: 'a\ufffdb', low: '\ufffd', pair: 'emoji \ud83d\ude00', spelled: 'C:\\ud800' });
  });
}

for (const backend of databaseBackends()) {
  t.test(`SQL stores on ${backend.name}`, async (t) => {
    const { db, cleanup } = await backend.create();
    t.teardown(cleanup);
    await storeContract(t, db);
  });
}

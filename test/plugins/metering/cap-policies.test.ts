import t from 'tap';
import { CapPolicies } from '../../../plugins/metering/cap-policies.ts';
import type { IdentityStores } from '../../../core/ports/identity.ts';
import { deferred } from '../../helpers/jobs.ts';

/**
 * Identity stores that answer from memory and count the reads CapPolicies makes. Each read waits
 * for `gate` (open by default), so a test can keep reads in flight until it opens it.
 */
function countingStores() {
  const reads = { organizations: 0, projects: 0 };
  const control = { gate: Promise.resolve() };
  const stores = {
    organizations: {
      async get() {
        reads.organizations += 1;
        await control.gate;
        return { spendCap: null, requestLogging: true };
      },
    },
    projects: {
      async get() {
        reads.projects += 1;
        await control.gate;
        return { spendCap: null };
      },
    },
  } as unknown as IdentityStores;
  return { reads, stores, control };
}

t.test('calls that find a policy missing at the same moment share one read', async (t) => {
  const { reads, stores, control } = countingStores();
  const policies = new CapPolicies(stores, 1_000);
  // Every call below starts while the first read is still in flight: they must share it.
  const open = deferred();
  control.gate = open.promise;
  const accounts = Promise.all(Array.from({ length: 20 }, () => policies.account('org')));
  const projects = Promise.all(Array.from({ length: 20 }, () => policies.project('org', 'project')));
  open.resolve();
  t.ok((await accounts).every((policy) => policy.requestLogging === true));
  await projects;
  t.equal(reads.organizations, 1);
  t.equal(reads.projects, 1);
});

t.test('an expired policy is read again, and forget() drops an account at once', async (t) => {
  const { reads, stores } = countingStores();
  let now = 0;
  const policies = new CapPolicies(stores, 1_000, () => now);
  await policies.account('org');
  now = 500;
  await policies.account('org');
  t.equal(reads.organizations, 1, 'fresh within the TTL');
  now = 1_500;
  await policies.account('org');
  t.equal(reads.organizations, 2, 'read again once expired');
  policies.forget('org');
  t.equal(policies.accountIfCached('org'), undefined);
  await policies.account('org');
  t.equal(reads.organizations, 3);
});

/** Stores answering from the maps given (a missing entry reads as none), counting reads per id. */
function storesOf(organizations: Record<string, object>, projects: Record<string, object>) {
  const reads: Record<string, number> = {};
  const count = (id: string) => {
    reads[id] = (reads[id] ?? 0) + 1;
  };
  const stores = {
    organizations: {
      async get(id: string) {
        count(id);
        return organizations[id] ?? null;
      },
    },
    projects: {
      async get(_organizationId: string, id: string) {
        count(id);
        return projects[id] ?? null;
      },
    },
  } as unknown as IdentityStores;
  return { stores, reads };
}

const cap = { limitMicros: 5_000_000n, period: 'month', action: 'block' };

t.test('a policy carries the stored cap and logging setting; a missing organisation or project has none', async (t) => {
  const { stores } = storesOf({ org: { spendCap: cap, requestLogging: true } }, { project: { spendCap: cap } });
  const policies = new CapPolicies(stores, 1_000, () => 0);
  t.same(await policies.account('org'), { cap, requestLogging: true });
  t.same(await policies.project('org', 'project'), { cap });
  t.same(await policies.account('gone'), { cap: null, requestLogging: false });
  t.same(await policies.project('org', 'gone'), { cap: null });
  t.same(policies.accountIfCached('org'), { cap, requestLogging: true }, 'cached after the read');
  t.same(policies.projectIfCached('project'), { cap });
});

t.test('a policy expires exactly at its TTL, for accounts and projects alike', async (t) => {
  const { stores, reads } = storesOf({ org: { spendCap: null, requestLogging: false } }, { project: { spendCap: null } });
  let now = 0;
  const policies = new CapPolicies(stores, 1_000, () => now);
  await policies.account('org');
  await policies.project('org', 'project');
  now = 999;
  t.ok(policies.accountIfCached('org'), 'account fresh 1 ms before');
  t.ok(policies.projectIfCached('project'), 'project fresh 1 ms before');
  await policies.project('org', 'project');
  t.equal(reads.project, 1, 'not read again while fresh');
  now = 1_000;
  t.equal(policies.accountIfCached('org'), undefined, 'account expired at the TTL');
  t.equal(policies.projectIfCached('project'), undefined, 'project expired at the TTL');
  await policies.project('org', 'project');
  t.equal(reads.project, 2, 'project read again once expired');
});

t.test('policies of different organisations and projects are kept apart', async (t) => {
  const { stores, reads } = storesOf({ a: { spendCap: cap, requestLogging: true }, b: { spendCap: null, requestLogging: false } }, { p: { spendCap: cap }, q: { spendCap: null } });
  const policies = new CapPolicies(stores, 1_000, () => 0);
  t.same(
    [await policies.account('a'), await policies.account('b')],
    [
      { cap, requestLogging: true },
      { cap: null, requestLogging: false },
    ],
  );
  t.same([await policies.project('a', 'p'), await policies.project('a', 'q')], [{ cap }, { cap: null }]);
  policies.forget('a');
  t.equal(policies.accountIfCached('a'), undefined, 'forgotten');
  t.ok(policies.accountIfCached('b'), 'the other organisation is kept');
  t.ok(policies.projectIfCached('p'), 'projects are kept');
  t.same([reads.a, reads.b, reads.p, reads.q], [1, 1, 1, 1]);
});

t.test('a read that fails is not kept: the next call reads again', async (t) => {
  let fail = true;
  let reads = 0;
  const stores = {
    organizations: {
      async get() {
        reads += 1;
        if (fail) throw new Error('database unavailable');
        return { spendCap: null, requestLogging: true };
      },
    },
  } as unknown as IdentityStores;
  const policies = new CapPolicies(stores, 1_000, () => 0);
  await t.rejects(policies.account('org'), /database unavailable/);
  fail = false;
  t.same(await policies.account('org'), { cap: null, requestLogging: true });
  t.equal(reads, 2);
});

t.test('reads in flight at once for two organisations and two projects are not shared', async (t) => {
  const { stores } = storesOf({ a: { spendCap: cap, requestLogging: true }, b: { spendCap: null, requestLogging: false } }, { p: { spendCap: null }, q: { spendCap: cap } });
  const policies = new CapPolicies(stores, 1_000, () => 0);
  const [a, b, p, q] = await Promise.all([policies.account('a'), policies.account('b'), policies.project('a', 'p'), policies.project('a', 'q')]);
  t.same([a, b, p, q], [{ cap, requestLogging: true }, { cap: null, requestLogging: false }, { cap: null }, { cap }]);
});

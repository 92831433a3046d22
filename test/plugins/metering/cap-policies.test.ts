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

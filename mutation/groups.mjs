// The module groups `npm run mutate` tests, each with the test files that judge it (mutation/MUTATION.md).

/** Module group -> the modules mutated and the test files that judge them. */
export const GROUPS = {
  ssrf: {
    mutate: ['core/net/outbound-url-guard.ts'],
    testFiles: ['test/core/outbound-url-guard.test.ts'],
  },
  csrf: {
    mutate: ['core/http/csrf.ts'],
    testFiles: ['test/core/csrf.test.ts'],
  },
  authorization: {
    mutate: ['core/identity/authorization.ts', 'core/identity/scopes.ts'],
    testFiles: ['test/core/authorization.test.ts'],
  },
  // Money, split by how fast its tests are: pricing and cap policies have unit tests (seconds per mutant).
  money: {
    mutate: ['plugins/metering/cap-policies.ts', 'plugins/metering/pricing.ts'],
    testFiles: ['test/plugins/metering/cap-policies.test.ts', 'test/plugins/metering/pricing.test.ts'],
  },
  // The ledger and the queue, one group per judge so each run fits in an hour on a busy machine: a test
  // file on a database costs seconds per mutant (starting PGlite and migrating it), a unit test far less.
  'ledger-store': {
    mutate: ['plugins/metering/credit-ledger-store.ts'],
    testFiles: ['test/plugins/metering/credit-ledger-store.test.ts'],
  },
  'ledger-journal': {
    mutate: ['plugins/metering/billing-journal.ts'],
    testFiles: ['test/plugins/metering/billing-journal.test.ts'],
  },
  // Two judges: governed-admission-ports.test.ts runs the class over in-memory stand-ins for its ports (no
  // database, about a second per mutant) and checks its arithmetic exactly; governed-admission.test.ts runs
  // it over PGlite's real stores (a few seconds more per mutant, for the mutants it reaches).
  'ledger-admission': {
    mutate: ['plugins/metering/governed-admission.ts'],
    testFiles: ['test/plugins/metering/governed-admission-ports.test.ts', 'test/plugins/metering/governed-admission.test.ts'],
  },
  'queue-definitions': {
    mutate: ['core/jobs/queue-definitions.ts', 'core/jobs/job-registry.ts'],
    testFiles: ['test/core/queue-definitions.test.ts'],
  },
  'queue-store': {
    mutate: ['adapters/sql/job-store.ts', 'core/jobs/job-queue.ts'],
    testFiles: ['test/contracts/job-queue.test.ts'],
  },
  // The runner's unit test (a scripted store, about a second) runs first: a mutant it kills never waits
  // for the contract file's two databases.
  'queue-runner': {
    mutate: ['core/jobs/job-runner.ts'],
    testFiles: ['test/core/job-runner.test.ts', 'test/contracts/job-queue.test.ts'],
  },
  // Loss-tolerant logs (the apps proxy's rows): the bounded queue, the retry, and telling a retried
  // batch that it may already be stored. A unit test over a scripted store, well under a second per mutant.
  'batched-writer': {
    mutate: ['core/kernel/batched-writer.ts'],
    testFiles: ['test/core/batched-writer.test.ts'],
  },
};

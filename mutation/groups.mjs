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
  // Money, split by how fast its tests are: pricing and cap policies have unit tests (seconds per
  // mutant); the ledger, journal and admission are judged by gateway-level tests (minutes per mutant).
  money: {
    mutate: ['plugins/metering/cap-policies.ts', 'plugins/metering/pricing.ts'],
    testFiles: ['test/plugins/metering/cap-policies.test.ts', 'test/plugins/metering/pricing.test.ts'],
  },
  ledger: {
    mutate: ['plugins/metering/credit-ledger-store.ts', 'plugins/metering/billing-journal.ts', 'plugins/metering/governed-admission.ts'],
    testFiles: ['test/plugins/metering/billing-journal.test.ts', 'test/plugins/metering/credits.test.ts', 'test/plugins/metering/admission.test.ts'],
  },
  queue: {
    mutate: ['core/jobs/*.ts', 'adapters/sql/job-store.ts'],
    testFiles: ['test/core/queue-definitions.test.ts', 'test/contracts/job-queue.test.ts'],
  },
};

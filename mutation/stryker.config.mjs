// Mutation testing (`npm run mutate`, not part of `npm test`): see mutation/MUTATION.md.
// One Stryker run per module group, chosen by MUTATE_GROUP (mutation/run.mjs loops over them), so the
// dry run covers only the test files that exercise that group; within a run, coverage analysis "perTest"
// (the tap runner measures it per test file) runs each mutant against only the files that reach it.
import { GROUPS } from './groups.mjs';

const group = GROUPS[process.env.MUTATE_GROUP ?? ''];
if (!group) throw new Error(`Set MUTATE_GROUP to one of: ${Object.keys(GROUPS).join(', ')}`);

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'tap',
  coverageAnalysis: 'perTest',
  mutate: group.mutate,
  tap: {
    testFiles: group.testFiles,
    // The tests are TypeScript run by tsx, as .taprc does for tap itself.
    nodeArgs: ['--import=tsx', '-r', '{{hookFile}}', '{{testFile}}'],
    forceBail: true,
  },
  // The machine is shared: two test processes at most.
  // Stryker rewrites the sandbox's tsconfig with TypeScript's JS API, which TypeScript 7 no longer has;
  // tsx runs the sources without reading it, so point Stryker at a file that does not exist.
  tsconfigFile: 'mutation/no-tsconfig-rewrite.json',
  concurrency: Number(process.env.MUTATE_CONCURRENCY ?? 2),
  timeoutMS: 60_000,
  // Both folders are git-ignored; the sandbox is removed when a run ends.
  tempDirName: '.stryker-tmp',
  ignorePatterns: ['data', 'dist', 'coverage', '.tap', 'reports', 'bench'],
  reporters: ['clear-text', 'progress', 'json'],
  jsonReporter: { fileName: `reports/mutation/${process.env.MUTATE_GROUP}.json` },
  clearTextReporter: { allowColor: false, logTests: false, reportMutants: true, reportScoreTable: true },
  cleanTempDir: 'always',
};

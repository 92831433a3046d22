// `npm run mutate [group ...]`: one Stryker run per module group (all groups when none is named),
// one after another, so each dry run covers only that group's test files. See mutation/MUTATION.md.
import { spawnSync } from 'node:child_process';
import { GROUPS } from './groups.mjs';

const asked = process.argv.slice(2);
const unknown = asked.filter((name) => !(name in GROUPS));
if (unknown.length > 0) {
  console.error(`Unknown group(s): ${unknown.join(', ')}. Groups: ${Object.keys(GROUPS).join(', ')}`);
  process.exit(2);
}
let failed = 0;
for (const group of asked.length > 0 ? asked : Object.keys(GROUPS)) {
  console.log(`\n== mutation testing: ${group} (${GROUPS[group].mutate.join(', ')})`);
  const run = spawnSync('npx', ['stryker', 'run', 'mutation/stryker.config.mjs'], { stdio: 'inherit', env: { ...process.env, MUTATE_GROUP: group } });
  if (run.status !== 0) failed += 1;
}
process.exit(failed === 0 ? 0 : 1);

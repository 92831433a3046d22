import { readdirSync, readFileSync } from 'node:fs';
import t, { type Test } from 'tap';
import { fuzzingApp, SHARDS, shardOf, type ShardedPart } from '../helpers/input-fuzz-app.ts';

/*
 * The input fuzzing is split over files (test/helpers/input-fuzz-app.ts): together they must fuzz every
 * operation of the OpenAPI document and every tool at /mcp exactly once. Each name falls in one shard of
 * its part; here, each shard of each part is run by exactly one file, and no name is fuzzed twice.
 */

const DIRECTORY = new URL('.', import.meta.url);
const RUNS = /fuzzing\.fuzz(Management|Mcp)\(t, (\d+)\)/g;

/** The shards the fuzzing files run, per part, with the files running each. */
function shardsRun(): Record<ShardedPart, Map<number, string[]>> {
  const run: Record<ShardedPart, Map<number, string[]>> = { management: new Map(), mcp: new Map() };
  for (const file of readdirSync(DIRECTORY).filter((name) => /^input-fuzz.*\.test\.ts$/.test(name))) {
    for (const [, part, shard] of readFileSync(new URL(file, DIRECTORY), 'utf8').matchAll(RUNS)) {
      const shards = run[part === 'Mcp' ? 'mcp' : 'management'];
      shards.set(Number(shard), [...(shards.get(Number(shard)) ?? []), file]);
    }
  }
  return run;
}

t.test('each shard of each part is run by exactly one file, and no file runs a shard that is not', async (t) => {
  const run = shardsRun();
  for (const part of Object.keys(SHARDS) as ShardedPart[]) {
    const expected = Array.from({ length: SHARDS[part] }, (_, i) => i + 1);
    t.same(
      [...run[part].keys()].sort((a, b) => a - b),
      expected,
      `${part}: shards 1..${SHARDS[part]} are run`,
    );
    for (const [shard, files] of run[part]) t.equal(files.length, 1, `${part} shard ${shard}: ${files.join(', ')}`);
  }
});

const fuzzing = await fuzzingApp(t);

/** Whether the names of a part fall in the shards once each, none in a shard no file runs. */
function coveredOnce(t: Test, part: ShardedPart, names: string[]): void {
  t.equal(new Set(names).size, names.length, `${part}: ${names.length} names, none twice`);
  const outside = names.filter((name) => !(shardOf(part, name) >= 1 && shardOf(part, name) <= SHARDS[part]));
  t.same(outside, [], `${part}: every name in a shard 1..${SHARDS[part]}`);
  for (let shard = 1; shard <= SHARDS[part]; shard += 1) {
    t.ok(
      names.some((name) => shardOf(part, name) === shard),
      `${part} shard ${shard} is not empty`,
    );
  }
}

t.test('every operation of the OpenAPI document falls in exactly one management shard', async (t) => {
  const names = fuzzing.managementEndpoints().map((endpoint) => endpoint.name);
  t.ok(names.length >= 30, `${names.length} operations`);
  coveredOnce(t, 'management', names);
});

t.test('every tool at /mcp falls in exactly one mcp shard', async (t) => {
  const [owner] = await fuzzing.mcpClients(t);
  const names = owner!.tools.map((tool) => tool.name);
  t.ok(names.length >= 30, `${names.length} tools`);
  coveredOnce(t, 'mcp', names);
});

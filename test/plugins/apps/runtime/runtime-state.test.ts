import { readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { generateKeyEntry } from '../../../../core/services/secret-keys.ts';
import { FileRuntimeState, type ServiceRecord } from '../../../../plugins/apps/runtime/index.ts';
import { sealerOf, stateDir } from './runtime-helpers.ts';

/**
 * The local runtime's state file: env values sealed with the vault's keys, readable without the
 * database, and sealed again under the current key so a rotation strands nothing.
 */
const keyIdOf = (entry: string): string => entry.slice(0, entry.indexOf(':'));
const [keyA, keyB, keyC] = [generateKeyEntry(), generateKeyEntry(), generateKeyEntry()];

function record(serviceId: string, env: Record<string, string>): ServiceRecord {
  return {
    serviceId,
    desired: 'running',
    current: { serviceId, deploymentId: `dep-${serviceId}`, artifactDir: '/nowhere', startCommand: 'node app.js', env },
    groups: [{ deploymentId: `dep-${serviceId}`, pgid: 4242, startTicks: 17 }],
  };
}

const secretEnv = { SVC_API_KEY: 'sk-app-0123456789abcdef', STRIPE_SECRET: 'sk_live_known-value' };

t.test('env values are sealed: the file holds neither SVC_API_KEY nor another value, yet reads back', async (t) => {
  const dir = await stateDir(t);
  await new FileRuntimeState(dir, { sealer: sealerOf([keyA]) }).save(record('svc-a', secretEnv));
  const text = await readFile(path.join(dir, 'runtime-state.json'), 'utf8');
  for (const value of Object.values(secretEnv)) t.notOk(text.includes(value), `${value} is not in the file`);
  t.match(text, /"sealedEnv"/);
  t.equal((await stat(path.join(dir, 'runtime-state.json'))).mode & 0o077, 0, 'owner-only');
  const [loaded] = await new FileRuntimeState(dir, { sealer: sealerOf([keyA]) }).load();
  t.same(loaded, record('svc-a', secretEnv), 'a new reader (a new host) opens it with the same key');
});

t.test('a rotated ring opens the older record, the next write seals it under the new key', async (t) => {
  const dir = await stateDir(t);
  await new FileRuntimeState(dir, { sealer: sealerOf([keyA]) }).save(record('svc-a', secretEnv));

  const rotated = new FileRuntimeState(dir, { sealer: sealerOf([keyB, keyA]) });
  const [loaded] = await rotated.load();
  t.same(loaded!.current!.env, secretEnv, 'opened with the older key on the ring');
  await rotated.save(loaded!);
  const text = await readFile(path.join(dir, 'runtime-state.json'), 'utf8');
  t.match(text, keyIdOf(keyB));
  t.notOk(text.includes(keyIdOf(keyA)), 'nothing under the old key any more');

  const [later] = await new FileRuntimeState(dir, { sealer: sealerOf([keyB]) }).load();
  t.same(later!.current!.env, secretEnv, 'the ring without the old key still opens it');
});

t.test('a record no key on the ring opens is not restarted: a warning names the service', async (t) => {
  const dir = await stateDir(t);
  const writer = new FileRuntimeState(dir, { sealer: sealerOf([keyA]) });
  await writer.save(record('svc-a', secretEnv));
  const warnings: string[] = [];
  const warn = (message: string) => warnings.push(message);
  const records = await new FileRuntimeState(dir, { sealer: sealerOf([keyC]), warn }).load();
  t.equal(records[0]!.current, null, 'nothing to start from it');
  t.same(records[0]!.groups, record('svc-a', {}).groups, 'its orphans are still known, to be killed');
  t.match(warnings, [/service svc-a: its recorded deploy cannot be opened .*not among the configured keys.*deploy it/]);
});

t.test("a sealed env moved to another service's record does not open (the owner is bound into it)", async (t) => {
  const dir = await stateDir(t);
  const writer = new FileRuntimeState(dir, { sealer: sealerOf([keyA]) });
  await writer.save(record('svc-a', secretEnv));
  await writer.save(record('svc-b', { OTHER: 'x' }));
  const file = path.join(dir, 'runtime-state.json');
  const stored = JSON.parse(await readFile(file, 'utf8')) as { records: Array<{ current: { sealedEnv: unknown } }> };
  stored.records[1]!.current.sealedEnv = stored.records[0]!.current.sealedEnv;
  await writeFile(file, JSON.stringify(stored));
  const warnings: string[] = [];
  const warn = (message: string) => warnings.push(message);
  const records = await new FileRuntimeState(dir, { sealer: sealerOf([keyA]), warn }).load();
  t.same(records.find((one) => one.serviceId === 'svc-a')!.current!.env, secretEnv);
  t.equal(records.find((one) => one.serviceId === 'svc-b')!.current, null);
  t.match(warnings, [/svc-b: .*fails its integrity check/]);
});

t.test("an earlier version's plaintext file is read, and sealed by the next write", async (t) => {
  const dir = await stateDir(t);
  const file = path.join(dir, 'runtime-state.json');
  await writeFile(file, JSON.stringify([record('svc-a', secretEnv)]));
  const state = new FileRuntimeState(dir, { sealer: sealerOf([keyA]) });
  const [loaded] = await state.load();
  t.same(loaded, record('svc-a', secretEnv));
  await state.save({ ...loaded!, groups: [] });
  const text = await readFile(file, 'utf8');
  for (const value of Object.values(secretEnv)) t.notOk(text.includes(value), `${value} is gone from the file`);
});

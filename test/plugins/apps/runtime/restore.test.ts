import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { generateKeyEntry } from '../../../../core/services/secret-keys.ts';
import type { Instance } from '../../../../plugins/apps/runtime/index.ts';
import type { TapLike } from '../../../helpers/app.ts';
import { eventually } from '../../../helpers/eventually.ts';
import { app, get, portRange, stateDir } from './runtime-helpers.ts';

/**
 * The runtime's host dies by SIGKILL (no cleanup of any kind), and a new host on the same state
 * directory brings the apps back from their artifacts, unrebuilt, killing what the dead one left.
 */
t.setTimeout(120_000);

const keyIdOf = (entry: string): string => entry.slice(0, entry.indexOf(':'));

interface HostReport {
  restored: string[];
  failures: string[];
  instances: Instance[];
}

async function startHost(t: TapLike, settings: object): Promise<{ report: HostReport; kill: () => Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', new URL('./runtime-host.ts', import.meta.url).pathname], {
    env: { ...process.env, RUNTIME_HOST: JSON.stringify(settings) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = once(child, 'exit');
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  let text = '';
  child.stdout!.on('data', (chunk) => {
    text += chunk;
  });
  await eventually(() => text.includes('\n') || child.exitCode !== null, 'the host to report', { timeoutMs: 30_000 });
  return {
    report: JSON.parse(text) as HostReport,
    kill: async () => {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

for (const bwrapPath of ['/usr/bin/bwrap', null]) {
  t.test(`after the host's SIGKILL a new host serves the app again, unrebuilt (sandbox: ${bwrapPath ? 'bwrap' : 'none'})`, async (t) => {
    const settings = { stateDir: await stateDir(t), ports: portRange(), bwrapPath };
    const [oldKey, newKey] = [generateKeyEntry(), generateKeyEntry()];
    const secrets = { SVC_API_KEY: `sk-app-${randomUUID()}`, DATABASE_PASSWORD: `pw-${randomUUID()}` };
    const deploy = app('svc-boot', 'dep-7', 'server.cjs', { VERSION: 'v7', ...secrets });
    const first = await startHost(t, { ...settings, keys: [oldKey], deploy });
    const [before] = first.report.instances;
    t.match((await get(before!.target)).body, /^v7 /);

    await first.kill();
    if (!bwrapPath) t.ok(alive(before!.pid!), 'without bwrap the app outlives its host: an orphan the next host must kill');

    const file = path.join(settings.stateDir, 'runtime-state.json');
    const written = await readFile(file, 'utf8');
    for (const value of Object.values(secrets)) t.notOk(written.includes(value), 'no env value in plaintext');
    t.match(written, keyIdOf(oldKey), 'sealed under the key then current');

    // The keyring is rotated (a new key in front, the old one kept until everything is resealed).
    const second = await startHost(t, { ...settings, keys: [newKey, oldKey], deploy: null });
    t.same(second.report.restored, ['svc-boot']);
    t.same(second.report.failures, []);
    const [after] = second.report.instances;
    // Without bwrap the restored app would outlive this test's host as well: end its group here.
    t.teardown(() => {
      try {
        process.kill(-after!.pid!, 'SIGKILL');
      } catch {}
    });
    t.equal(after!.deploymentId, 'dep-7');
    t.not(after!.pid, before!.pid);
    t.match((await get(after!.target)).body, /^v7 /, 'the same artifact serves again, its env opened from the file');
    const resealed = await readFile(file, 'utf8');
    t.match(resealed, keyIdOf(newKey), 'the restore sealed the record again under the new key');
    t.notOk(resealed.includes(keyIdOf(oldKey)), 'nothing is left under the old key: it can be dropped');
    for (const value of Object.values(secrets)) t.notOk(resealed.includes(value), 'still no env value in plaintext');
    await eventually(() => !alive(before!.pid!), "the dead host's process group to be gone");
    t.pass('the orphaned group is gone');
    await second.kill();
  });
}

import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { Tokens } from '../../../../core/kernel/di-tokens.ts';
import type { InstanceUsage } from '../../../../plugins/apps/runtime/index.ts';
import { treeUsage } from '../../../../plugins/apps/runtime/usage.ts';
import { sampleUsage, UsageSampleStore } from '../../../../plugins/apps/traffic/usage-samples.ts';
import { eventually } from '../../../helpers/eventually.ts';
import { app as fixtureApp, runtimeFor } from '../runtime/runtime-helpers.ts';
import { storedApp, trafficServer } from './traffic-fixtures.ts';

const MiB = 1024 * 1024;

/** A folder shaped like /proc: `<pid>/stat` and `<pid>/statm` for each process given. */
function fakeProc(
  t: { teardown(fn: () => void): void },
  processes: Array<{ pid: number; ppid: number; pgid: number; ticks: [number, number, number, number]; residentPages: number; comm?: string }>,
): string {
  const root = mkdtempSync(path.join(tmpdir(), 'fake-proc-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  for (const entry of processes) {
    mkdirSync(path.join(root, String(entry.pid)));
    // Fields 1–22 of stat: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime … starttime.
    const fields = [entry.pid, `(${entry.comm ?? 'node'})`, 'S', entry.ppid, entry.pgid, entry.pgid, 0, -1, 0, 0, 0, 0, 0, ...entry.ticks, 20, 0, 1, 0, 5000];
    writeFileSync(path.join(root, String(entry.pid), 'stat'), `${fields.join(' ')}\n`);
    writeFileSync(path.join(root, String(entry.pid), 'statm'), `100000 ${entry.residentPages} 50 10 0 900 0\n`);
  }
  writeFileSync(path.join(root, 'meminfo'), 'not a process\n');
  return root;
}

t.test('an instance’s usage is its whole process tree: memory from statm, CPU from stat', async (t) => {
  const procRoot = fakeProc(t, [
    { pid: 100, ppid: 1, pgid: 100, ticks: [10, 5, 0, 0], residentPages: 100 },
    // bwrap's --new-session moves the app out of the group: reached as a descendant of the leader.
    { pid: 101, ppid: 100, pgid: 101, ticks: [200, 40, 30, 20], residentPages: 2000, comm: 'node (app) x' },
    { pid: 102, ppid: 101, pgid: 101, ticks: [50, 50, 0, 0], residentPages: 300 },
    { pid: 200, ppid: 1, pgid: 200, ticks: [9999, 9999, 0, 0], residentPages: 99999 },
  ]);
  const usage = await treeUsage(100, { procRoot, units: { clockTicks: 100, pageSize: 4096 } });
  t.same(usage, { processes: 3, memoryBytes: (100 + 2000 + 300) * 4096, cpuMs: (15 + 290 + 100) * 10 });
  t.equal(await treeUsage(300, { procRoot, units: { clockTicks: 100, pageSize: 4096 } }), null, 'a tree that is gone');
});

t.test('a real process: resident memory, and CPU time that grows as it works', async (t) => {
  const child = spawn(process.execPath, ['-e', 'let n = 0; setInterval(() => { const end = Date.now() + 20; while (Date.now() < end) n++; }, 25);'], {
    detached: true,
    stdio: 'ignore',
    env: {},
  });
  t.teardown(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {}
  });
  const first = await eventually(() => treeUsage(child.pid!), 'the process is seen');
  t.ok(first.memoryBytes > 5 * MiB, `resident memory ${first.memoryBytes}`);
  t.equal(first.processes, 1);
  const later = await eventually(async () => {
    const now = await treeUsage(child.pid!);
    return now && now.cpuMs >= first.cpuMs + 100 ? now : null;
  }, 'CPU time grows');
  t.ok(later.cpuMs > first.cpuMs);
});

t.test('the local runtime reports each running instance for the sampler', async (t) => {
  const runtime = await runtimeFor(t);
  const instance = await runtime.deploy(fixtureApp('svc-usage', 'dep-usage', 'server.cjs'));
  const [usage, ...others] = await runtime.usage();
  t.same(others, []);
  t.match(usage, { serviceId: 'svc-usage', deploymentId: 'dep-usage', instance: `${instance.pid}@${instance.startedAt}`, startedAt: instance.startedAt });
  t.ok(usage!.memoryBytes > 5 * MiB, `memory ${usage!.memoryBytes}`);
  t.ok(usage!.processes >= 1);
  await runtime.stop('svc-usage');
  t.same(await runtime.usage(), [], 'a stopped service has no instances');
});

t.test('each sample covers the time and CPU since the instance’s previous sample; old samples are pruned', async (t) => {
  const now = { at: new Date('2026-03-10T12:00:00.000Z') };
  const test = await trafficServer(t, now);
  const stored = await storedApp(test, 'sampled');
  const samples = new UsageSampleStore(test.app.svc.container.resolve(Tokens.Database));
  const startedAt = new Date(now.at.getTime() - 30_000).toISOString();
  let reported: InstanceUsage[] = [
    { serviceId: stored.serviceId, deploymentId: stored.deploymentId, instance: `4242@${startedAt}`, startedAt, memoryBytes: 300 * MiB, cpuMs: 600, processes: 2 },
    // A service deleted meanwhile is not sampled.
    { serviceId: '00000000-0000-4000-8000-000000000000', deploymentId: stored.deploymentId, instance: 'gone', startedAt, memoryBytes: 1, cpuMs: 1, processes: 1 },
  ];
  const runtime = { usage: async () => reported };
  const deps = { samples, clock: () => now.at, retentionMs: 86_400_000 };

  t.same(await sampleUsage(deps, runtime), { written: 1, pruned: 0 });
  now.at = new Date(now.at.getTime() + 60_000);
  reported = [{ ...reported[0]!, cpuMs: 1_800, memoryBytes: 200 * MiB }];
  t.same(await sampleUsage(deps, runtime), { written: 1, pruned: 0 });
  t.same(await sampleUsage(deps, runtime), { written: 0, pruned: 0 }, 'a second round at the same instant writes nothing');

  const held = await samples.between({ appId: stored.appId }, new Date(0), new Date(now.at.getTime() + 1));
  t.same(
    held.map((sample) => [sample.coversMs, sample.cpuMs, sample.cpuTotalMs, sample.memoryBytes, sample.organizationId]),
    [
      [30_000, 600, 600, 300 * MiB, test.organizationId],
      [60_000, 1_200, 1_800, 200 * MiB, test.organizationId],
    ],
    'the first sample covers the time since the instance started',
  );

  now.at = new Date(now.at.getTime() + 86_400_000 - 30_000);
  reported = [];
  t.same(await sampleUsage(deps, runtime), { written: 0, pruned: 1 }, 'samples past retention are removed');
});

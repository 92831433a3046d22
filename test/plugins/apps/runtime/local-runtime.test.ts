import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { HealthFailure, RuntimeError, type RuntimeEvent } from '../../../../plugins/apps/runtime/index.ts';
import { treeOf } from '../../../../plugins/apps/runtime/processes.ts';
import { eventually } from '../../../helpers/eventually.ts';
import { app, get, nextRoute, runtimeFor, stateDir } from './runtime-helpers.ts';

/**
 * The local runtime as the apps plugin and its proxy see it: real sandboxed processes (bwrap is on
 * this machine and in CI), real ports, results decided by awaited events and polled conditions.
 */
t.setTimeout(120_000);

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

t.test('a deploy resolves once the app answers, routes to it, and runs it in bwrap', async (t) => {
  const runtime = await runtimeFor(t);
  const routed = nextRoute(runtime, 'svc-a');
  const instance = await runtime.deploy(app('svc-a', 'dep-1', 'server.cjs', { VERSION: 'v1' }));
  t.equal(instance.sandbox, 'bwrap');
  t.equal(instance.target, `127.0.0.1:${instance.port}`);
  t.same(await routed, { serviceId: 'svc-a', deploymentId: 'dep-1', target: instance.target });
  t.match((await get(instance.target)).body, /^v1 pid 2\n$/, 'the app is pid 2 of its own pid namespace');
  const status = await runtime.status('svc-a');
  t.equal(status.state, 'running');
  t.same(
    status.instances.map((one) => one.deploymentId),
    ['dep-1'],
  );
});

t.test('a second deploy swaps with no failed request from a client following the route changes', async (t) => {
  const runtime = await runtimeFor(t);
  const first = await runtime.deploy(app('svc-swap', 'dep-1', 'server.cjs', { VERSION: 'v1' }));
  let target = first.target;
  runtime.onChange((change) => {
    if (change.serviceId === 'svc-swap' && change.target) target = change.target;
  });
  // The proxy, reduced to following onChange: each request goes where the last change pointed.
  const proxy = createServer((incoming, outgoing) => {
    const [host, port] = target.split(':');
    const forwarded = request({ host, port: Number(port), path: incoming.url, agent: false }, (answer) => {
      outgoing.writeHead(answer.statusCode ?? 502);
      answer.pipe(outgoing);
    });
    forwarded.on('error', () => outgoing.writeHead(502).end('bad gateway'));
    forwarded.end();
  });
  proxy.listen(0, '127.0.0.1');
  await once(proxy, 'listening');
  t.teardown(() => proxy.close());
  const proxyTarget = `127.0.0.1:${(proxy.address() as AddressInfo).port}`;

  const seen: string[] = [];
  const failures: string[] = [];
  let polling = true;
  const client = (async () => {
    while (polling) {
      const answer = await get(proxyTarget);
      if (answer.ok) seen.push(answer.body.split(' ')[0]!);
      else failures.push(answer.body);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();
  await eventually(() => seen.length > 3, 'the client to reach v1');
  const second = await runtime.deploy(app('svc-swap', 'dep-2', 'server.cjs', { VERSION: 'v2' }));
  await eventually(() => !alive(first.pid!), 'the old instance to end');
  await eventually(() => seen.at(-1) === 'v2' && seen.length > 10, 'the client to reach v2');
  polling = false;
  await client;
  t.same(failures, [], 'no request failed');
  t.equal(seen[0], 'v1');
  t.equal(seen.at(-1), 'v2');
  t.same(
    (await runtime.status('svc-swap')).instances.map((one) => one.deploymentId),
    ['dep-2'],
  );
  t.not(second.port, first.port);
});

t.test('a deploy that never listens keeps the old version and names the probe that failed', async (t) => {
  const runtime = await runtimeFor(t, { healthTimeoutMs: 1_500 });
  const old = await runtime.deploy(app('svc-h', 'dep-1', 'server.cjs', { VERSION: 'v1' }));
  const events: RuntimeEvent[] = [];
  runtime.onEvent((event) => events.push(event));
  const failure = await runtime.deploy(app('svc-h', 'dep-2', 'never-listens.cjs')).catch((error: unknown) => error);
  t.ok(failure instanceof HealthFailure);
  const health = failure as HealthFailure;
  t.match(health.probe, /^nothing listening on PORT=\d+ after 1\.5s$/);
  t.same(health.lastLines, ['stdout: starting, but not listening']);
  t.equal(health.exitCode, null, 'it was still running: the runtime ended it');
  t.ok(events.some((event) => event.kind === 'health_failed' && event.deploymentId === 'dep-2' && event.probe === health.probe));
  t.match((await get(old.target)).body, /^v1 /, 'the old version still serves');
  const status = await runtime.status('svc-h');
  t.equal(status.deploymentId, 'dep-1');
  t.same(
    status.instances.map((one) => one.deploymentId),
    ['dep-1'],
  );
});

t.test('a deploy whose process dies says how it ended and what it printed', async (t) => {
  const runtime = await runtimeFor(t);
  const failure = (await runtime.deploy(app('svc-d', 'dep-1', 'exits.cjs')).catch((error: unknown) => error)) as HealthFailure;
  t.ok(failure instanceof HealthFailure);
  t.match(failure.probe, /^process ended before anything listened on PORT=\d+$/);
  t.equal(failure.exitCode, 2);
  t.same(failure.lastLines, ['stderr: missing configuration: DATABASE_URL']);
  t.equal((await runtime.status('svc-d')).state, 'stopped');
});

t.test('each instance is reported started, with its memory cap, and exited under the same name; a restart is a new one', async (t) => {
  const runtime = await runtimeFor(t, { restart: { maxCrashes: 2, windowMs: 60_000, backoffMs: 20 }, limits: { memoryBytes: 3 * 1024 ** 3 } });
  const events: RuntimeEvent[] = [];
  const crashed = new Promise<void>((resolve) => {
    runtime.onEvent((event) => {
      events.push(event);
      if (event.kind === 'crashed') resolve();
    });
  });
  await runtime.deploy(app('svc-m', 'dep-1', 'crash.cjs'));
  await crashed;
  const started = events.flatMap((event) => (event.kind === 'started' ? [event] : []));
  const exited = events.flatMap((event) => (event.kind === 'exited' ? [event] : []));
  t.equal(started.length, 2, 'the deploy and one restart');
  t.same(
    exited.map((event) => event.instance),
    started.map((event) => event.instance),
    'each ended under the name it started with',
  );
  t.not(started[0]!.instance, started[1]!.instance);
  t.same(
    started.map((event) => [event.serviceId, event.deploymentId, event.memoryBytes]),
    [
      ['svc-m', 'dep-1', 3 * 1024 ** 3],
      ['svc-m', 'dep-1', 3 * 1024 ** 3],
    ],
  );
});

t.test('a crash loop restarts with backoff, then is marked crashed after N crashes in the window', async (t) => {
  const runtime = await runtimeFor(t, { restart: { maxCrashes: 3, windowMs: 60_000, backoffMs: 20 } });
  const events: RuntimeEvent[] = [];
  const crashed = new Promise<RuntimeEvent>((resolve) => {
    runtime.onEvent((event) => {
      events.push(event);
      if (event.kind === 'crashed') resolve(event);
    });
  });
  await runtime.deploy(app('svc-c', 'dep-1', 'crash.cjs'));
  t.same(await crashed, { kind: 'crashed', serviceId: 'svc-c', deploymentId: 'dep-1', crashes: 3, windowMs: 60_000 });
  const restarts = events.filter((event) => event.kind === 'restarting');
  t.same(
    restarts.map((event) => event.kind === 'restarting' && event.inMs),
    [20, 40],
    'exponential backoff',
  );
  const status = await runtime.status('svc-c');
  t.equal(status.state, 'crashed');
  await eventually(async () => (await runtime.status('svc-c')).instances.length === 0, 'no instance left');
});

t.test('stop ends the app and routes nothing; start runs the same artifact again', async (t) => {
  const runtime = await runtimeFor(t);
  const first = await runtime.deploy(app('svc-s', 'dep-1', 'server.cjs', { VERSION: 'v1' }));
  const unrouted = nextRoute(runtime, 'svc-s');
  await runtime.stop('svc-s');
  t.same(await unrouted, { serviceId: 'svc-s', deploymentId: null, target: null });
  t.notOk(alive(first.pid!), 'the process group is gone');
  t.same(await runtime.status('svc-s'), { serviceId: 'svc-s', state: 'stopped', deploymentId: 'dep-1', instances: [] });
  const again = await runtime.start('svc-s');
  t.equal(again.deploymentId, 'dep-1');
  t.match((await get(again.target)).body, /^v1 /);
});

t.test('retiring the current deployment stops the service and leaves nothing to start', async (t) => {
  const runtime = await runtimeFor(t);
  const instance = await runtime.deploy(app('svc-r', 'dep-1', 'server.cjs'));
  await runtime.retire('dep-1');
  t.notOk(alive(instance.pid!));
  t.same(await runtime.status('svc-r'), { serviceId: 'svc-r', state: 'stopped', deploymentId: null, instances: [] });
  const refusal = await runtime.start('svc-r').catch((error: unknown) => error);
  t.ok(refusal instanceof RuntimeError && refusal.code === 'nothing_deployed');
});

t.test('a one-off runs in the app sandbox with its env, and a timeout ends it', async (t) => {
  const runtime = await runtimeFor(t);
  await runtime.deploy(app('svc-run', 'dep-1', 'server.cjs', { VERSION: 'v7' }));
  const result = await runtime.run('svc-run', 'echo "$VERSION in $(pwd) port=${PORT:-none}"; ls /app/server.cjs; exit 4', { timeoutMs: 10_000 });
  t.same(result, { exitCode: 4, signal: null, timedOut: false, output: 'v7 in /app port=none\n/app/server.cjs\n' });
  const written = await runtime.run('svc-run', 'touch /app/x 2>&1 || echo read-only', { timeoutMs: 10_000 });
  t.match(written.output, /read-only/, 'the artifact cannot be written');
  const slow = await runtime.run('svc-run', 'sleep 30', { timeoutMs: 200 });
  t.equal(slow.timedOut, true);
  t.equal(slow.signal, 'SIGKILL');
});

t.test('logs keep each line timestamped and tagged, and follow yields new ones', async (t) => {
  const runtime = await runtimeFor(t);
  await runtime.deploy(app('svc-l', 'dep-1', 'server.cjs'));
  const lines = [];
  for await (const line of runtime.logs('svc-l')) lines.push(line);
  const listening = lines.find((line) => line.stream === 'stdout');
  t.match(listening, { deploymentId: 'dep-1', stream: 'stdout', line: /^listening on \d+$/ });
  t.ok(!Number.isNaN(Date.parse(listening!.at)));
  t.ok(lines.some((line) => line.stream === 'runtime' && /^healthy on PORT=/.test(line.line)));

  const followed = runtime.logs('svc-l', { follow: true, since: new Date() })[Symbol.asyncIterator]();
  const ran = runtime.stop('svc-l');
  let next = await followed.next();
  while (!next.done && next.value.line !== 'SIGTERM') next = await followed.next();
  t.equal(next.value?.stream, 'runtime', 'the stop shows up in the followed log');
  await followed.return?.();
  await ran;
});

t.test('a fork bomb is contained by the process cap, and nothing of it outlives the service', async (t) => {
  const runtime = await runtimeFor(t);
  const instance = await runtime.deploy({ ...app('svc-f', 'dep-1', 'server.cjs'), limits: { processes: 40 } });
  const answer = await get(instance.target, '/fork');
  const bomb = JSON.parse(answer.body) as { spawned: number; refused: number; processes: number };
  t.ok(bomb.refused > 0, `the kernel refused ${bomb.refused} of 200 spawns`);
  t.ok(bomb.spawned < 40, `${bomb.spawned} spawned, under the cap of 40 (threads count too)`);
  t.ok(bomb.processes <= 40, `the sandbox holds ${bomb.processes} processes`);
  t.equal(spawnSync('/bin/true').status, 0, 'the machine still starts processes');
  t.match((await get(instance.target)).body, /^v\? pid 2/, 'the app itself still serves');
  t.ok((await treeOf(instance.pid!)).length > bomb.spawned, 'the sleeps are in the instance tree');
  await runtime.stop('svc-f');
  await eventually(async () => (await treeOf(instance.pid!)).length === 0, 'the whole tree to end');
  t.pass('nothing of the bomb is left');
});

t.test('without bwrap: one warning, sandbox none per instance, and requireSandbox refuses', async (t) => {
  const warnings: string[] = [];
  const runtime = await runtimeFor(t, { bwrapPath: '/nonexistent/bwrap', warn: (message) => warnings.push(message) });
  const instance = await runtime.deploy(app('svc-n', 'dep-1', 'server.cjs', { VERSION: 'v1' }));
  await runtime.deploy(app('svc-n', 'dep-2', 'server.cjs', { VERSION: 'v2' }));
  t.equal(instance.sandbox, 'none');
  t.same(warnings, ["/nonexistent/bwrap is not executable: apps run without a sandbox (sandbox: none), as the service's own user, under its caps only"]);
  const refusal = await runtimeFor(t, { stateDir: await stateDir(t), bwrapPath: '/nonexistent/bwrap', requireSandbox: true }).catch((error: unknown) => error);
  t.ok(refusal instanceof RuntimeError);
  t.equal((refusal as RuntimeError).code, 'sandbox_required');
  t.match((refusal as RuntimeError).message, /apps\.requireSandbox is set but \/nonexistent\/bwrap is not executable/);
});

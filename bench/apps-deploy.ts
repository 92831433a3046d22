/**
 * Apps: push → serving, and rollback (`BENCH_ONLY=apps npm run bench`, or `npx tsx bench/apps-deploy.ts`).
 *
 * One service in this process (PGlite, the local git host, the apps plugin, the proxy on a free
 * port), as the apps tests build it. For a tiny node app with no dependency, and one with a
 * dependency from a loopback fake npm registry (reached through the build's registry proxy, as any
 * install is), BENCH_APPS_N pushes (default 5) each change what the app answers; the time is from
 * `git push` starting to the proxy answering the new text. Then a rollback to the previous
 * deployment: from the POST to the proxy answering the old text. Medians are printed.
 * Goals (issue 24): push → serving ≤ 3 s without dependencies, rollback ≤ 1 s.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import type { TestApp } from '../test/helpers/app.ts';
import { median } from './run-statistics.ts';

const PUSHES = Number(process.env.BENCH_APPS_N ?? 5);
export const APPS_GOALS = { pushToServingMs: 3_000, rollbackMs: 1_000 };

export interface AppsDeployFigures {
  noDeps: { pushToServingMs: number[]; median: number };
  oneDep: { pushToServingMs: number[]; median: number };
  rollback: { ms: number[]; median: number };
}

// The service is built as the apps tests build it; their helpers load tap, whose root test would
// time the bench out after 30 s: no timeout, and the helpers loaded only once that is set.
process.env.TAP_TIMEOUT = '0';
const { buildTestApp, createKey } = await import('../test/helpers/app.ts');
const { call, git, tinyApp } = await import('../test/plugins/apps/apps-fixtures.ts');
const { fakeRegistry } = await import('../test/plugins/apps/fake-npm-registry.ts');

const teardowns: Array<() => unknown> = [];
const scope = { teardown: (fn: () => unknown) => void teardowns.push(fn) } as unknown as Test;

function source(text: string, dependency: boolean): Record<string, string> {
  const answer = dependency ? `require('tiny-dep') + ' ' + ${JSON.stringify(text)}` : JSON.stringify(text);
  return {
    'package.json': JSON.stringify({ name: 'bench-app', scripts: { start: 'node server.js' }, ...(dependency ? { dependencies: { 'tiny-dep': '1.0.0' } } : {}) }),
    'server.js': [
      "const http = require('node:http');",
      `const body = ${answer};`,
      "const server = http.createServer((q, s) => s.end(body)).listen(Number(process.env.PORT), '127.0.0.1');",
      "process.on('SIGTERM', () => server.close());",
      '',
    ].join('\n'),
  };
}

async function servingWithin(port: number, host: string, expected: string, timeoutMs = 300_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const answer = await call(port, host).catch(() => ({ status: 0, body: '' }));
    if (answer.status === 200 && answer.body.endsWith(expected)) return;
    if (Date.now() > until) throw new Error(`${host} never answered ${expected} (last: ${answer.status} ${answer.body.slice(0, 80)})`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

async function pushes(test: TestApp, serviceUrl: string, deployKey: string, name: string, dependency: boolean): Promise<{ times: number[]; serviceId: string; proxyPort: number }> {
  if ((await test.call('POST', '/client/githost/repos', { body: { name } })).statusCode !== 201) throw new Error('repository not created');
  const work = await tinyApp(scope, source('v0', dependency));
  const pushUrl = `${serviceUrl}/git/${test.organizationId}/${name}.git`;
  await git(scope, work.dir, ['push', '--quiet', pushUrl, 'main'], deployKey);
  const created = await test.call('POST', '/client/apps/githost', { body: { repo: name } });
  if (created.statusCode !== 202) throw new Error(`deploy refused: ${created.body}`);
  const { app, service } = created.json() as { app: { url: string }; service: { id: string } };
  const proxyPort = Number(new URL(app.url).port);
  await servingWithin(proxyPort, `${name}.localhost`, 'v0');
  const times: number[] = [];
  for (let n = 1; n <= PUSHES; n++) {
    for (const [file, content] of Object.entries(source(`v${n}`, dependency))) writeFileSync(join(work.dir, file), content);
    await git(scope, work.dir, ['commit', '--quiet', '-am', `v${n}`]);
    const started = performance.now();
    await git(scope, work.dir, ['push', '--quiet', pushUrl, 'main'], deployKey);
    await servingWithin(proxyPort, `${name}.localhost`, `v${n}`);
    times.push(Math.round(performance.now() - started));
  }
  return { times, serviceId: service.id, proxyPort };
}

export async function measureAppsDeploy(): Promise<AppsDeployFigures> {
  const registry = await fakeRegistry(scope);
  const buildDir = mkdtempSync(join(tmpdir(), 'svc-bench-apps-'));
  chmodSync(buildDir, 0o700);
  teardowns.push(() => rmSync(buildDir, { recursive: true, force: true }));
  try {
    const test = await buildTestApp(scope, {
      config: { outbound: { allowPrivateNetwork: true }, jobs: { pollIntervalMs: 50 } },
      plugins: {
        keys: {},
        projects: {},
        githost: {},
        apps: {
          proxy: { port: 0 },
          runtime: { healthTimeoutMs: 30_000, stopGraceMs: 2_000 },
          build: { dir: buildDir, registries: [registry.url], npmRegistry: registry.url },
        },
      },
    });
    await test.app.listen({ host: '127.0.0.1', port: 0 });
    const serviceUrl = `http://127.0.0.1:${(test.app.server.address() as AddressInfo).port}`;
    const deployKey = (await createKey(test, { scopes: ['apps:deploy', 'apps:read'] })).key;

    const noDeps = await pushes(test, serviceUrl, deployKey, 'bench-plain', false);
    const oneDep = await pushes(test, serviceUrl, deployKey, 'bench-dep', true);

    // Rollback: to the deployment before the live one, then forward again, PUSHES times.
    const rollbacks: number[] = [];
    const history = (await test.call('GET', `/client/services/${noDeps.serviceId}/deployments`)).json() as { data: Array<{ id: string; status: string }> };
    const [live, previous] = history.data.filter((entry) => entry.status === 'live' || entry.status === 'retired');
    if (!live || !previous) throw new Error('no deployment to roll back to');
    for (let n = 0; n < PUSHES; n++) {
      const [target, text] = n % 2 === 0 ? [previous.id, `v${PUSHES - 1}`] : [live.id, `v${PUSHES}`];
      const started = performance.now();
      const answer = await test.call('POST', `/client/services/${noDeps.serviceId}/rollback`, { body: { deploymentId: target } });
      if (answer.statusCode !== 200 && answer.statusCode !== 202) throw new Error(`rollback refused: ${answer.statusCode} ${answer.body}`);
      await servingWithin(noDeps.proxyPort, 'bench-plain.localhost', text);
      rollbacks.push(Math.round(performance.now() - started));
    }
    return {
      noDeps: { pushToServingMs: noDeps.times, median: median(noDeps.times) },
      oneDep: { pushToServingMs: oneDep.times, median: median(oneDep.times) },
      rollback: { ms: rollbacks, median: median(rollbacks) },
    };
  } finally {
    for (const fn of teardowns.reverse()) await fn();
  }
}

export function printAppsDeploy(figures: AppsDeployFigures, log: (line: string) => void): void {
  const mark = (value: number, goal: number) => (value <= goal ? 'meets' : 'misses');
  log(
    `  push → serving, no dependencies: median ${figures.noDeps.median} ms (${figures.noDeps.pushToServingMs.join(', ')}); goal ≤ ${APPS_GOALS.pushToServingMs} ms: ${mark(figures.noDeps.median, APPS_GOALS.pushToServingMs)}`,
  );
  log(`  push → serving, one dependency from the registry proxy: median ${figures.oneDep.median} ms (${figures.oneDep.pushToServingMs.join(', ')})`);
  log(
    `  rollback → serving: median ${figures.rollback.median} ms (${figures.rollback.ms.join(', ')}); goal ≤ ${APPS_GOALS.rollbackMs} ms: ${mark(figures.rollback.median, APPS_GOALS.rollbackMs)}`,
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  measureAppsDeploy().then(
    (figures) => {
      printAppsDeploy(figures, (line) => process.stdout.write(`${line}\n`));
      process.exit(0);
    },
    (error: unknown) => {
      process.stderr.write(`bench apps: ${error instanceof Error ? error.stack : String(error)}\n`);
      process.exit(1);
    },
  );
}

/**
 * Apps: push → serving, and rollback (`BENCH_ONLY=apps npm run bench`, or `npx tsx bench/apps-deploy.ts`).
 *
 * One service in this process (PGlite, the local git host, the apps plugin, the proxy on a free
 * port), as the apps tests build it. For a tiny node app with no dependency, and one with a
 * dependency from a loopback fake npm registry (reached through the build's registry proxy, as any
 * install is), BENCH_APPS_N pushes (default 5) each change what the app answers; the time is from
 * `git push` starting to the proxy answering the new text. Then a rollback to the previous
 * deployment: from the POST to the proxy answering the old text. Medians with min–max are printed,
 * and where the time went: each deployment's own record (job start, the clone and build timings)
 * and its runtime log lines (the app started, healthy) split every measure into phases.
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

/**
 * Where one measure's time went, in ms, each phase ending where the next begins:
 * `toJob`: the push (or the rollback's POST) to the deployment's job starting (for a push: git's
 * upload, the `githost.pushed` event, the deployment created and its job claimed);
 * `clone`, `build`: the deployment's own timings (null for a rollback: nothing is built);
 * `toStart`: the build's end (the job's start for a rollback) to the runtime's "started" line
 * (env read, the artifact handed to the app's uid, the sandboxed spawn);
 * `health`: "started" to "healthy" (the app's own start, and the gate's probes);
 * `toServing`: "healthy" to the bench's first request answered with the new text (the route's
 * message to the proxy, and the bench's 5 ms polling).
 * Beside them, overlapping `toJob`: `answered`, how long `git push` (or the POST) took to return.
 * Not part of the measure, `jobAfter`: how long the deployment's job went on after the proxy served
 * the new text (the previous instance stopped within its grace, the log stored, the row marked live).
 * The build queue runs one job at a time per process, so each measure starts once the previous
 * deployment's job is done: a push right behind another would wait for that much first.
 */
export interface Phases {
  toJob: number;
  clone: number | null;
  build: number | null;
  toStart: number;
  health: number;
  toServing: number;
  answered: number;
  jobAfter: number;
}
/** The measure's phases in order, then the two figures beside them. */
const IN_ORDER = ['toJob', 'clone', 'build', 'toStart', 'health', 'toServing'] as const;
export const PHASE_NAMES = [...IN_ORDER, 'answered', 'jobAfter'] as const;

export interface Measure {
  ms: number[];
  median: number;
  min: number;
  max: number;
  /** One per measure, in order; null where a deployment's record could not be matched. */
  phases: Array<Phases | null>;
}

export interface AppsDeployFigures {
  noDeps: Measure;
  oneDep: Measure;
  rollback: Measure;
}

// The service is built as the apps tests build it; their helpers load tap, whose root test would
// time the bench out after 30 s: no timeout, and the helpers loaded only once that is set.
process.env.TAP_TIMEOUT = '0';
const { buildTestApp, createKey } = await import('../test/helpers/app.ts');
const { call, git, settledDeployment, tinyApp } = await import('../test/plugins/apps/apps-fixtures.ts');
const { fakeRegistry } = await import('../test/plugins/apps/fake-npm-registry.ts');

const teardowns: Array<() => unknown> = [];
const scope = { teardown: (fn: () => unknown) => void teardowns.push(fn) } as unknown as Test;

function source(text: string, dependency: boolean): Record<string, string> {
  const answer = dependency ? `require('tiny-dep') + ' ' + ${JSON.stringify(text)}` : JSON.stringify(text);
  const dependencies = dependency ? { dependencies: { 'tiny-dep': '1.0.0' } } : {};
  return {
    'package.json': JSON.stringify({ name: 'bench-app', scripts: { start: 'node server.js' }, ...dependencies }),
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
    if (Date.now() > until) {
      throw new Error(`${host} never answered ${expected} (last: ${answer.status} ${answer.body.slice(0, 80)})`);
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** One measure: when it started and when the proxy answered, on this process's clock (the service's too). */
interface Sample {
  startedAt: number;
  /** When `git push` (or the rollback's POST) returned. */
  answeredAt: number;
  servedAt: number;
  /** The deployment measured: a push's by its commit, a rollback's by the id its POST answered. */
  commit?: string;
  deploymentId?: string;
}

interface DeploymentRow {
  id: string;
  commit: string | null;
  reason: string;
  status: string;
  startedAt: string | null;
  finishedAt: string | null;
  timings: { clone: number | null; build: number | null; deploy: number | null } | null;
}

function matches(sample: Sample, row: DeploymentRow): boolean {
  return sample.deploymentId ? row.id === sample.deploymentId : row.commit === sample.commit && row.reason === 'push';
}

/** Waits until the sample's deployment is finished: its job is done, the build queue free for the next measure. */
async function finished(test: TestApp, serviceId: string, sample: Sample, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const history = (await test.call('GET', `/client/services/${serviceId}/deployments`)).json() as {
      data: DeploymentRow[];
    };
    const row = history.data.find((d) => matches(sample, d));
    if (row?.finishedAt && row.status !== 'starting') return;
    if (Date.now() > until) throw new Error(`deployment never finished: ${JSON.stringify(row)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Splits each sample into phases from its deployment's record and the service's runtime log. */
async function phasesOf(test: TestApp, serviceId: string, samples: Sample[]): Promise<Array<Phases | null>> {
  const history = (await test.call('GET', `/client/services/${serviceId}/deployments`)).json() as {
    data: DeploymentRow[];
  };
  const log = (await test.call('GET', `/client/services/${serviceId}/logs`)).json() as {
    data: Array<{ at: string; deploymentId: string; stream: string; line: string }>;
  };
  const runtimeLine = (deploymentId: string, prefix: string) => {
    const ours = (l: (typeof log.data)[number]) => l.deploymentId === deploymentId && l.stream === 'runtime';
    const found = log.data.find((l) => ours(l) && l.line.startsWith(prefix));
    return found ? Date.parse(found.at) : null;
  };
  return samples.map((sample) => {
    const row = history.data.find((d) => matches(sample, d));
    if (!row?.startedAt) return null;
    const started = runtimeLine(row.id, 'started pid');
    const healthy = runtimeLine(row.id, 'healthy on PORT');
    if (started === null || healthy === null) return null;
    const jobStart = Date.parse(row.startedAt);
    const clone = row.timings?.clone ?? null;
    const build = row.timings?.build ?? null;
    return {
      toJob: jobStart - sample.startedAt,
      clone,
      build,
      toStart: started - jobStart - (clone ?? 0) - (build ?? 0),
      health: healthy - started,
      toServing: sample.servedAt - healthy,
      answered: sample.answeredAt - sample.startedAt,
      jobAfter: row.finishedAt ? Date.parse(row.finishedAt) - sample.servedAt : NaN,
    };
  });
}

function measure(samples: Sample[], phases: Array<Phases | null>): Measure {
  const ms = samples.map((s) => Math.round(s.servedAt - s.startedAt));
  return { ms, median: median(ms), min: Math.min(...ms), max: Math.max(...ms), phases };
}

interface Pushed {
  figures: Measure;
  serviceId: string;
  proxyPort: number;
}

/** Where pushes go: the service's git host, and the key that may push. */
interface Origin {
  serviceUrl: string;
  deployKey: string;
}

async function pushes(test: TestApp, { serviceUrl, deployKey }: Origin, name: string, dep: boolean): Promise<Pushed> {
  const made = await test.call('POST', '/client/githost/repos', { body: { name } });
  if (made.statusCode !== 201) throw new Error('repository not created');
  const work = await tinyApp(scope, source('v0', dep));
  const pushUrl = `${serviceUrl}/git/${test.organizationId}/${name}.git`;
  await git(scope, work.dir, ['push', '--quiet', pushUrl, 'main'], deployKey);
  const created = await test.call('POST', '/client/apps/githost', { body: { repo: name } });
  if (created.statusCode !== 202) throw new Error(`deploy refused: ${created.body}`);
  const { app, service } = created.json() as { app: { id: string; url: string }; service: { id: string } };
  const proxyPort = Number(new URL(app.url).port);
  await servingWithin(proxyPort, `${name}.localhost`, 'v0');
  await settledDeployment(test, app.id);
  const samples: Sample[] = [];
  for (let n = 1; n <= PUSHES; n++) {
    for (const [file, content] of Object.entries(source(`v${n}`, dep))) writeFileSync(join(work.dir, file), content);
    await git(scope, work.dir, ['commit', '--quiet', '-am', `v${n}`]);
    const commit = (await git(scope, work.dir, ['rev-parse', 'HEAD'])).stdout.trim();
    // Wall clock: the deployment's record and the runtime's log lines are on it.
    const startedAt = Date.now();
    await git(scope, work.dir, ['push', '--quiet', pushUrl, 'main'], deployKey);
    const answeredAt = Date.now();
    await servingWithin(proxyPort, `${name}.localhost`, `v${n}`);
    const sample = { startedAt, answeredAt, servedAt: Date.now(), commit };
    samples.push(sample);
    await finished(test, service.id, sample);
  }
  const figures = measure(samples, await phasesOf(test, service.id, samples));
  return { figures, serviceId: service.id, proxyPort };
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

    const noDeps = await pushes(test, { serviceUrl, deployKey }, 'bench-plain', false);
    const oneDep = await pushes(test, { serviceUrl, deployKey }, 'bench-dep', true);

    // Rollback: to the deployment before the live one, then forward again, PUSHES times.
    const samples: Sample[] = [];
    const history = (await test.call('GET', `/client/services/${noDeps.serviceId}/deployments`)).json() as {
      data: Array<{ id: string; status: string }>;
    };
    const [live, previous] = history.data.filter((entry) => entry.status === 'live' || entry.status === 'retired');
    if (!live || !previous) throw new Error('no deployment to roll back to');
    for (let n = 0; n < PUSHES; n++) {
      const [target, text] = n % 2 === 0 ? [previous.id, `v${PUSHES - 1}`] : [live.id, `v${PUSHES}`];
      const startedAt = Date.now();
      const path = `/client/services/${noDeps.serviceId}/rollback`;
      const answer = await test.call('POST', path, { body: { deploymentId: target } });
      const answeredAt = Date.now();
      if (answer.statusCode !== 200 && answer.statusCode !== 202) {
        throw new Error(`rollback refused: ${answer.statusCode} ${answer.body}`);
      }
      await servingWithin(noDeps.proxyPort, 'bench-plain.localhost', text);
      const { id } = answer.json() as { id: string };
      const sample = { startedAt, answeredAt, servedAt: Date.now(), deploymentId: id };
      samples.push(sample);
      await finished(test, noDeps.serviceId, sample);
    }
    const rollback = measure(samples, await phasesOf(test, noDeps.serviceId, samples));
    return { noDeps: noDeps.figures, oneDep: oneDep.figures, rollback };
  } finally {
    for (const fn of teardowns.reverse()) await fn();
  }
}

/** Each phase's median over the measures that could be split, `-` for a phase that never ran. */
function phaseLine(phases: Array<Phases | null>): string {
  const split = phases.filter((p): p is Phases => p !== null);
  if (split.length === 0) return 'no deployment record matched';
  const medians = (names: ReadonlyArray<keyof Phases>) =>
    names.map((name) => {
      const values = split.map((p) => p[name]).filter((v): v is number => v !== null && Number.isFinite(v));
      return `${name} ${values.length === 0 ? '-' : Math.round(median(values))}`;
    });
  const beside = medians(PHASE_NAMES.slice(IN_ORDER.length));
  return `${medians(IN_ORDER).join(', ')} ms; beside: ${beside.join(', ')} ms (medians of ${split.length})`;
}

export function printAppsDeploy(figures: AppsDeployFigures, log: (line: string) => void): void {
  const mark = (value: number, goal: number) => (value <= goal ? 'meets' : 'misses');
  const row = (label: string, m: Measure, goal: number | null) => {
    const range = `${m.min}–${m.max} ms over ${m.ms.length}: ${m.ms.join(', ')}`;
    const against = goal === null ? '' : `; goal ≤ ${goal} ms: ${mark(m.median, goal)}`;
    log(`  ${label}: median ${m.median} ms (${range})${against}`);
    log(`    where: ${phaseLine(m.phases)}`);
  };
  row('push → serving, no dependencies', figures.noDeps, APPS_GOALS.pushToServingMs);
  row('push → serving, one dependency from the registry proxy', figures.oneDep, null);
  row('rollback → serving', figures.rollback, APPS_GOALS.rollbackMs);
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

/**
 * `npm run bench:runs`: the whole bench (`npm run bench`, bench/gateway-overhead.ts) several times,
 * and each figure's median and range over the runs. One run says little on a shared machine: its
 * throughput moves by ±10–15 % from run to run. Alternating two sides in one session lets the same
 * drift hit both.
 *
 *   npm run bench:runs -- [--runs N] [--vs REF] [--a KEY=VALUE]… [--b KEY=VALUE]… [--env KEY=VALUE]…
 *                         [--label-a NAME] [--label-b NAME] [--out DIR]
 *
 *   --runs N        runs per side (default 5)
 *   --vs REF        side b is REF's own bench, run in a temporary git worktree of that commit (its
 *                   node_modules a link to this checkout's), removed at the end; side a is this checkout
 *   --a KEY=VALUE   an environment variable for side a only (repeatable); with --b and no --vs, two
 *   --b KEY=VALUE   configurations of this checkout, e.g. memory against Redis coordination:
 *                     --a BENCH_REDIS_URL= --b BENCH_REDIS_URL=redis://127.0.0.1:6379
 *                   or one worker against two:
 *                     --env BENCH_DATABASE_URL=postgres://… --env BENCH_REDIS_URL=redis://… --a BENCH_WORKERS=1 --b BENCH_WORKERS=2
 *                   `KEY=` sets the variable empty, which the bench reads as unset (except
 *                   BENCH_GATEWAY_NODE_ARGS, where empty means no node flags)
 *   --env KEY=VALUE for both sides (this process's own environment is passed on as well, under them)
 *   --label-a/-b    the sides' names in the tables (default: the commit, or the side's variables)
 *   --out DIR       where each run's results.json and output are kept (default bench/runs/<start time>/)
 *
 * With one side it runs N times; with two, 2N runs in the order a b b a a b b a …, so a drift over
 * the session weighs on both alike. A run that fails is reported and left out; the others count.
 * At the end: per figure, each side's median and min–max (and b's median against a's), as text and
 * as a markdown table ready for the README, also written to the output directory.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { at, type Figure, markdownTable, pick, type Side, summarize, summaryLines } from './run-statistics.ts';

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));

/** What the tables show, in results.json's terms (bench/gateway-overhead.ts writes it). */
const FIGURES: Figure[] = [
  at('chat req/s at 32 connections: direct', 'throughput.directRps', 'req/s', 0),
  at('chat req/s at 32 connections: floor', 'throughput.floorRps', 'req/s', 0),
  at('chat req/s at 32 connections: gateway', 'throughput.gatewayRps', 'req/s', 0),
  at('ratio gateway/direct', 'throughput.ratio', '', 3),
  at('ratio floor/direct', 'throughput.floorRatio', '', 3),
  {
    label: 'ratio gateway/floor',
    unit: '',
    digits: 3,
    of: (results) => {
      const gateway = pick(results, 'throughput.gatewayRps');
      const floor = pick(results, 'throughput.floorRps');
      return gateway !== undefined && floor ? gateway / floor : undefined;
    },
  },
  at('CPU per request: gateway', 'throughput.gatewayCpuPerRequestUs', 'µs', 0),
  at('CPU per request: floor', 'throughput.floorCpuPerRequestUs', 'µs', 0),
  at('what the machine allows the gateway', 'throughput.machineAllows.gateway.callsPerSecond', 'calls/s', 0),
  at('gateway req/s as a share of it', 'throughput.machineAllows.gateway.share', '', 3),
  at('p99 at 32 connections: direct', 'throughput.loadedP99Ms.direct', 'ms', 2),
  at('added p99 at 32 connections: floor', 'throughput.floorAddedLoadedP99Ms', 'ms', 2),
  at('added p99 at 32 connections: gateway', 'throughput.addedLoadedP99Ms', 'ms', 2),
  at('added p50 at 1 connection: floor', 'latency.floorAddedP50Ms', 'ms', 3),
  at('added p50 at 1 connection: gateway', 'latency.addedP50Ms', 'ms', 3),
  at('added p99 at 1 connection: floor', 'latency.floorAddedP99Ms', 'ms', 3),
  at('added p99 at 1 connection: gateway', 'latency.addedP99Ms', 'ms', 3),
  at('added TTFT p50, one write: floor', 'ttft.floorAddedP50Ms', 'ms', 3),
  at('added TTFT p50, one write: gateway', 'ttft.addedP50Ms', 'ms', 3),
  at('paced streams, added TTFT p50: floor', 'pacedStreams.floorAddedP50Ms', 'ms', 3),
  at('paced streams, added TTFT p50: gateway', 'pacedStreams.addedP50Ms', 'ms', 3),
  at('paced streams, added TTFT p99: floor', 'pacedStreams.floorAddedP99Ms', 'ms', 3),
  at('paced streams, added TTFT p99: gateway', 'pacedStreams.addedP99Ms', 'ms', 3),
  at('CPU per paced stream: floor', 'pacedStreams.floorCpuPerStreamUs', 'µs', 0),
  at('CPU per paced stream: gateway', 'pacedStreams.gatewayCpuPerStreamUs', 'µs', 0),
  at('peak RSS: floor', 'memory.floorPeakRssMiB', 'MiB', 1),
  at('peak RSS: gateway', 'memory.peakRssMiB', 'MiB', 1),
  at('embeddings ratio gateway/direct', 'embeddings.throughput.ratio', '', 3),
  at('embeddings CPU per request: gateway', 'embeddings.throughput.gatewayCpuPerRequestUs', 'µs', 0),
  at('embeddings added p50: gateway', 'embeddings.latency.addedP50Ms', 'ms', 3),
  at('responses added first output p50: gateway', 'responsesStream.addedP50Ms', 'ms', 3),
  at('responses CPU per stream: gateway', 'responsesStream.gatewayCpuPerStreamUs', 'µs', 0),
  at('batch lines/s', 'batch.batchLinesPerSecond', 'lines/s', 0),
];

const log = (line = '') => process.stdout.write(`${line}\n`);

function usage(message: string): never {
  process.stderr.write(`bench:runs: ${message}\n(see the top of bench/runs.ts for the options)\n`);
  process.exit(2);
}

/** `KEY=VALUE` pairs into an environment (the value may be empty, or contain `=`). */
function environment(pairs: string[] | undefined, flag: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of pairs ?? []) {
    const equals = pair.indexOf('=');
    const key = equals > 0 ? pair.slice(0, equals) : '';
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) usage(`${flag} ${pair}: expected KEY=VALUE`);
    env[key] = pair.slice(equals + 1);
  }
  return env;
}

const describe = (env: Record<string, string>) =>
  Object.entries(env)
    .map(([key, value]) => (value === '' ? `${key} unset` : `${key}=${value}`))
    .join(', ');

function git(args: string[]): string {
  return execFileSync('git', args, { cwd: REPO_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

interface RunSide extends Side {
  key: 'a' | 'b';
  /** The checkout whose bench runs. */
  cwd: string;
  env: Record<string, string>;
  failures: number;
}

// ---- What is cleaned up however the session ends -------------------------------------------------

let running: ChildProcess | null = null;
let worktree: string | null = null;

function removeWorktree(): void {
  if (!worktree) return;
  const dir = worktree;
  worktree = null;
  try {
    git(['worktree', 'remove', '--force', dir]);
  } catch {
    rmSync(dir, { recursive: true, force: true });
    git(['worktree', 'prune']);
  }
}

/** A temporary worktree of `ref`, with this checkout's node_modules, for that commit's own bench. */
function checkout(ref: string): { dir: string; commit: string } {
  let commit: string;
  try {
    commit = git(['rev-parse', '--verify', `${ref}^{commit}`]);
  } catch {
    usage(`--vs ${ref}: not a commit here`);
  }
  const dir = mkdtempSync(join(os.tmpdir(), 'svc-bench-vs-'));
  git(['worktree', 'add', '--detach', dir, commit]);
  worktree = dir;
  symlinkSync(realpathSync(join(REPO_ROOT, 'node_modules')), join(dir, 'node_modules'));
  return { dir, commit };
}

// ---- One run ---------------------------------------------------------------------------------------

/** One whole `npm run bench` in the side's checkout: its results.json, or null when it failed. */
async function runOnce(side: RunSide, common: Record<string, string>, outDir: string, name: string): Promise<unknown | null> {
  const env = { ...process.env, ...common, ...side.env };
  const resultsFile = join(side.cwd, 'bench', env.BENCH_PROFILE === '1' ? 'profiles' : '', 'results.json');
  const output = createWriteStream(join(outDir, `${name}.log`));
  const started = Date.now();
  // Its own process group, so that stopping the session stops the bench and every process it started.
  const child = spawn('npm', ['run', '--silent', 'bench'], { cwd: side.cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  running = child;
  child.stdout!.pipe(output, { end: false });
  child.stderr!.pipe(output, { end: false });
  const code = await new Promise<number | null>((resolve) => child.on('close', (exitCode) => resolve(exitCode)));
  running = null;
  await new Promise<void>((resolve) => output.end(resolve));
  const seconds = Math.round((Date.now() - started) / 1000);
  if (code !== 0 || !existsSync(resultsFile) || statSync(resultsFile).mtimeMs < started) {
    const tail = readFileSync(join(outDir, `${name}.log`), 'utf8')
      .trimEnd()
      .split('\n')
      .slice(-8);
    log(`    failed after ${seconds} s (exit ${code}); the end of its output:`);
    for (const line of tail) log(`      ${line}`);
    return null;
  }
  const results: unknown = JSON.parse(readFileSync(resultsFile, 'utf8'));
  writeFileSync(join(outDir, `${name}.json`), `${JSON.stringify(results, null, 2)}\n`);
  const figure = (path: string, digits: number, sign = '') => {
    const value = pick(results, path);
    return value === undefined ? 'n/a' : `${sign && value >= 0 ? sign : ''}${value.toFixed(digits)}`;
  };
  log(
    `    ${seconds} s: gateway ${figure('throughput.gatewayRps', 0)} req/s (ratio ${figure('throughput.ratio', 3)}), ` +
      `${figure('throughput.gatewayCpuPerRequestUs', 0)} µs CPU per request, added p50 ${figure('latency.addedP50Ms', 3, '+')} ms, ` +
      `paced TTFT ${figure('pacedStreams.addedP50Ms', 3, '+')} ms`,
  );
  return results;
}

// ---- The session -----------------------------------------------------------------------------------

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '5' },
      vs: { type: 'string' },
      a: { type: 'string', multiple: true },
      b: { type: 'string', multiple: true },
      env: { type: 'string', multiple: true },
      'label-a': { type: 'string' },
      'label-b': { type: 'string' },
      out: { type: 'string' },
    },
    strict: true,
  });
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1) usage(`--runs ${values.runs}: expected a whole number, 1 or more`);
  const common = environment(values.env, '--env');
  const envA = environment(values.a, '--a');
  const envB = environment(values.b, '--b');
  const twoSides = values.vs !== undefined || values.b !== undefined;

  const head = git(['rev-parse', '--short', 'HEAD']);
  const changed = git(['status', '--porcelain', '--untracked-files=no']) !== '';
  const here = `this checkout (${head}${changed ? ' + changes' : ''})`;
  const sides: RunSide[] = [];
  const envLabel = (env: Record<string, string>, fallback: string) => (Object.keys(env).length > 0 ? describe(env) : fallback);
  const side = (key: 'a' | 'b', label: string, cwd: string, env: Record<string, string>): RunSide => ({ key, label, cwd, env, runs: [], failures: 0 });
  if (values.vs !== undefined) {
    const { dir, commit } = checkout(values.vs);
    const extra = (env: Record<string, string>) => (Object.keys(env).length > 0 ? `, ${describe(env)}` : '');
    sides.push(side('a', values['label-a'] ?? `${here}${extra(envA)}`, REPO_ROOT, envA));
    sides.push(side('b', values['label-b'] ?? `${values.vs} (${commit.slice(0, 7)})${extra(envB)}`, dir, envB));
  } else {
    sides.push(side('a', values['label-a'] ?? envLabel(envA, here), REPO_ROOT, envA));
    if (twoSides) sides.push(side('b', values['label-b'] ?? envLabel(envB, here), REPO_ROOT, envB));
  }

  const outDir = values.out ?? join(REPO_ROOT, 'bench', 'runs', new Date().toISOString().replace(/[:.]/g, '-'));
  mkdirSync(outDir, { recursive: true });
  const order: RunSide[] = [];
  for (let i = 0; i < runs; i++) order.push(...(sides.length === 1 || i % 2 === 0 ? sides : [...sides].reverse()));

  log(`bench:runs  ${order.length} whole runs of npm run bench${sides.length === 2 ? ', alternating a b b a …' : ''}`);
  for (const s of sides) log(`  ${s.key}  ${s.label}${s.cwd === REPO_ROOT ? '' : `  (worktree ${s.cwd})`}`);
  if (Object.keys(common).length > 0) log(`  both: ${describe(common)}`);
  log(`  output: ${relative(process.cwd(), outDir) || '.'}`);
  log();
  for (const [index, s] of order.entries()) {
    const name = `${String(index + 1).padStart(2, '0')}-${s.key}`;
    log(`  run ${index + 1}/${order.length}  ${s.key}  ${s.label}  (${new Date().toISOString().slice(11, 19)} UTC)`);
    const results = await runOnce(s, common, outDir, name);
    if (results === null) s.failures += 1;
    else s.runs.push(results);
  }

  const rows = summarize(FIGURES, sides);
  const failures = sides.filter((s) => s.failures > 0).map((s) => `${s.key}: ${s.failures} failed`);
  log();
  log(`Medians over the runs, with the range (min–max)${failures.length > 0 ? `; ${failures.join(', ')}` : ''}`);
  log();
  for (const line of summaryLines(rows, sides)) log(`  ${line}`);
  log();
  const markdown = markdownTable(rows, sides);
  log(markdown);
  writeFileSync(join(outDir, 'summary.md'), `${markdown}\n`);
  writeFileSync(
    join(outDir, 'summary.json'),
    `${JSON.stringify(
      {
        sides: sides.map((s) => ({ key: s.key, label: s.label, env: s.env, runs: s.runs.length, failures: s.failures })),
        common,
        figures: rows.map((row) => ({ figure: row.figure.label, unit: row.figure.unit, bySide: row.bySide })),
      },
      null,
      2,
    )}\n`,
  );
  log();
  log(`  written: ${relative(process.cwd(), join(outDir, 'summary.md'))}, summary.json and each run's results and output`);
}

/** Stops the running bench (its whole process group) and removes the temporary worktree. */
function stopEverything(): void {
  if (running?.pid && running.exitCode === null) {
    try {
      process.kill(-running.pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  removeWorktree();
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    stopEverything();
    process.exit(130);
  });
}

main().then(
  () => {
    removeWorktree();
    process.exit(0);
  },
  (error: unknown) => {
    process.stderr.write(`bench:runs failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    stopEverything();
    process.exit(1);
  },
);

/**
 * The apps proxy beside the bare pass-through floor, in one run: `npx tsx bench/apps-proxy.ts`, and
 * the second part of `BENCH_ONLY=apps npm run bench` (bench/gateway-overhead.ts calls
 * measureAppsProxy after the deploy figures).
 *
 * Four processes: this one (the load generator), the fake upstream (bench/upstream-process.ts), the
 * bare pass-through (bench/bare-proxy-process.ts, the floor: Node's HTTP server and client and
 * nothing else) and the apps proxy (bench/apps-proxy-process.ts: the service's own proxy module,
 * routing by Host, request id, forwarding headers, an undici pool, one batched row per request,
 * written to a database as BENCH_APPS_ROWS says: embedded PGlite by default, PostgreSQL with
 * BENCH_DATABASE_URL, or `none` for a sink). Both proxies are compiled as a deployment would be and
 * run with plain node, and both are sent the same request (the fake's chat completion, JSON) with
 * the same Host header.
 *
 * Throughput: autocannon at 32 connections for ROUND_S seconds on each, alternating which goes
 * first, ROUNDS times; the figure is the median round, with the CPU each proxy process used per
 * request (from /proc, the figure a busy machine disturbs least). Latency: a sequential undici
 * client (one keep-alive connection) alternating one request to each, LATENCY_N each per round; p50
 * of all. Done means the proxy reaches 0.8 of the floor's throughput and its p50 is within 0.1 ms of it.
 *
 * BENCH_ROUNDS, BENCH_ROUND_S and BENCH_LATENCY_N override the defaults. BENCH_PROFILE=1 CPU-profiles the
 * apps proxy process over its whole run (idle while the floor is measured) and prints where its busy
 * time went.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from 'undici';
import { dropSchema } from '../test/helpers/pg-schemas.ts';
import { bundleForNode } from './bundle.ts';
import { type ChildMessage, isChildMessage } from './ipc.ts';
import { processCpuSeconds } from './process-cpu.ts';
import { printProfileSummary, summarizeProfile } from './profile-summary.ts';
import { median } from './run-statistics.ts';

const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = join(BENCH_DIR, '..');
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const ROUND_S = Number(process.env.BENCH_ROUND_S ?? 5);
const LATENCY_N = Number(process.env.BENCH_LATENCY_N ?? 1000);
const CONNECTIONS = 32;
const PROFILE = process.env.BENCH_PROFILE === '1';
const PROFILE_FILE = join(BENCH_DIR, 'profiles', `apps-proxy-${new Date().toISOString().replace(/[:.]/g, '-')}.cpuprofile`);
const BENCH_APP = 'bench';
const HOST = `${BENCH_APP}.localhost`;
const PATH = '/v1/chat/completions';
const BODY = JSON.stringify({
  model: 'bench-model',
  messages: [
    { role: 'system', content: 'You are a concise assistant for a developer tools company. Answer in at most two sentences.' },
    { role: 'user', content: 'What is the difference between a process and a thread? Give one example of when to use each.' },
  ],
  max_tokens: 128,
});
const HEADERS = { host: HOST, 'content-type': 'application/json', authorization: 'Bearer bench' };

type Log = (line: string) => void;

export const APPS_PROXY_GOALS = { throughputRatio: 0.8, addedP50Ms: 0.1 };

/** Where the proxy's request rows go (BENCH_APPS_ROWS; PostgreSQL when BENCH_DATABASE_URL is set). */
export type RowStore = 'pglite' | 'postgres' | 'none';

export interface ProxyTarget {
  /** requests/s of each round at CONNECTIONS connections. */
  rps: number[];
  /** The median round. */
  medianRps: number;
  /** CPU of the proxy's process per request, µs, median over the rounds. */
  cpuPerRequestUs: number;
  p50Ms: number;
}

export interface AppsProxyFigures {
  rows: RowStore;
  rounds: number;
  roundSeconds: number;
  latencyRequests: number;
  floor: ProxyTarget;
  proxy: ProxyTarget;
  /** proxy / floor, of the median rounds. */
  throughputRatio: number;
  /** proxy p50 − floor p50. */
  addedP50Ms: number;
}

interface AutocannonResult {
  requests: { average: number; total: number };
  errors: number;
  timeouts: number;
  non2xx: number;
}
const autocannon = createRequire(import.meta.url)('autocannon') as (options: Record<string, unknown>) => PromiseLike<AutocannonResult>;

interface Started {
  url: string;
  child: ChildProcess;
}

function start(name: string, entry: string[], env: Record<string, string>, children: ChildProcess[]): Promise<Started> {
  const child = spawn(process.execPath, entry, {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env, NODE_ENV: 'production' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.on('message', (message: unknown) => {
      if (!isChildMessage(message)) return;
      const m = message as ChildMessage;
      if (m.type === 'ready') resolve({ url: m.url, child });
      if (m.type === 'error') reject(new Error(`${name}: ${m.message}`));
    });
    child.on('exit', (code) => reject(new Error(`${name} exited (${code})`)));
  });
}

/** Asks each child to stop and waits for it (the apps proxy writes its queued rows first); SIGKILL after graceMs. */
async function stopAll(children: ChildProcess[], graceMs = 30_000): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      if (child.connected) child.send({ type: 'shutdown' });
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    }),
  );
}

/** node's own profiler for the apps proxy child when BENCH_PROFILE=1: written when it exits. */
function profileFlags(): string[] {
  return PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${dirname(PROFILE_FILE)}`, `--cpu-prof-name=${basename(PROFILE_FILE)}`] : [];
}

async function compiled(name: string): Promise<string[]> {
  return [await bundleForNode(join(BENCH_DIR, `${name}.ts`), join(BENCH_DIR, '.build', name))];
}

/** One round at CONNECTIONS connections: requests/s, and the proxy process's CPU per request. */
async function throughput(origin: string, pid: number): Promise<{ rps: number; cpuUs: number }> {
  const cpuBefore = processCpuSeconds(pid);
  const request = { url: origin + PATH, method: 'POST', headers: HEADERS, body: BODY };
  const result = await autocannon({ ...request, connections: CONNECTIONS, duration: ROUND_S, timeout: 10 });
  const cpuUs = ((processCpuSeconds(pid) - cpuBefore) * 1e6) / Math.max(1, result.requests.total);
  const bad = result.errors + result.timeouts + result.non2xx;
  if (bad > 0) throw new Error(`${origin}: ${bad} failed requests under load`);
  return { rps: result.requests.average, cpuUs };
}

async function timed(client: Client): Promise<number> {
  const started = performance.now();
  const response = await client.request({ path: PATH, method: 'POST', headers: HEADERS, body: BODY });
  await response.body.text();
  if (response.statusCode !== 200) throw new Error(`HTTP ${response.statusCode}`);
  return performance.now() - started;
}

/** The row store asked for: BENCH_APPS_ROWS, else PostgreSQL when BENCH_DATABASE_URL is set, else PGlite. */
export function rowStoreFromEnv(): RowStore {
  const asked = process.env.BENCH_APPS_ROWS || (process.env.BENCH_DATABASE_URL ? 'postgres' : 'pglite');
  if (asked === 'pglite' || asked === 'postgres' || asked === 'none') return asked;
  throw new Error(`BENCH_APPS_ROWS=${asked}: must be pglite, postgres or none`);
}

/** The whole measurement: starts its children, measures, and stops them however it ends. */
export async function measureAppsProxy(log: Log, rows = rowStoreFromEnv()): Promise<AppsProxyFigures> {
  const databaseUrl = process.env.BENCH_DATABASE_URL ?? '';
  if (rows === 'postgres' && !databaseUrl) throw new Error('BENCH_APPS_ROWS=postgres needs BENCH_DATABASE_URL');
  const children: ChildProcess[] = [];
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-apps-proxy-'));
  const schema = `bench_apps_proxy_${process.pid}`;
  const clients: Client[] = [];
  try {
    const upstream = await start('upstream', ['--import', 'tsx', join(BENCH_DIR, 'upstream-process.ts')], {}, children);
    const env = { BENCH_UPSTREAM_URL: upstream.url, BENCH_APP };
    const database = { BENCH_DATABASE_URL: databaseUrl, BENCH_DATABASE_SCHEMA: schema };
    const store = { BENCH_APPS_ROWS: rows, BENCH_DATA_DIR: dataDir, ...database };
    const floor = await start('bare proxy', await compiled('bare-proxy-process'), env, children);
    const proxy = await start('apps proxy', [...profileFlags(), ...(await compiled('apps-proxy-process'))], { ...env, ...store }, children);
    const targets = [floor, proxy].map((started) => {
      const client = new Client(started.url, { pipelining: 1 });
      clients.push(client);
      return { ...started, client, rps: [] as number[], cpuUs: [] as number[], ms: [] as number[] };
    });
    // Warm both (JIT, pools, the upstream's keep-alive connections).
    for (const target of targets) for (let i = 0; i < 500; i += 1) await timed(target.client);
    for (let round = 0; round < ROUNDS; round += 1) {
      const order = round % 2 === 0 ? targets : [...targets].reverse();
      for (const target of order) {
        const { rps, cpuUs } = await throughput(target.url, target.child.pid!);
        target.rps.push(rps);
        target.cpuUs.push(cpuUs);
      }
      for (let i = 0; i < LATENCY_N; i += 1) for (const target of order) target.ms.push(await timed(target.client));
      const [floorRps, proxyRps] = targets.map((target) => target.rps.at(-1)?.toFixed(0));
      log(`    round ${round + 1}: floor ${floorRps} req/s, proxy ${proxyRps} req/s`);
    }
    const figure = (t: (typeof targets)[number]): ProxyTarget => ({
      rps: t.rps.map(Math.round),
      medianRps: median(t.rps),
      cpuPerRequestUs: median(t.cpuUs),
      p50Ms: median(t.ms),
    });
    const [f, p] = [figure(targets[0]!), figure(targets[1]!)];
    return {
      rows,
      rounds: ROUNDS,
      roundSeconds: ROUND_S,
      latencyRequests: LATENCY_N,
      floor: f,
      proxy: p,
      throughputRatio: p.medianRps / f.medianRps,
      addedP50Ms: p.p50Ms - f.p50Ms,
    };
  } finally {
    await Promise.allSettled(clients.map((client) => client.close()));
    await stopAll(children);
    if (PROFILE) printProfileSummary(summarizeProfile(PROFILE_FILE), log);
    rmSync(dataDir, { recursive: true, force: true });
    if (rows === 'postgres') {
      const warn = (error: unknown) => log(`could not drop schema ${schema}: ${String(error)}`);
      await dropSchema(databaseUrl, schema).catch(warn);
    }
  }
}

const ROW_STORES: Record<RowStore, string> = {
  pglite: 'rows written to embedded PGlite on disk, in the proxy process (as npm start)',
  postgres: 'rows written to PostgreSQL (BENCH_DATABASE_URL)',
  none: 'rows built and batched, handed to a sink that stores nothing',
};

export function printAppsProxy(figures: AppsProxyFigures, log: Log): void {
  const { floor, proxy, throughputRatio, addedP50Ms } = figures;
  const mark = (ok: boolean) => (ok ? 'meets' : 'misses');
  const rounds = `median of ${figures.rounds} rounds of ${figures.roundSeconds} s, alternating`;
  log(`  apps proxy beside the bare pass-through floor (${ROW_STORES[figures.rows]})`);
  log(`    throughput at ${CONNECTIONS} connections (${rounds}):`);
  for (const [name, target] of [
    ['floor', floor],
    ['proxy', proxy],
  ] as const) {
    const cpu = `${target.cpuPerRequestUs.toFixed(1)} µs CPU/request`;
    log(`      ${name} ${target.medianRps.toFixed(0)} req/s (${target.rps.join(', ')}), ${cpu}`);
  }
  const ratioGoal = APPS_PROXY_GOALS.throughputRatio;
  log(`      ratio ${throughputRatio.toFixed(3)}; goal ≥ ${ratioGoal}: ${mark(throughputRatio >= ratioGoal)}`);
  log(`    p50 at one connection (${figures.latencyRequests * figures.rounds} requests each, alternating):`);
  const p50Goal = APPS_PROXY_GOALS.addedP50Ms;
  const p50s = `floor ${floor.p50Ms.toFixed(3)} ms, proxy ${proxy.p50Ms.toFixed(3)} ms`;
  log(`      ${p50s}, difference ${addedP50Ms.toFixed(3)} ms; goal ≤ ${p50Goal}: ${mark(addedP50Ms <= p50Goal)}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const log = (line: string) => process.stdout.write(`${line}\n`);
  measureAppsProxy(log).then(
    (figures) => {
      printAppsProxy(figures, log);
      process.exit(0);
    },
    (error: unknown) => {
      process.stderr.write(`bench apps proxy: ${error instanceof Error ? error.stack : String(error)}\n`);
      process.exit(1);
    },
  );
}

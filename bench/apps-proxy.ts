/**
 * The apps proxy beside the bare pass-through floor, in one run: `npx tsx bench/apps-proxy.ts`.
 *
 * Four processes: this one (the load generator), the fake upstream (bench/upstream-process.ts), the
 * bare pass-through (bench/bare-proxy-process.ts, the floor: Node's HTTP server and client and
 * nothing else) and the apps proxy (bench/apps-proxy-process.ts: routing by Host, request id,
 * forwarding headers, an undici pool, one batched row per request). Both proxies are compiled as a
 * deployment would be and run with plain node, and both are sent the same request (the fake's chat
 * completion, JSON) with the same Host header.
 *
 * Throughput: autocannon at 32 connections for ROUND_S seconds on each, alternating which goes
 * first, ROUNDS times; the figure is the median round. Latency: a sequential undici client (one
 * keep-alive connection) alternating one request to each, LATENCY_N each per round; p50 of all.
 * Done means the proxy reaches 0.8 of the floor's throughput and its p50 is within 0.1 ms of it.
 *
 * BENCH_ROUNDS, BENCH_ROUND_S and BENCH_LATENCY_N override the defaults.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from 'undici';
import { bundleForNode } from './bundle.ts';
import { type ChildMessage, isChildMessage } from './ipc.ts';

const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = join(BENCH_DIR, '..');
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const ROUND_S = Number(process.env.BENCH_ROUND_S ?? 5);
const LATENCY_N = Number(process.env.BENCH_LATENCY_N ?? 1000);
const CONNECTIONS = 32;
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

interface AutocannonResult {
  requests: { average: number };
  errors: number;
  timeouts: number;
  non2xx: number;
}
const autocannon = createRequire(import.meta.url)('autocannon') as (options: Record<string, unknown>) => PromiseLike<AutocannonResult>;

const children: ChildProcess[] = [];

function start(name: string, entry: string[], env: Record<string, string>): Promise<string> {
  const child = spawn(process.execPath, entry, { cwd: REPO_ROOT, env: { ...process.env, ...env, NODE_ENV: 'production' }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.on('message', (message: unknown) => {
      if (!isChildMessage(message)) return;
      const m = message as ChildMessage;
      if (m.type === 'ready') resolve(m.url);
      if (m.type === 'error') reject(new Error(`${name}: ${m.message}`));
    });
    child.on('exit', (code) => reject(new Error(`${name} exited (${code})`)));
  });
}

async function compiled(name: string): Promise<string[]> {
  return [await bundleForNode(join(BENCH_DIR, `${name}.ts`), join(BENCH_DIR, '.build', name))];
}

async function throughput(origin: string): Promise<number> {
  const result = await autocannon({ url: origin + PATH, connections: CONNECTIONS, duration: ROUND_S, method: 'POST', headers: HEADERS, body: BODY, timeout: 10 });
  const bad = result.errors + result.timeouts + result.non2xx;
  if (bad > 0) throw new Error(`${origin}: ${bad} failed requests under load`);
  return result.requests.average;
}

async function timed(client: Client): Promise<number> {
  const started = performance.now();
  const response = await client.request({ path: PATH, method: 'POST', headers: HEADERS, body: BODY });
  await response.body.text();
  if (response.statusCode !== 200) throw new Error(`HTTP ${response.statusCode}`);
  return performance.now() - started;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] as number;
}

async function main(): Promise<void> {
  const upstream = await start('upstream', ['--import', 'tsx', join(BENCH_DIR, 'upstream-process.ts')], {});
  const env = { BENCH_UPSTREAM_URL: upstream, BENCH_APP };
  const floor = await start('bare proxy', await compiled('bare-proxy-process'), env);
  const proxy = await start('apps proxy', await compiled('apps-proxy-process'), env);
  const targets = [
    { name: 'floor', origin: floor, rps: [] as number[], ms: [] as number[], client: new Client(floor, { pipelining: 1 }) },
    { name: 'proxy', origin: proxy, rps: [] as number[], ms: [] as number[], client: new Client(proxy, { pipelining: 1 }) },
  ];
  // Warm both (JIT, pools, the upstream's keep-alive connections).
  for (const target of targets) for (let i = 0; i < 500; i += 1) await timed(target.client);
  for (let round = 0; round < ROUNDS; round += 1) {
    const order = round % 2 === 0 ? targets : [...targets].reverse();
    for (const target of order) target.rps.push(await throughput(target.origin));
    for (let i = 0; i < LATENCY_N; i += 1) for (const target of order) target.ms.push(await timed(target.client));
    const [f, p] = targets as [(typeof targets)[0], (typeof targets)[0]];
    console.log(`round ${round + 1}: floor ${f.rps.at(-1)?.toFixed(0)} req/s, proxy ${p.rps.at(-1)?.toFixed(0)} req/s`);
  }
  const [f, p] = targets as [(typeof targets)[0], (typeof targets)[0]];
  const floorRps = median(f.rps);
  const proxyRps = median(p.rps);
  const floorP50 = median(f.ms);
  const proxyP50 = median(p.ms);
  console.log(`\nthroughput at ${CONNECTIONS} connections (median of ${ROUNDS} rounds of ${ROUND_S} s):`);
  console.log(`  floor ${floorRps.toFixed(0)} req/s, apps proxy ${proxyRps.toFixed(0)} req/s, ratio ${(proxyRps / floorRps).toFixed(3)} (needs >= 0.8)`);
  console.log(`p50 at one connection (${f.ms.length} requests each, alternating):`);
  console.log(`  floor ${floorP50.toFixed(3)} ms, apps proxy ${proxyP50.toFixed(3)} ms, difference ${(proxyP50 - floorP50).toFixed(3)} ms (needs <= 0.1)`);
  for (const target of targets) await target.client.close();
}

main()
  .catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  })
  .finally(() => {
    for (const child of children) if (child.connected) child.send({ type: 'shutdown' });
  });

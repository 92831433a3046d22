/**
 * `npm run bench`: the gateway's overhead over a loopback fake OpenAI upstream.
 *
 * Four processes: this one (the load generator: autocannon and a sequential undici client), the
 * fake upstream (bench/upstream-process.ts), the gateway (bench/gateway-process.ts) and the floor
 * (bench/bare-proxy-process.ts, the thinnest Node pass-through: pipes bytes, nothing else), so each
 * has its own event loop and the gateway's RSS is its own. Every request is made three times,
 * straight to the fake, through the bare proxy and through the gateway (real `svc_live_` key, auth
 * and every kernel hook on, the `openai` provider type), interleaved so drift hits all three. The
 * gateway's cost is its difference to direct; next to it the floor's difference says how much of
 * that any Node proxy pays on this machine (a ratio to direct alone moves with how fast direct
 * happens to be):
 *
 *   1. requests/s at 32 connections (non-streamed), direct vs gateway, and their ratio; plus the CPU
 *      each process used meanwhile and the gateway's CPU time per request (the figure a busy
 *      machine disturbs least); the loaded p99 (each response's time, as autocannon reports it per
 *      response: its histogram keeps whole milliseconds only); and what this machine allows: its
 *      cores divided by the CPU per call of gateway, fake upstream and load generator together
 *   2. added latency p50/p99 at 1 connection
 *   3. added time to first token on streams (first `data:` frame with content), sent in one write
 *   4. the gateway's peak RSS (VmHWM of its process). The deployment's first start (PGlite initdb,
 *      migrations, bootstrap) runs in a separate short-lived process first and is reported apart:
 *      the measured gateway starts like every later restart, on an existing data directory.
 *   5. paced streams (bench/paced-streams.ts), what users see while a model answers: 16 at a time,
 *      each twenty content chunks 5 ms apart (the fake's own timers); added time to first token
 *      p50/p99 and CPU per stream. After the memory figure, so that one means what it meant.
 *
 * Then the other /v1 calls SDKs make most, measured the same way after chat's figures (so those
 * stay comparable with runs that had only chat):
 *   6. embeddings (a few strings, base64 as the OpenAI SDK asks): requests/s at 32 connections
 *      with CPU per request, and added latency p50/p99 at 1 connection
 *   7. a streamed Responses call (about twenty text deltas): added time to the first output event
 *      (the gateway's commit point: the first event after the announcements) and CPU per stream
 *   8. a batch of BATCH_LINES chat lines: lines per second through the batch worker (upload, create,
 *      poll until completed) next to the same calls sent live at the batch's concurrency
 *   9. an MCP tools/call (bench/tool-calls.ts): a loopback SDK-built upstream with one `echo` tool,
 *      called with the SDK's client straight and through /mcp/gateway, sequentially and
 *      TOOL_CONCURRENCY at a time: calls/s, p50/p99 and the ratio
 *  10. the web console (bench/console-load.ts): its bundle's gzipped size, and its first load in
 *      Debian's chromium (navigation start to the overview's figures shown, fresh context each time)
 * BENCH_ONLY=chat skips 6 to 10, for a side by side with a commit that has no such routes;
 * BENCH_ONLY=tools runs section 9 alone, BENCH_ONLY=console section 10 alone, BENCH_ONLY=apps the
 * apps' figures alone (push → serving, rollback, the apps proxy beside the floor); each printed,
 * results.json left as it was.
 *
 * Prints the figures with their goals and writes bench/results.json (bench/runs.ts runs this
 * several times, alternating two commits or two configurations, and prints medians and ranges).
 * BENCH_PROFILE=1 also CPU-profiles the gateway, one profile per phase (taken by the gateway
 * process itself on the parent's word, bench/phase-profiler.ts), and prints where its time goes in
 * each; its figures are inflated, so they go to bench/profiles/results.json next to the .cpuprofile files.
 * BENCH_GATEWAY_NODE_ARGS="--max-old-space-size=96" replaces the production node flags (those of `npm run start:prod`).
 * BENCH_REDIS_URL=redis://… keeps counters, leases and caches in Redis (a multi-replica setup).
 * BENCH_DATABASE_URL=postgres://… runs the gateway on PostgreSQL instead of embedded PGlite (in a
 * fresh schema, dropped afterwards), to see what the embedded database costs in memory.
 * BENCH_WORKERS=n runs the gateway as `server.workers: n` does (a cluster primary and n workers on
 * one port; needs BENCH_DATABASE_URL and BENCH_REDIS_URL): its CPU and memory are the sums over
 * all its processes, and BENCH_PROFILE profiles the first worker.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { bundleForNode } from './bundle.ts';
import { BATCH_CONCURRENCY, measureBatchThroughput } from './batch-throughput.ts';
import { grantEcho, measureToolCalls, startEchoUpstream, TOOL_CONCURRENCY, TOOL_CONCURRENT_CALLS, TOOL_SEQUENTIAL_CALLS, type ToolCallFigures } from './tool-calls.ts';
import { median, percentile } from './run-statistics.ts';
import { CHROMIUM } from '../tools/chromium.ts';
import { type ConsoleLoad, buildConsoleBundle, consoleSignIn, CONSOLE_GOALS, CONSOLE_LOADS, measureConsoleLoad } from './console-load.ts';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Client, Pool } from 'undici';
import { readSse } from '../providers/http/sse-reader.ts';
import { generateToken, SESSION_PREFIX } from '../core/identity/api-tokens.ts';
import { dropSchema } from '../test/helpers/pg-schemas.ts';
import { isChildMessage, type ChildMessage, type ParentMessage } from './ipc.ts';
import { carriesContent, PACED_CONCURRENCY, PACED_CONTENT_CHUNKS, PACED_INTERVAL_MS, PACED_MODEL, runConcurrently, timedPacedStream } from './paced-streams.ts';
import { printProfileSummary, summarizeProfile } from './profile-summary.ts';
import { CLOCK_TICKS_PER_S, processCpuSeconds } from './process-cpu.ts';

// ---- Settings (every loop below is bounded by one of these) ---------------------------------------

const MODEL = 'gpt-4o-mini';
const EMBEDDING_MODEL = 'text-embedding-3-small';
const CONNECTIONS = 32;
const THROUGHPUT_WARMUP_S = 3;
/** Direct and gateway are measured alternately, this many rounds of this many seconds each. */
const THROUGHPUT_ROUNDS = 2;
const THROUGHPUT_ROUND_S = 6;
const LATENCY_WARMUP = 300;
const LATENCY_REQUESTS = 3_000;
const TTFT_WARMUP = 50;
const TTFT_STREAMS = 400;
/** Paced streams: warm-up per target, then rounds alternating the targets (order rotated each round). */
const PACED_WARMUP = 48;
const PACED_ROUNDS = 4;
const PACED_STREAMS_PER_ROUND = 200;
const REQUEST_TIMEOUT_MS = 10_000;
/** Embeddings latency: fewer requests than chat's, enough for a p99. */
const EMBEDDINGS_LATENCY_WARMUP = 100;
const EMBEDDINGS_LATENCY_REQUESTS = 1_000;
/**
 * `BENCH_ONLY=chat`: chat's sections alone (a commit without /v1/embeddings and /v1/responses);
 * `BENCH_ONLY=tools`: the tool calls' section alone; `BENCH_ONLY=console`: the console's alone;
 * `BENCH_ONLY=apps`: apps' figures alone: push → serving and rollback (bench/apps-deploy.ts), then
 * the apps proxy beside the bare pass-through floor (bench/apps-proxy.ts); not in `all`: it needs
 * bwrap, git and minutes of builds.
 */
const ONLY = process.env.BENCH_ONLY || 'all';
if (!['all', 'chat', 'tools', 'console', 'apps'].includes(ONLY)) throw new Error(`BENCH_ONLY=${ONLY}: must be chat, tools, console or apps (or unset for every section)`);
const BREADTH = ONLY === 'all';
/** The progress lines' count: chat's four measuring phases, and the four after them. */
const PHASES = BREADTH ? 9 : 4;
/** Lines of section 7's batch. */
const BATCH_LINES = 500;
/** The whole run, start-up included, is cut off after this (the sections after chat's take up to 3 more minutes; apps' builds up to 20). */
const HARD_LIMIT_MS = ONLY === 'apps' ? 1_200_000 : BREADTH ? 480_000 : 240_000;

const GOALS = { ratio: 0.2, addedP50Ms: 0.4, addedTtftMs: 1, peakRssMiB: 150 };

const PROFILE = process.env.BENCH_PROFILE === '1';
const DATABASE_URL = process.env.BENCH_DATABASE_URL || null;
/** Counters, leases and caches in Redis (a multi-replica deployment) instead of in memory. */
const REDIS_URL = process.env.BENCH_REDIS_URL || null;
/**
 * `server.workers` of the gateway: n processes on one port behind a cluster primary. More than one
 * needs what the service needs for it, PostgreSQL and Redis; BENCH_WORKERS=2 with them is two
 * replicas behind one port.
 */
const WORKERS = Number(process.env.BENCH_WORKERS || '1');
/** A setting the run cannot go on with: said in one line, before any process starts. */
function refuse(message: string): never {
  process.stderr.write(`bench: ${message}\n`);
  process.exit(2);
}
if (!Number.isInteger(WORKERS) || WORKERS < 1) refuse(`BENCH_WORKERS=${process.env.BENCH_WORKERS}: must be a whole number of processes, 1 or more`);
if (WORKERS > 1 && (!DATABASE_URL || !REDIS_URL)) {
  refuse(`BENCH_WORKERS=${WORKERS}: several gateway processes share PostgreSQL and Redis (the service refuses otherwise): set BENCH_DATABASE_URL and BENCH_REDIS_URL`);
}
const DATABASE_SCHEMA = `bench_${Date.now().toString(36)}_${process.pid}`;
const BENCH_DIR = fileURLToPath(new URL('.', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
/**
 * The production flags: whatever `npm run start:prod` passes to node (package.json), so the bench
 * runs what production runs. BENCH_GATEWAY_NODE_ARGS replaces them.
 */
const PRODUCTION_NODE_ARGS = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts['start:prod']!.split(/\s+/).filter((word) =>
  word.startsWith('--'),
);
const GATEWAY_NODE_ARGS = process.env.BENCH_GATEWAY_NODE_ARGS === undefined ? PRODUCTION_NODE_ARGS : process.env.BENCH_GATEWAY_NODE_ARGS.split(/\s+/).filter(Boolean);
const PROFILE_DIR = join(BENCH_DIR, 'profiles');
/** Functions listed per phase profile (by self time; twice as many by inclusive time). */
const PROFILE_TOP = 15;
/** A profiled run's figures are inflated: they go next to the profile, not over the real results. */
const RESULTS_FILE = PROFILE ? join(PROFILE_DIR, 'results.json') : join(BENCH_DIR, 'results.json');

/** A small, realistic chat request: system prompt, one user turn, a few sampling fields. */
const CHAT_BODY = {
  model: MODEL,
  messages: [
    { role: 'system', content: 'You are a concise assistant for a developer tools company. Answer in at most two sentences.' },
    { role: 'user', content: 'What is the difference between a process and a thread? Give one example of when to use each.' },
  ],
  max_tokens: 128,
  temperature: 0.7,
  user: 'bench-user-42',
};
const JSON_BODY = JSON.stringify(CHAT_BODY);
const STREAM_BODY = JSON.stringify({ ...CHAT_BODY, stream: true, stream_options: { include_usage: true } });
/** The same streamed call to the model the fake answers with paced chunks. */
const PACED_STREAM_BODY = JSON.stringify({ ...CHAT_BODY, model: PACED_MODEL, stream: true, stream_options: { include_usage: true } });
const CHAT_PATH = '/v1/chat/completions';

/** A request the bench sends over and over: where to, and the JSON body. */
interface BenchRequest {
  path: string;
  body: string;
}
const CHAT_JSON: BenchRequest = { path: CHAT_PATH, body: JSON_BODY };

/** A typical embeddings call: a few passages of a document, base64 as the OpenAI SDK asks by default. */
const EMBEDDINGS_BODY = {
  model: EMBEDDING_MODEL,
  input: [
    'Processes have separate address spaces; a crash in one does not corrupt another.',
    'Threads of one process share its memory, so they communicate cheaply but need locks.',
    'Use a process per tenant for isolation and a thread pool for CPU-bound work inside it.',
    'Node.js runs JavaScript on one thread and hands blocking I/O to a small pool of workers.',
  ],
  encoding_format: 'base64',
};
const EMBEDDINGS_JSON: BenchRequest = { path: '/v1/embeddings', body: JSON.stringify(EMBEDDINGS_BODY) };

/** A streamed Responses call as the Vercel AI SDK makes it: instructions and one user message. */
const RESPONSES_STREAM_BODY = {
  model: MODEL,
  instructions: CHAT_BODY.messages[0]!.content,
  input: [{ role: 'user', content: [{ type: 'input_text', text: CHAT_BODY.messages[1]!.content }] }],
  max_output_tokens: 128,
  temperature: 0.7,
  stream: true,
};
const RESPONSES_STREAM: BenchRequest = { path: '/v1/responses', body: JSON.stringify(RESPONSES_STREAM_BODY) };
/** The events a response opens with before any output; the first other one is the gateway's commit point. */
const RESPONSES_ANNOUNCEMENTS = new Set(['response.created', 'response.queued', 'response.in_progress']);

// ---- autocannon (untyped CommonJS) ------------------------------------------------------------------

interface AutocannonHistogram {
  average: number;
  mean: number;
  p50: number;
  p99: number;
  total: number;
}
interface AutocannonResult {
  requests: AutocannonHistogram;
  latency: AutocannonHistogram;
  duration: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  '2xx': number;
  statusCodeStats: Record<string, { count: number }>;
}
interface AutocannonOptions {
  url: string;
  connections: number;
  duration: number;
  method: 'POST';
  headers: Record<string, string>;
  body: string;
  timeout: number;
}
/** A running load: awaitable for its result, and an emitter of each response (its time in fractional ms). */
interface AutocannonRun extends PromiseLike<AutocannonResult> {
  on(event: 'response', listener: (client: unknown, statusCode: number, bytes: number, responseTimeMs: number) => void): void;
}
const autocannon = createRequire(import.meta.url)('autocannon') as (options: AutocannonOptions) => AutocannonRun;

// ---- Child processes --------------------------------------------------------------------------------

interface Child {
  name: string;
  process: ChildProcess;
  /** Log lines about clients that went away mid-request (counted, not printed). */
  clientGoneLogs: number;
  next(type: ChildMessage['type'], timeoutMs: number): Promise<ChildMessage>;
}

const children: Child[] = [];

/**
 * autocannon closes its sockets with requests still in flight when a phase ends; the gateway logs
 * each of those (ClientGoneError). They are expected, so they are counted instead of printed.
 */
const CLIENT_GONE_LINE = /"ClientGoneError"|client disconnected/;

/**
 * The gateway (and the bare proxy beside it) run as a deployment would: compiled as `npm run build`
 * does (one entry file, and a chunk for each module imported on use, so a driver the config does
 * not choose is never loaded) and started with plain node, so no TypeScript loader thread sits in
 * their memory.
 */
async function buildChild(name: 'gateway-process' | 'bare-proxy-process'): Promise<string> {
  return bundleForNode(join(BENCH_DIR, `${name}.ts`), join(BENCH_DIR, '.build', name));
}

function startChild(name: string, file: string, env: Record<string, string>, nodeArgs: string[] = []): Child {
  const entry = file.endsWith('.mjs') ? [file] : ['--import', 'tsx', join(BENCH_DIR, file)];
  const child = spawn(process.execPath, [...nodeArgs, ...entry], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env, NODE_ENV: 'production' },
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  createInterface({ input: child.stdout! }).on('line', (line) => {
    if (CLIENT_GONE_LINE.test(line)) handle.clientGoneLogs += 1;
    else process.stdout.write(`  [${name}] ${line}\n`);
  });
  const inbox: ChildMessage[] = [];
  const waiters: Array<() => void> = [];
  let exited: string | null = null;
  child.on('message', (message) => {
    if (!isChildMessage(message)) return;
    inbox.push(message);
    for (const wake of waiters.splice(0)) wake();
  });
  child.on('exit', (code, signal) => {
    exited = `${name} exited (code ${code}, signal ${signal})`;
    for (const wake of waiters.splice(0)) wake();
  });
  const handle: Child = {
    name,
    process: child,
    clientGoneLogs: 0,
    async next(type, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const index = inbox.findIndex((m) => m.type === type || m.type === 'error');
        if (index !== -1) {
          const [message] = inbox.splice(index, 1);
          if (message!.type === 'error') throw new Error(`${name}: ${message!.message}`);
          return message!;
        }
        if (exited) throw new Error(exited);
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`${name}: no '${type}' message within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
  };
  children.push(handle);
  return handle;
}

function send(child: Child, message: ParentMessage): void {
  if (child.process.connected) child.process.send(message);
}

/** Ask politely (so --cpu-prof can write its file), then SIGKILL whatever is still running. */
async function stopChildren(graceMs = 8_000): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      const proc = child.process;
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
      send(child, { type: 'shutdown' });
      const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    }),
  );
}

/** Temporary directories to remove however the run ends. */
const scratch: string[] = [];

/** The last resort (failure, signal, time limit): SIGKILL the children, drop the scratch files. */
function killChildrenNow(): void {
  for (const child of children) {
    if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGKILL');
  }
  for (const dir of scratch.splice(0)) rmSync(dir, { recursive: true, force: true });
}

// ---- A gateway CPU profile per phase (BENCH_PROFILE=1) ---------------------------------------------

interface PhaseProfile {
  phase: string;
  file: string;
  /** Calls the gateway answered during the phase, when the phase counts them: for a cost per call. */
  gatewayCalls: number | null;
}
const phaseProfiles: PhaseProfile[] = [];
/** The gateway child, once it runs, when profiling: it profiles itself on command. */
let profiledGateway: Child | null = null;
const PROFILE_STAMP = new Date().toISOString().replace(/[:.]/g, '-');

/** Runs a phase's measured part inside its own gateway profile (just the work when not profiling). */
async function profiled<T>(phase: string, gatewayCalls: (() => number) | null, work: () => Promise<T>): Promise<T> {
  const child = profiledGateway;
  if (!child) return work();
  send(child, { type: 'profile-start' });
  await child.next('profile-started', 10_000);
  const value = await work();
  const file = join(PROFILE_DIR, `gateway-${PROFILE_STAMP}-${phase.replace(/\W+/g, '-')}.cpuprofile`);
  send(child, { type: 'profile-stop', file });
  await child.next('profile-written', 60_000);
  phaseProfiles.push({ phase, file, gatewayCalls: gatewayCalls?.() ?? null });
  return value;
}

// ---- Memory of the gateway process ------------------------------------------------------------------

/**
 * A /proc/<pid>/status figure summed over the gateway's processes (one, or a primary and its
 * BENCH_WORKERS workers); null when none can be read. Summed peaks (VmHWM) bound the peak of the
 * sum from above.
 */
function procStatusKiB(pids: number[], field: 'VmRSS' | 'VmHWM'): number | null {
  let total: number | null = null;
  for (const pid of pids) {
    try {
      const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (match) total = (total ?? 0) + Number(match[1]);
    } catch {
      // gone: counts nothing
    }
  }
  return total;
}

class RssSampler {
  maxKiB = 0;
  lastHwmKiB = 0;
  private timer: NodeJS.Timeout | null = null;
  constructor(private readonly pid: number[]) {}
  start(everyMs = 100): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), everyMs);
    this.timer.unref();
  }
  sample(): void {
    const rss = procStatusKiB(this.pid, 'VmRSS');
    if (rss !== null) this.maxKiB = Math.max(this.maxKiB, rss);
    const hwm = procStatusKiB(this.pid, 'VmHWM');
    if (hwm !== null) this.lastHwmKiB = Math.max(this.lastHwmKiB, hwm);
  }
  stop(): void {
    this.sample();
    if (this.timer) clearInterval(this.timer);
  }
}

// ---- CPU accounting ---------------------------------------------------------------------------------

interface CpuShares {
  /** CPU used by each process during the window, as a share of one core (1 = one full core). */
  gateway: number;
  proxy: number;
  upstream: number;
  loadGenerator: number;
  /** Every process on the machine (from /proc/stat), in cores; above the sum of ours means other work competed. */
  machine: number;
}

function machineBusySeconds(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = line;
  return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS_PER_S;
}

/** The processes measured: the gateway's (its primary and workers with BENCH_WORKERS), the floor's, the fake's. */
type Pids = { gateway: number[]; proxy: number; upstream: number };

/** Runs `work` and reports the CPU each process (and the machine) used meanwhile. */
async function withCpu<T>(pids: Pids, work: () => Promise<T>): Promise<{ value: T; cpu: CpuShares; seconds: number }> {
  const before = {
    gateway: processCpuSeconds(pids.gateway),
    proxy: processCpuSeconds(pids.proxy),
    upstream: processCpuSeconds(pids.upstream),
    self: process.cpuUsage(),
    machine: machineBusySeconds(),
  };
  const started = performance.now();
  const value = await work();
  const seconds = (performance.now() - started) / 1000;
  const self = process.cpuUsage(before.self);
  return {
    value,
    seconds,
    cpu: {
      gateway: (processCpuSeconds(pids.gateway) - before.gateway) / seconds,
      proxy: (processCpuSeconds(pids.proxy) - before.proxy) / seconds,
      upstream: (processCpuSeconds(pids.upstream) - before.upstream) / seconds,
      loadGenerator: (self.user + self.system) / 1e6 / seconds,
      machine: (machineBusySeconds() - before.machine) / seconds,
    },
  };
}

// ---- Measurement helpers ----------------------------------------------------------------------------

function stats(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  const mean = sorted.reduce((sum, x) => sum + x, 0) / (sorted.length || 1);
  return { n: sorted.length, mean, p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99), max: sorted[sorted.length - 1] ?? NaN };
}

interface Target {
  name: 'direct' | 'proxy' | 'gateway';
  origin: string;
  headers: Record<string, string>;
  client: Client;
}

function makeTarget(name: Target['name'], origin: string, bearer: string): Target {
  return {
    name,
    origin,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${bearer}` },
    // one keep-alive connection, no pipelining: a plain sequential client
    client: new Client(origin, { pipelining: 1, keepAliveTimeout: 60_000, headersTimeout: REQUEST_TIMEOUT_MS, bodyTimeout: REQUEST_TIMEOUT_MS }),
  };
}

/** One non-streamed call; milliseconds until the whole body was read. */
async function timedJson(target: Target, request: BenchRequest): Promise<number> {
  const started = performance.now();
  const response = await target.client.request({ path: request.path, method: 'POST', headers: target.headers, body: request.body });
  const text = await response.body.text();
  const elapsed = performance.now() - started;
  if (response.statusCode !== 200) throw new Error(`${target.name}: ${request.path} HTTP ${response.statusCode}: ${text.slice(0, 300)}`);
  return elapsed;
}

const timedCompletion = (target: Target) => timedJson(target, CHAT_JSON);
const timedEmbeddings = (target: Target) => timedJson(target, EMBEDDINGS_JSON);

/** One streamed completion; milliseconds until the first `data:` frame carrying content. */
async function timedStream(target: Target): Promise<number> {
  const started = performance.now();
  const response = await target.client.request({ path: CHAT_PATH, method: 'POST', headers: target.headers, body: STREAM_BODY });
  if (response.statusCode !== 200) throw new Error(`${target.name}: stream HTTP ${response.statusCode}: ${(await response.body.text()).slice(0, 300)}`);
  const decoder = new TextDecoder();
  let buffer = '';
  let ttft = -1;
  let done = false;
  for await (const chunk of response.body) {
    buffer += decoder.decode(chunk as Uint8Array, { stream: true });
    for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') done = true;
        else if (ttft < 0 && carriesContent(data)) ttft = performance.now() - started;
      }
    }
  }
  if (ttft < 0) throw new Error(`${target.name}: the stream carried no content`);
  if (!done) throw new Error(`${target.name}: the stream ended without [DONE]`);
  return ttft;
}

/**
 * One streamed Responses call, read to its end; milliseconds until the first output event (the
 * first after `response.created`/`in_progress`: what the gateway commits on), and the number of
 * text deltas, so a stream cut short cannot pass for a fast one.
 */
async function timedResponsesStream(target: Target): Promise<{ firstOutputMs: number; textDeltas: number }> {
  const started = performance.now();
  const response = await target.client.request({ path: RESPONSES_STREAM.path, method: 'POST', headers: target.headers, body: RESPONSES_STREAM.body });
  if (response.statusCode !== 200) throw new Error(`${target.name}: responses stream HTTP ${response.statusCode}: ${(await response.body.text()).slice(0, 300)}`);
  let firstOutputMs = -1;
  let textDeltas = 0;
  let completed = false;
  for await (const { event } of readSse(response.body as AsyncIterable<Uint8Array>)) {
    if (firstOutputMs < 0 && event !== undefined && !RESPONSES_ANNOUNCEMENTS.has(event)) firstOutputMs = performance.now() - started;
    if (event === 'response.output_text.delta') textDeltas += 1;
    else if (event === 'response.completed') completed = true;
  }
  if (firstOutputMs < 0 || textDeltas === 0) throw new Error(`${target.name}: the response stream carried no output`);
  if (!completed) throw new Error(`${target.name}: the response stream ended without response.completed`);
  return { firstOutputMs, textDeltas };
}

/** Interleaves the targets request by request (the order rotated each time), so drift hits all of them. */
async function alternate<T>(targets: Target[], count: number, once: (target: Target) => Promise<T>) {
  const samples = { direct: [] as T[], proxy: [] as T[], gateway: [] as T[] };
  for (let i = 0; i < count; i++) {
    for (let j = 0; j < targets.length; j++) {
      const target = targets[(i + j) % targets.length]!;
      samples[target.name].push(await once(target));
    }
  }
  return samples;
}

/** `latencies`: where each response's time goes (ms, fractional), for percentiles finer than autocannon's whole ms. */
async function load(target: Target, durationS: number, request: BenchRequest = CHAT_JSON, latencies?: number[]): Promise<AutocannonResult> {
  const run = autocannon({
    url: target.origin + request.path,
    connections: CONNECTIONS,
    duration: durationS,
    method: 'POST',
    headers: target.headers,
    body: request.body,
    timeout: REQUEST_TIMEOUT_MS / 1000,
  });
  if (latencies) run.on('response', (_client, _status, _bytes, responseTimeMs) => latencies.push(responseTimeMs));
  const result = await run;
  const bad = result.non2xx + result.errors + result.timeouts;
  if (bad > 0) {
    throw new Error(
      `${target.name}: ${bad} failed ${request.path} requests under load (non-2xx ${result.non2xx}, errors ${result.errors}, timeouts ${result.timeouts}; status codes ${JSON.stringify(result.statusCodeStats)})`,
    );
  }
  return result;
}

type CpuRow = { cpu: CpuShares; seconds: number; requests: number };

function meanCpu(rows: Array<{ cpu: CpuShares }>): CpuShares {
  return {
    gateway: rows.reduce((sum, r) => sum + r.cpu.gateway, 0) / rows.length,
    proxy: rows.reduce((sum, r) => sum + r.cpu.proxy, 0) / rows.length,
    upstream: rows.reduce((sum, r) => sum + r.cpu.upstream, 0) / rows.length,
    loadGenerator: rows.reduce((sum, r) => sum + r.cpu.loadGenerator, 0) / rows.length,
    machine: rows.reduce((sum, r) => sum + r.cpu.machine, 0) / rows.length,
  };
}

/** CPU one process spent per request answered: the overhead figure least disturbed by a noisy machine. */
function perRequestUs(rows: CpuRow[], who: 'gateway' | 'proxy' | 'upstream' | 'loadGenerator'): number {
  return (1e6 * rows.reduce((sum, r) => sum + r.cpu[who] * r.seconds, 0)) / rows.reduce((sum, r) => sum + r.requests, 0);
}

const rps = (results: AutocannonResult[]) => results.reduce((sum, r) => sum + r['2xx'] / r.duration, 0) / results.length;
const meanLatency = (results: AutocannonResult[]) => results.reduce((sum, r) => sum + r.latency.mean, 0) / results.length;

/**
 * What this machine allows a proxy: its cores divided by the CPU one call costs every process
 * involved (the proxy, the fake upstream, the load generator, each measured in the proxy's own
 * rounds), in calls per second; and the proxy's measured throughput as a share of that.
 */
function machineAllows(rows: CpuRow[], proxy: 'gateway' | 'proxy', measuredRps: number) {
  const cpuPerCallUs = { own: perRequestUs(rows, proxy), upstream: perRequestUs(rows, 'upstream'), loadGenerator: perRequestUs(rows, 'loadGenerator') };
  const totalUs = cpuPerCallUs.own + cpuPerCallUs.upstream + cpuPerCallUs.loadGenerator;
  const callsPerSecond = (os.availableParallelism() * 1e6) / totalUs;
  return { cpuPerCallUs: { ...cpuPerCallUs, total: totalUs }, callsPerSecond, share: measuredRps / callsPerSecond };
}

/**
 * Warm-up for each target, then rounds alternating between them, with the CPU each process used
 * and every response's time; `phase` names the rounds' gateway profile (BENCH_PROFILE=1).
 */
async function measureThroughput(targets: Target[], pids: Pids, request: BenchRequest, phase: string) {
  for (const target of targets) await load(target, THROUGHPUT_WARMUP_S, request);
  const rounds = { direct: [] as AutocannonResult[], proxy: [] as AutocannonResult[], gateway: [] as AutocannonResult[] };
  const cpu = { direct: [] as CpuRow[], proxy: [] as CpuRow[], gateway: [] as CpuRow[] };
  const latencies = { direct: [] as number[], proxy: [] as number[], gateway: [] as number[] };
  const gatewayCalls = () => rounds.gateway.reduce((sum, r) => sum + r['2xx'], 0);
  await profiled(phase, gatewayCalls, async () => {
    for (let round = 0; round < THROUGHPUT_ROUNDS; round++) {
      for (const target of targets) {
        const measured = await withCpu(pids, () => load(target, THROUGHPUT_ROUND_S, request, latencies[target.name]));
        rounds[target.name].push(measured.value);
        cpu[target.name].push({ cpu: measured.cpu, seconds: measured.seconds, requests: measured.value['2xx'] });
      }
    }
  });
  const directRps = rps(rounds.direct);
  const proxyRps = rps(rounds.proxy);
  const gatewayRps = rps(rounds.gateway);
  const loadedP99 = { direct: stats(latencies.direct).p99, proxy: stats(latencies.proxy).p99, gateway: stats(latencies.gateway).p99 };
  return {
    loadedP99,
    gatewayAllows: machineAllows(cpu.gateway, 'gateway', gatewayRps),
    floorAllows: machineAllows(cpu.proxy, 'proxy', proxyRps),
    rounds,
    cpu,
    directRps,
    proxyRps,
    gatewayRps,
    ratio: gatewayRps / directRps,
    proxyRatio: proxyRps / directRps,
    cpuDirect: meanCpu(cpu.direct),
    cpuGateway: meanCpu(cpu.gateway),
    gatewayCpuPerRequestUs: perRequestUs(cpu.gateway, 'gateway'),
    proxyCpuPerRequestUs: perRequestUs(cpu.proxy, 'proxy'),
    upstreamCpuPerRequestUs: perRequestUs(cpu.direct, 'upstream'),
  };
}

// ---- Paced streams, many at once ----------------------------------------------------------------------

/**
 * Section 5: PACED_CONCURRENCY streams at a time through each target, in rounds that alternate the
 * targets (the order rotated each round), so only one target carries load at a time and its
 * process's CPU over its rounds is its own, per stream.
 */
async function measurePacedStreams(targets: Target[], pids: Pids) {
  const pools = new Map(
    targets.map((target) => [
      target.name,
      new Pool(target.origin, { connections: PACED_CONCURRENCY, pipelining: 1, keepAliveTimeout: 60_000, headersTimeout: REQUEST_TIMEOUT_MS, bodyTimeout: REQUEST_TIMEOUT_MS }),
    ]),
  );
  const streams = (target: Target, count: number) =>
    runConcurrently(count, PACED_CONCURRENCY, () => timedPacedStream(pools.get(target.name)!, target.name, CHAT_PATH, target.headers, PACED_STREAM_BODY));
  try {
    for (const target of targets) await streams(target, PACED_WARMUP);
    const samples = { direct: [] as PacedSample[], proxy: [] as PacedSample[], gateway: [] as PacedSample[] };
    const cpu = { direct: [] as CpuRow[], proxy: [] as CpuRow[], gateway: [] as CpuRow[] };
    await profiled(
      'paced streams',
      () => samples.gateway.length,
      async () => {
        for (let round = 0; round < PACED_ROUNDS; round++) {
          for (let j = 0; j < targets.length; j++) {
            const target = targets[(round + j) % targets.length]!;
            const measured = await withCpu(pids, () => streams(target, PACED_STREAMS_PER_ROUND));
            samples[target.name].push(...measured.value);
            cpu[target.name].push({ cpu: measured.cpu, seconds: measured.seconds, requests: measured.value.length });
          }
        }
      },
    );
    const ttft = (name: Target['name']) => stats(samples[name].map((sample) => sample.firstContentMs));
    const duration = (name: Target['name']) => stats(samples[name].map((sample) => sample.totalMs));
    return {
      ttft: { direct: ttft('direct'), proxy: ttft('proxy'), gateway: ttft('gateway') },
      streamMs: { direct: duration('direct'), proxy: duration('proxy'), gateway: duration('gateway') },
      cpuPerStreamUs: { gateway: perRequestUs(cpu.gateway, 'gateway'), proxy: perRequestUs(cpu.proxy, 'proxy'), upstream: perRequestUs(cpu.direct, 'upstream') },
      cpuGateway: meanCpu(cpu.gateway),
    };
  } finally {
    await Promise.allSettled([...pools.values()].map((pool) => pool.close()));
  }
}

type PacedSample = Awaited<ReturnType<typeof timedPacedStream>>;
type Paced = Awaited<ReturnType<typeof measurePacedStreams>>;

function printPaced({ ttft, streamMs, cpuPerStreamUs, cpuGateway }: Paced, share: (c: CpuShares) => string): void {
  const streams = PACED_ROUNDS * PACED_STREAMS_PER_ROUND;
  log(`  5. Paced streams, ${PACED_CONCURRENCY} at a time, ${PACED_CONTENT_CHUNKS} content chunks ${PACED_INTERVAL_MS} ms apart (${streams} streams each; time to first token)`);
  log(`       direct   p50 ${f(ttft.direct.p50, 3)} ms   p99 ${f(ttft.direct.p99, 3)} ms   (a stream lasts ${f(streamMs.direct.p50, 1)} ms at p50)`);
  log(
    `       floor    p50 ${f(ttft.proxy.p50, 3)} ms   p99 ${f(ttft.proxy.p99, 3)} ms   (bare proxy adds p50 ${f(ttft.proxy.p50 - ttft.direct.p50, 3)} ms, p99 ${f(ttft.proxy.p99 - ttft.direct.p99, 3)} ms)`,
  );
  log(`       gateway  p50 ${f(ttft.gateway.p50, 3)} ms   p99 ${f(ttft.gateway.p99, 3)} ms`);
  log(`       added    p50 ${f(ttft.gateway.p50 - ttft.direct.p50, 3)} ms   p99 ${f(ttft.gateway.p99 - ttft.direct.p99, 3)} ms`);
  log(`       CPU (share of one core) during gateway rounds: ${share(cpuGateway)}`);
  log(
    `       CPU per stream: gateway ${f(cpuPerStreamUs.gateway, 0)} µs, bare proxy ${f(cpuPerStreamUs.proxy, 0)} µs (gateway/floor ${f(cpuPerStreamUs.gateway / cpuPerStreamUs.proxy, 2)}), fake upstream ${f(cpuPerStreamUs.upstream, 0)} µs (answering)`,
  );
  log();
}

function pacedResults({ ttft, streamMs, cpuPerStreamUs, cpuGateway }: Paced) {
  const ms = (x: number) => Number(x.toFixed(3));
  return {
    model: PACED_MODEL,
    concurrency: PACED_CONCURRENCY,
    contentChunks: PACED_CONTENT_CHUNKS,
    chunkIntervalMs: PACED_INTERVAL_MS,
    upstreamWrites: "role + first content chunk, each later content chunk, then finish + usage + [DONE]: 21 writes the interval apart (the fake upstream's timers)",
    streams: PACED_ROUNDS * PACED_STREAMS_PER_ROUND,
    rounds: PACED_ROUNDS,
    warmup: PACED_WARMUP,
    directMs: round3(ttft.direct),
    floorMs: round3(ttft.proxy),
    gatewayMs: round3(ttft.gateway),
    floorAddedP50Ms: ms(ttft.proxy.p50 - ttft.direct.p50),
    floorAddedP99Ms: ms(ttft.proxy.p99 - ttft.direct.p99),
    addedP50Ms: ms(ttft.gateway.p50 - ttft.direct.p50),
    addedP99Ms: ms(ttft.gateway.p99 - ttft.direct.p99),
    streamDurationP50Ms: { direct: ms(streamMs.direct.p50), floor: ms(streamMs.proxy.p50), gateway: ms(streamMs.gateway.p50) },
    gatewayCpuPerStreamUs: Math.round(cpuPerStreamUs.gateway),
    floorCpuPerStreamUs: Math.round(cpuPerStreamUs.proxy),
    upstreamCpuPerStreamUs: Math.round(cpuPerStreamUs.upstream),
    cpuCoresDuringGatewayRounds: roundCpu(cpuGateway),
  };
}

// ---- The other /v1 calls: embeddings and a streamed Responses call -------------------------------

async function measureBreadth(targets: Target[], pids: Pids) {
  // Smoke: every path answers both before anything is measured.
  for (const target of targets) {
    await timedEmbeddings(target);
    await timedResponsesStream(target);
  }

  log(`[5/${PHASES}] embeddings: throughput as in 1, then latency at 1 connection, ${EMBEDDINGS_LATENCY_WARMUP} warm-up + ${EMBEDDINGS_LATENCY_REQUESTS} requests per target…`);
  const throughput = await measureThroughput(targets, pids, EMBEDDINGS_JSON, 'embeddings throughput');
  await alternate(targets, EMBEDDINGS_LATENCY_WARMUP, timedEmbeddings);
  const latency = await profiled(
    'embeddings latency',
    () => EMBEDDINGS_LATENCY_REQUESTS,
    () => alternate(targets, EMBEDDINGS_LATENCY_REQUESTS, timedEmbeddings),
  );

  log(`[6/${PHASES}] responses: ${TTFT_WARMUP} warm-up + ${TTFT_STREAMS} sequential streams per target, alternating…`);
  await alternate(targets, TTFT_WARMUP, timedResponsesStream);
  // The gateway and the floor are idle while the others answer, so their CPU over the whole phase
  // is their CPU for their own streams; the fake upstream answers every target's.
  const streamed = await profiled(
    'responses streams',
    () => TTFT_STREAMS,
    () => withCpu(pids, () => alternate(targets, TTFT_STREAMS, timedResponsesStream)),
  );
  const cpuPerStreamUs = (who: 'gateway' | 'proxy' | 'upstream') => (1e6 * streamed.cpu[who] * streamed.seconds) / (TTFT_STREAMS * (who === 'upstream' ? targets.length : 1));
  const firstOutput = (name: Target['name']) => stats(streamed.value[name].map((sample) => sample.firstOutputMs));
  const deltas = new Set(Object.values(streamed.value).flatMap((samples) => samples.map((sample) => sample.textDeltas)));
  if (deltas.size !== 1) throw new Error(`responses streams carried different numbers of text deltas: ${[...deltas].join(', ')}`);

  return {
    embeddings: {
      throughput,
      latency: { direct: stats(latency.direct), proxy: stats(latency.proxy), gateway: stats(latency.gateway) },
    },
    responses: {
      textDeltasPerStream: [...deltas][0]!,
      firstOutput: { direct: firstOutput('direct'), proxy: firstOutput('proxy'), gateway: firstOutput('gateway') },
      cpuPerStreamUs: { gateway: cpuPerStreamUs('gateway'), proxy: cpuPerStreamUs('proxy'), upstream: cpuPerStreamUs('upstream') },
    },
    /** VmHWM at the end of every section: what embeddings and responses add to chat's peak, if anything. */
    peakRssAtEndMiB: (procStatusKiB(pids.gateway, 'VmHWM') ?? NaN) / 1024,
  };
}

type Breadth = Awaited<ReturnType<typeof measureBreadth>>;

function printBreadth({ embeddings, responses, peakRssAtEndMiB }: Breadth, share: (c: CpuShares) => string): void {
  const { throughput: t, latency } = embeddings;
  log(`  6. Embeddings (${EMBEDDINGS_BODY.input.length} strings, base64), ${CONNECTIONS} connections (${THROUGHPUT_ROUNDS} x ${THROUGHPUT_ROUND_S} s each), then 1 connection`);
  log(`       direct   ${f(t.directRps, 0).padStart(8)} req/s   p50 ${f(latency.direct.p50, 3)} ms   p99 ${f(latency.direct.p99, 3)} ms`);
  log(`       floor    ${f(t.proxyRps, 0).padStart(8)} req/s   p50 ${f(latency.proxy.p50, 3)} ms   p99 ${f(latency.proxy.p99, 3)} ms   (bare proxy)`);
  log(`       gateway  ${f(t.gatewayRps, 0).padStart(8)} req/s   p50 ${f(latency.gateway.p50, 3)} ms   p99 ${f(latency.gateway.p99, 3)} ms`);
  log(`       ratio gateway/direct  ${f(t.ratio, 3)}   floor/direct ${f(t.proxyRatio, 3)}   gateway/floor ${f(t.gatewayRps / t.proxyRps, 3)}`);
  log(
    `       added    p50 ${f(latency.gateway.p50 - latency.direct.p50, 3)} ms   p99 ${f(latency.gateway.p99 - latency.direct.p99, 3)} ms   (bare proxy adds p50 ${f(latency.proxy.p50 - latency.direct.p50, 3)} ms, p99 ${f(latency.proxy.p99 - latency.direct.p99, 3)} ms)`,
  );
  log(`       CPU (share of one core) during gateway rounds: ${share(t.cpuGateway)}`);
  log(`       CPU per request: gateway ${f(t.gatewayCpuPerRequestUs, 0)} µs, bare proxy ${f(t.proxyCpuPerRequestUs, 0)} µs, fake upstream ${f(t.upstreamCpuPerRequestUs, 0)} µs`);
  log(`       ${loadedP99Line(t.loadedP99)}`);
  log();
  const { firstOutput, cpuPerStreamUs } = responses;
  log(`  7. Responses, streamed, sequential (${TTFT_STREAMS} streams each, ${responses.textDeltasPerStream} text deltas; first output event: the first after the announcements)`);
  log(`       direct   p50 ${f(firstOutput.direct.p50, 3)} ms   p99 ${f(firstOutput.direct.p99, 3)} ms`);
  log(
    `       floor    p50 ${f(firstOutput.proxy.p50, 3)} ms   p99 ${f(firstOutput.proxy.p99, 3)} ms   (bare proxy adds p50 ${f(firstOutput.proxy.p50 - firstOutput.direct.p50, 3)} ms, p99 ${f(firstOutput.proxy.p99 - firstOutput.direct.p99, 3)} ms)`,
  );
  log(`       gateway  p50 ${f(firstOutput.gateway.p50, 3)} ms   p99 ${f(firstOutput.gateway.p99, 3)} ms`);
  log(`       added    p50 ${f(firstOutput.gateway.p50 - firstOutput.direct.p50, 3)} ms   p99 ${f(firstOutput.gateway.p99 - firstOutput.direct.p99, 3)} ms`);
  log(`       CPU per stream: gateway ${f(cpuPerStreamUs.gateway, 0)} µs, bare proxy ${f(cpuPerStreamUs.proxy, 0)} µs, fake upstream ${f(cpuPerStreamUs.upstream, 0)} µs (answering)`);
  log();
  log(`  gateway peak RSS at the end of every section ${f(peakRssAtEndMiB, 1)} MiB`);
  log();
}

function breadthResults({ embeddings, responses, peakRssAtEndMiB }: Breadth) {
  const { throughput: t, latency } = embeddings;
  const ms = (x: number) => Number(x.toFixed(3));
  return {
    embeddings: {
      requestBody: EMBEDDINGS_BODY,
      throughput: {
        connections: CONNECTIONS,
        directRps: Math.round(t.directRps),
        floorRps: Math.round(t.proxyRps),
        gatewayRps: Math.round(t.gatewayRps),
        ratio: Number(t.ratio.toFixed(4)),
        floorRatio: Number(t.proxyRatio.toFixed(4)),
        cpuCoresDuringGatewayRounds: roundCpu(t.cpuGateway),
        gatewayCpuPerRequestUs: Math.round(t.gatewayCpuPerRequestUs),
        floorCpuPerRequestUs: Math.round(t.proxyCpuPerRequestUs),
        upstreamCpuPerRequestUs: Math.round(t.upstreamCpuPerRequestUs),
        ...loadedP99Results(t.loadedP99),
      },
      latency: {
        connections: 1,
        requests: EMBEDDINGS_LATENCY_REQUESTS,
        warmup: EMBEDDINGS_LATENCY_WARMUP,
        directMs: round3(latency.direct),
        floorMs: round3(latency.proxy),
        gatewayMs: round3(latency.gateway),
        floorAddedP50Ms: ms(latency.proxy.p50 - latency.direct.p50),
        floorAddedP99Ms: ms(latency.proxy.p99 - latency.direct.p99),
        addedP50Ms: ms(latency.gateway.p50 - latency.direct.p50),
        addedP99Ms: ms(latency.gateway.p99 - latency.direct.p99),
      },
    },
    responsesStream: {
      requestBody: RESPONSES_STREAM_BODY,
      streams: TTFT_STREAMS,
      warmup: TTFT_WARMUP,
      textDeltasPerStream: responses.textDeltasPerStream,
      firstOutputEvent: 'the first event after response.created / response.queued / response.in_progress (the gateway commits on it)',
      directMs: round3(responses.firstOutput.direct),
      floorMs: round3(responses.firstOutput.proxy),
      gatewayMs: round3(responses.firstOutput.gateway),
      floorAddedP50Ms: ms(responses.firstOutput.proxy.p50 - responses.firstOutput.direct.p50),
      floorAddedP99Ms: ms(responses.firstOutput.proxy.p99 - responses.firstOutput.direct.p99),
      addedP50Ms: ms(responses.firstOutput.gateway.p50 - responses.firstOutput.direct.p50),
      addedP99Ms: ms(responses.firstOutput.gateway.p99 - responses.firstOutput.direct.p99),
      gatewayCpuPerStreamUs: Math.round(responses.cpuPerStreamUs.gateway),
      floorCpuPerStreamUs: Math.round(responses.cpuPerStreamUs.proxy),
    },
    peakRssAtEndOfEverySectionMiB: Number(peakRssAtEndMiB.toFixed(1)),
  };
}

type LoadedP99 = { direct: number; proxy: number; gateway: number };

function loadedP99Line(p99: LoadedP99): string {
  const added = (x: number) => f(x - p99.direct, 3);
  return `p99 at ${CONNECTIONS} connections: direct ${f(p99.direct, 3)} ms, floor ${f(p99.proxy, 3)} ms (adds ${added(p99.proxy)}), gateway ${f(p99.gateway, 3)} ms (adds ${added(p99.gateway)})`;
}

function loadedP99Results(p99: LoadedP99) {
  const ms = (x: number) => Number(x.toFixed(3));
  return {
    loadedP99Ms: { direct: ms(p99.direct), floor: ms(p99.proxy), gateway: ms(p99.gateway) },
    floorAddedLoadedP99Ms: ms(p99.proxy - p99.direct),
    addedLoadedP99Ms: ms(p99.gateway - p99.direct),
  };
}

type Allowance = ReturnType<typeof machineAllows>;

function allowanceResults(a: Allowance) {
  return {
    cpuPerCallUs: {
      own: Math.round(a.cpuPerCallUs.own),
      upstream: Math.round(a.cpuPerCallUs.upstream),
      loadGenerator: Math.round(a.cpuPerCallUs.loadGenerator),
      total: Math.round(a.cpuPerCallUs.total),
    },
    callsPerSecond: Math.round(a.callsPerSecond),
    share: Number(a.share.toFixed(3)),
  };
}

// ---- Output -----------------------------------------------------------------------------------------

const f = (value: number, digits = 2) => (Number.isFinite(value) ? value.toFixed(digits) : 'n/a');
const mark = (pass: boolean) => (pass ? '[PASS]' : '[MISS]');
const log = (line = '') => process.stdout.write(`${line}\n`);

function machine() {
  let cpu = 'unknown';
  try {
    cpu = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? cpu;
  } catch {
    cpu = os.cpus()[0]?.model ?? cpu;
  }
  return {
    cpu,
    cores: os.availableParallelism(),
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
  };
}

// ---- The run ----------------------------------------------------------------------------------------

async function main(): Promise<void> {
  if (ONLY === 'apps') {
    const loadAtStart = os.loadavg().map((x) => x.toFixed(2));
    log(`svc apps bench, ${new Date().toISOString()}, load average ${loadAtStart.join(' ')} before starting`);
    log('[1/2] apps: push → serving (no dependencies; one from a loopback registry), then rollback…');
    const { measureAppsDeploy, printAppsDeploy } = await import('./apps-deploy.ts');
    printAppsDeploy(await measureAppsDeploy(), log);
    log('[2/2] apps proxy beside the bare pass-through floor…');
    const { measureAppsProxy, printAppsProxy } = await import('./apps-proxy.ts');
    printAppsProxy(await measureAppsProxy(log), log);
    log(
      `  load average ${os
        .loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')} at the end`,
    );
    log('  BENCH_ONLY=apps: bench/results.json left as it was');
    return;
  }
  const startedAt = new Date();
  const host = machine();
  log('svc gateway overhead bench');
  log(`  date     ${startedAt.toISOString()}`);
  log(`  machine  ${host.cpu}, ${host.cores} cores, ${host.memoryGiB} GiB, ${host.platform}`);
  log(`  node     ${host.node}`);
  log(`  note     load generator, gateway and fake upstream are 3 processes sharing these ${host.cores} cores (loopback only)`);
  const loadAtStart = os.loadavg();
  log(`  load     average ${loadAtStart.map((x) => x.toFixed(2)).join(' ')} before starting${loadAtStart[0]! > 0.5 ? '  <- other work is running: figures will be noisy' : ''}`);
  if (PROFILE) log('  PROFILING: the gateway profiles itself in each phase; its figures are inflated');
  if (GATEWAY_NODE_ARGS.length > 0) log(`  gateway node flags: ${GATEWAY_NODE_ARGS.join(' ')}`);
  log(`  coordination ${REDIS_URL ? 'Redis from BENCH_REDIS_URL' : 'in memory (as npm start)'}`);
  if (WORKERS > 1) log(`  workers  ${WORKERS} gateway processes on one port behind a cluster primary (BENCH_WORKERS; server.workers)`);
  log(`  database ${DATABASE_URL ? `PostgreSQL from BENCH_DATABASE_URL, schema ${DATABASE_SCHEMA} (not what npm start runs)` : 'embedded PGlite on disk (as npm start)'}`);
  log();

  const dataDir = mkdtempSync(join(os.tmpdir(), 'svc-bench-'));
  scratch.push(dataDir);
  let sampler: RssSampler | null = null;
  try {
    const upstream = startChild('fake upstream', 'upstream-process.ts', {});
    const upstreamReady = await upstream.next('ready', 30_000);
    if (upstreamReady.type !== 'ready') throw new Error('unreachable');

    const ownerToken = generateToken(SESSION_PREFIX);
    const gatewayEnv: Record<string, string> = {
      BENCH_UPSTREAM_URL: upstreamReady.url,
      BENCH_OWNER_TOKEN: ownerToken,
      BENCH_DATA_DIR: dataDir,
      BENCH_MODEL: MODEL,
      BENCH_PACED_MODEL: PACED_MODEL,
    };
    if (BREADTH) gatewayEnv.BENCH_EMBEDDING_MODEL = EMBEDDING_MODEL;
    if (DATABASE_URL) Object.assign(gatewayEnv, { BENCH_DATABASE_URL: DATABASE_URL, BENCH_DATABASE_SCHEMA: DATABASE_SCHEMA });
    if (REDIS_URL) Object.assign(gatewayEnv, { BENCH_REDIS_URL: REDIS_URL, BENCH_REDIS_PREFIX: `bench:${DATABASE_SCHEMA}` });
    if (WORKERS > 1) gatewayEnv.BENCH_WORKERS = String(WORKERS);
    // The console as `npm run build` bundles it, served by the gateway child (section 10).
    const consoleBundle = BREADTH || ONLY === 'console' ? await buildConsoleBundle(join(dataDir, 'console')) : null;
    if (consoleBundle) gatewayEnv.BENCH_CONSOLE_DIR = consoleBundle.dir;

    const proxyChild = startChild('bare proxy', await buildChild('bare-proxy-process'), { BENCH_UPSTREAM_URL: upstreamReady.url }, GATEWAY_NODE_ARGS);
    const proxyReady = await proxyChild.next('ready', 30_000);
    if (proxyReady.type !== 'ready') throw new Error('unreachable');

    // First start of the deployment (PGlite initdb, migrations, bootstrap) in its own short-lived
    // process: a one-time cost, reported apart, so the measured gateway starts like any restart.
    const gatewayEntry = await buildChild('gateway-process');
    const prepare = startChild('gateway first start', gatewayEntry, { ...gatewayEnv, BENCH_PREPARE: '1' });
    // Older commits' children (bench --vs) say nothing of it: section 10 then runs without a sign-in.
    const setPasswordToken = await prepare.next('prepared', 90_000).then(
      (message) => (message.type === 'prepared' ? message.setPasswordToken : null),
      () => null,
    );
    const prepared = await prepare.next('stats', 90_000);
    const firstStartPeakKiB = prepared.type === 'stats' ? prepared.maxRssKiB : 0;
    await new Promise<void>((resolve) => (prepare.process.exitCode !== null ? resolve() : prepare.process.once('exit', () => resolve())));

    // --expose-gc only lets the end-of-run stats tell retained memory from garbage.
    const gatewayChild = startChild('gateway', gatewayEntry, gatewayEnv, ['--expose-gc', ...GATEWAY_NODE_ARGS]);
    const gatewayReady = await gatewayChild.next('ready', 60_000);
    if (gatewayReady.type !== 'ready') throw new Error('unreachable');
    if (PROFILE) {
      mkdirSync(PROFILE_DIR, { recursive: true });
      profiledGateway = gatewayChild;
    }
    const gatewayPids = gatewayReady.pids ?? [gatewayChild.process.pid!];
    sampler = new RssSampler(gatewayPids);
    sampler.start();
    const rssAfterStartKiB = procStatusKiB(gatewayPids, 'VmRSS') ?? 0;
    send(gatewayChild, { type: 'stats', gc: true });
    const startStats = await gatewayChild.next('stats', 10_000);
    const heapAfterStartMiB = startStats.type === 'stats' ? startStats.heapUsedBytes / 2 ** 20 : NaN;
    log(`fake upstream ${upstreamReady.url} (pid ${upstream.process.pid})`);
    log(`first start   initdb + migrations + bootstrap in a separate process: peak RSS ${f(firstStartPeakKiB / 1024, 1)} MiB (one-time, not the measured run)`);
    const processes = WORKERS > 1 ? `pids ${gatewayPids.join(', ')}: a primary and ${WORKERS} workers` : `pid ${gatewayChild.process.pid}`;
    log(`gateway       ${gatewayReady.url} (${processes}), plugins: ${gatewayReady.plugins?.join(', ')}; RSS after start ${f(rssAfterStartKiB / 1024, 1)} MiB`);

    // A real key, through the management API, as a client would get one.
    const created = await fetch(`${gatewayReady.url}/client/keys`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ownerToken}` },
      body: JSON.stringify({ name: 'bench', scopes: ['inference'] }),
    });
    const createdBody = (await created.json()) as { key?: string; id?: string };
    if (created.status !== 201 || !createdBody.key?.startsWith('svc_live_')) throw new Error(`key creation failed: ${created.status} ${JSON.stringify(createdBody)}`);
    const key = createdBody.key;

    const direct = makeTarget('direct', upstreamReady.url, 'sk-bench-upstream');
    const proxy = makeTarget('proxy', proxyReady.url, 'sk-bench-upstream');
    const gateway = makeTarget('gateway', gatewayReady.url, key);
    const targets = [direct, proxy, gateway];
    log(`bare proxy    ${proxyReady.url} (pid ${proxyChild.process.pid}): the floor, pipes bytes to the fake upstream`);
    /** Section 9: its own upstream, the grant to the bench key, the calls. */
    const toolSection = async (): Promise<ToolCallFigures> => {
      const echo = await startEchoUpstream();
      try {
        const gatewayName = await grantEcho(gatewayReady.url, ownerToken, createdBody.id ?? '', echo.url);
        return await measureToolCalls(gatewayReady.url, key, echo.url, gatewayName);
      } finally {
        await echo.close();
      }
    };
    const consoleSection = async (): Promise<ConsoleFigures | null> => {
      if (!consoleBundle) return null;
      const cookie = setPasswordToken ? await consoleSignIn(gatewayReady.url, setPasswordToken) : null;
      return { gzippedBytes: consoleBundle.gzippedBytes, load: cookie ? await measureConsoleLoad(gatewayReady.url, cookie) : null };
    };
    if (ONLY === 'console') {
      log();
      log(`[1/1] console: bundle size, then ${CONSOLE_LOADS} first loads in chromium…`);
      printConsole((await consoleSection())!);
      log('  BENCH_ONLY=console: bench/results.json left as it was');
      await Promise.allSettled(targets.map((target) => target.client.close()));
      return;
    }
    if (ONLY === 'tools') {
      log();
      log(`[1/1] tool calls: ${TOOL_SEQUENTIAL_CALLS} sequential per target, alternating, then ${TOOL_CONCURRENT_CALLS} at ${TOOL_CONCURRENCY} at a time per target…`);
      printToolCalls(await toolSection());
      log('  BENCH_ONLY=tools: bench/results.json left as it was');
      await Promise.allSettled(targets.map((target) => target.client.close()));
      return;
    }
    try {
      // Smoke: every path answers both kinds of request before anything is measured.
      for (const target of targets) {
        await timedCompletion(target);
        await timedStream(target);
        await timedPacedStream(target.client, target.name, CHAT_PATH, target.headers, PACED_STREAM_BODY);
      }

      // 1. Throughput at 32 connections.
      log();
      log(
        `[1/${PHASES}] throughput: ${CONNECTIONS} connections, non-streamed, warm-up ${THROUGHPUT_WARMUP_S} s each, then ${THROUGHPUT_ROUNDS} alternating rounds of ${THROUGHPUT_ROUND_S} s…`,
      );
      const pids: Pids = { gateway: gatewayPids, proxy: proxyChild.process.pid!, upstream: upstream.process.pid! };
      const chatThroughput = await measureThroughput(targets, pids, CHAT_JSON, 'chat throughput');
      const { rounds, cpu, directRps, proxyRps, gatewayRps, ratio, proxyRatio, cpuDirect, cpuGateway } = chatThroughput;
      const { gatewayCpuPerRequestUs, proxyCpuPerRequestUs, upstreamCpuPerRequestUs, loadedP99, gatewayAllows, floorAllows } = chatThroughput;

      // 2. Latency at 1 connection.
      log(`[2/${PHASES}] latency: 1 connection, ${LATENCY_WARMUP} warm-up + ${LATENCY_REQUESTS} requests per target, alternating…`);
      await alternate(targets, LATENCY_WARMUP, timedCompletion);
      const latency = await profiled(
        'chat latency',
        () => LATENCY_REQUESTS,
        () => alternate(targets, LATENCY_REQUESTS, timedCompletion),
      );
      const latencyDirect = stats(latency.direct);
      const latencyProxy = stats(latency.proxy);
      const latencyGateway = stats(latency.gateway);

      // 3. Time to first token on streams.
      log(`[3/${PHASES}] time to first token: ${TTFT_WARMUP} warm-up + ${TTFT_STREAMS} sequential streams per target, alternating…`);
      await alternate(targets, TTFT_WARMUP, timedStream);
      const ttft = await profiled(
        'chat TTFT',
        () => TTFT_STREAMS,
        () => alternate(targets, TTFT_STREAMS, timedStream),
      );
      const ttftDirect = stats(ttft.direct);
      const ttftProxy = stats(ttft.proxy);
      const ttftGateway = stats(ttft.gateway);

      // 4. Memory.
      send(gatewayChild, { type: 'stats' });
      const childStats = await gatewayChild.next('stats', 10_000);
      sampler.stop();
      const peakHwmKiB = Math.max(sampler.lastHwmKiB, childStats.type === 'stats' ? childStats.maxRssKiB : 0);
      const externalMiB = childStats.type === 'stats' ? childStats.externalBytes / 2 ** 20 : NaN;
      const heapMiB = childStats.type === 'stats' ? childStats.heapUsedBytes / 2 ** 20 : NaN;
      send(gatewayChild, { type: 'stats', gc: true });
      const endStats = await gatewayChild.next('stats', 10_000);
      const heapAfterGcMiB = endStats.type === 'stats' ? endStats.heapUsedBytes / 2 ** 20 : NaN;
      const peakRssMiB = peakHwmKiB / 1024;
      /** The floor's own peak over the same sections: what any Node process serving this load holds. */
      const floorPeakRssMiB = (procStatusKiB([proxyChild.process.pid!], 'VmHWM') ?? NaN) / 1024;

      // 5. Paced streams, after the memory figure so that it means what it meant before them.
      log(
        `[4/${PHASES}] paced streams: ${PACED_CONCURRENCY} at a time, ${PACED_CONTENT_CHUNKS} chunks ${PACED_INTERVAL_MS} ms apart, ${PACED_WARMUP} warm-up + ${PACED_ROUNDS} alternating rounds of ${PACED_STREAMS_PER_ROUND} per target…`,
      );
      const paced = await measurePacedStreams(targets, pids);

      // 6 to 8, after chat's figures (memory included), so those stay comparable with chat-only runs.
      const breadth = BREADTH ? await measureBreadth(targets, pids) : null;
      if (BREADTH) log(`[7/${PHASES}] batch: ${BATCH_LINES} lines through the worker, then the same calls live at ${BATCH_CONCURRENCY} at a time…`);
      const batch = BREADTH ? await profiled('batch', null, () => measureBatchThroughput(gatewayReady.url, key, MODEL, BATCH_LINES)) : null;
      if (BREADTH) {
        log(`[8/${PHASES}] tool calls: ${TOOL_SEQUENTIAL_CALLS} sequential per target, alternating, then ${TOOL_CONCURRENT_CALLS} at ${TOOL_CONCURRENCY} at a time per target…`);
      }
      const toolCalls = BREADTH ? await profiled('tool calls', null, toolSection) : null;
      if (BREADTH) log(`[9/${PHASES}] console: bundle size, then ${CONSOLE_LOADS} first loads in chromium…`);
      const consoleFigures = BREADTH ? await consoleSection() : null;

      const added = {
        p50: latencyGateway.p50 - latencyDirect.p50,
        p99: latencyGateway.p99 - latencyDirect.p99,
        ttftP50: ttftGateway.p50 - ttftDirect.p50,
        ttftP99: ttftGateway.p99 - ttftDirect.p99,
      };
      /** What the bare proxy adds over direct: the part of the gateway's figures any Node proxy pays here. */
      const floor = { p50: latencyProxy.p50 - latencyDirect.p50, p99: latencyProxy.p99 - latencyDirect.p99, ttftP50: ttftProxy.p50 - ttftDirect.p50 };
      const pass = {
        ratio: ratio >= GOALS.ratio,
        addedP50: added.p50 <= GOALS.addedP50Ms,
        addedTtft: added.ttftP50 <= GOALS.addedTtftMs,
        peakRss: peakRssMiB <= GOALS.peakRssMiB,
      };

      log();
      log(`Results${PROFILE ? ' (PROFILING: gateway figures inflated)' : ''}`);
      log(`  (load generator, gateway and fake upstream share ${host.cores} cores: ${host.cpu}; node ${host.node}; ${startedAt.toISOString()})`);
      log();
      log(`  1. Throughput, ${CONNECTIONS} connections, non-streamed chat completions (${THROUGHPUT_ROUNDS} x ${THROUGHPUT_ROUND_S} s each)`);
      log(`       direct   ${f(directRps, 0).padStart(8)} req/s   mean latency ${f(meanLatency(rounds.direct))} ms`);
      log(`       floor    ${f(proxyRps, 0).padStart(8)} req/s   mean latency ${f(meanLatency(rounds.proxy))} ms   (bare proxy)`);
      log(`       gateway  ${f(gatewayRps, 0).padStart(8)} req/s   mean latency ${f(meanLatency(rounds.gateway))} ms`);
      log(`       ratio gateway/direct  ${f(ratio, 3)}   goal >= ${GOALS.ratio}   ${mark(pass.ratio)}   <- headline`);
      log(`       ratio floor/direct    ${f(proxyRatio, 3)}   gateway/floor ${f(gatewayRps / proxyRps, 3)}`);
      const share = (c: CpuShares) =>
        `gateway ${f(c.gateway * 100, 0)}%, bare proxy ${f(c.proxy * 100, 0)}%, upstream ${f(c.upstream * 100, 0)}%, load generator ${f(c.loadGenerator * 100, 0)}%, whole machine ${f(c.machine * 100, 0)}% of ${host.cores * 100}%`;
      log(`       CPU (share of one core) during direct rounds:  ${share(cpuDirect)}`);
      log(`       CPU (share of one core) during floor rounds:   ${share(meanCpu(cpu.proxy))}`);
      log(`       CPU (share of one core) during gateway rounds: ${share(cpuGateway)}`);
      log(
        `       CPU per request: gateway ${f(gatewayCpuPerRequestUs, 0)} µs (proxying), bare proxy ${f(proxyCpuPerRequestUs, 0)} µs, fake upstream ${f(upstreamCpuPerRequestUs, 0)} µs (answering)`,
      );
      log(`       ${loadedP99Line(loadedP99)}`);
      const allows = (a: Allowance) =>
        `${f(a.callsPerSecond, 0)} calls/s (${host.cores} cores / ${f(a.cpuPerCallUs.total, 0)} µs: own ${f(a.cpuPerCallUs.own, 0)} + upstream ${f(a.cpuPerCallUs.upstream, 0)} + load generator ${f(a.cpuPerCallUs.loadGenerator, 0)})`;
      log(`       what this machine allows: gateway ${allows(gatewayAllows)}; measured ${f(gatewayAllows.share, 3)} of it`);
      log(`                                 floor   ${allows(floorAllows)}; measured ${f(floorAllows.share, 3)} of it`);
      log();
      log(`  2. Latency, 1 connection, non-streamed (${LATENCY_REQUESTS} requests each)`);
      log(`       direct   p50 ${f(latencyDirect.p50, 3)} ms   p99 ${f(latencyDirect.p99, 3)} ms`);
      log(`       floor    p50 ${f(latencyProxy.p50, 3)} ms   p99 ${f(latencyProxy.p99, 3)} ms   (bare proxy adds p50 ${f(floor.p50, 3)} ms, p99 ${f(floor.p99, 3)} ms)`);
      log(`       gateway  p50 ${f(latencyGateway.p50, 3)} ms   p99 ${f(latencyGateway.p99, 3)} ms`);
      log(`       added    p50 ${f(added.p50, 3)} ms   p99 ${f(added.p99, 3)} ms   goal p50 <= ${GOALS.addedP50Ms} ms   ${mark(pass.addedP50)}`);
      log();
      log(`  3. Time to first token, streamed, sequential (${TTFT_STREAMS} streams each; first data: frame with content)`);
      log(`       direct   p50 ${f(ttftDirect.p50, 3)} ms   p99 ${f(ttftDirect.p99, 3)} ms`);
      log(`       floor    p50 ${f(ttftProxy.p50, 3)} ms   p99 ${f(ttftProxy.p99, 3)} ms   (bare proxy adds p50 ${f(floor.ttftP50, 3)} ms)`);
      log(`       gateway  p50 ${f(ttftGateway.p50, 3)} ms   p99 ${f(ttftGateway.p99, 3)} ms`);
      log(`       added    p50 ${f(added.ttftP50, 3)} ms   p99 ${f(added.ttftP99, 3)} ms   goal p50 <= ${GOALS.addedTtftMs} ms   ${mark(pass.addedTtft)}`);
      log();
      log(WORKERS > 1 ? `  4. Gateway memory (its primary and ${WORKERS} workers, summed)` : '  4. Gateway memory (its own process)');
      log(`       peak RSS ${f(peakRssMiB, 1)} MiB (VmHWM: start from the existing data directory + sections 1 to 3)   goal <= ${GOALS.peakRssMiB} MiB   ${mark(pass.peakRss)}`);
      log(
        `       RSS after start ${f(rssAfterStartKiB / 1024, 1)} MiB, max sampled under load ${f(sampler.maxKiB / 1024, 1)} MiB; external (incl. PGlite WebAssembly memory) ${f(externalMiB, 1)} MiB`,
      );
      log(`       JS heap used: after start ${f(heapAfterStartMiB, 1)} MiB (after GC), end of run ${f(heapMiB, 1)} MiB, end of run after GC ${f(heapAfterGcMiB, 1)} MiB`);
      log(`       first start (initdb, one-time, separate process) peaked at ${f(firstStartPeakKiB / 1024, 1)} MiB`);
      log(`       the floor (bare proxy) peaked at ${f(floorPeakRssMiB, 1)} MiB over the same sections`);
      log();
      printPaced(paced, share);
      if (breadth) printBreadth(breadth, share);
      if (batch) {
        log(`  8. Batch, ${batch.lines} chat lines, ${batch.concurrency} at a time`);
        log(`       through the batch worker  ${f(batch.batchLinesPerSecond, 0).padStart(6)} lines/s   (${f(batch.batchSeconds, 2)} s from create to completed)`);
        log(`       the same calls live       ${f(batch.liveCallsPerSecond, 0).padStart(6)} calls/s   (${f(batch.liveSeconds, 2)} s)`);
        log(`       ratio batch/live          ${f(batch.batchLinesPerSecond / batch.liveCallsPerSecond, 3)}`);
        log();
      }
      if (toolCalls) printToolCalls(toolCalls);
      if (consoleFigures) printConsole(consoleFigures);
      const allPass = Object.values(pass).every(Boolean);
      if (gatewayChild.clientGoneLogs > 0) {
        log(`  note: the gateway logged ${gatewayChild.clientGoneLogs} 'client disconnected' errors, from autocannon closing sockets mid-request at the end of each load phase`);
      }
      log(
        `  goals: ${
          allPass
            ? 'all met'
            : `missed: ${Object.entries(pass)
                .filter(([, ok]) => !ok)
                .map(([name]) => name)
                .join(', ')}`
        }`,
      );

      const results = {
        date: startedAt.toISOString(),
        machine: {
          ...host,
          loadAverageAtStart: loadAtStart.map((x) => Number(x.toFixed(2))),
          note: `load generator, gateway and fake upstream are separate processes sharing ${host.cores} cores; loopback only`,
        },
        profiling: PROFILE,
        setup: {
          gateway:
            `child process, bench/gateway-process.ts compiled with esbuild and run with plain node (as \`npm run build\`): ${REDIS_URL ? 'Redis' : 'memory'} coordination, ` +
            `${WORKERS > 1 ? `${WORKERS} worker processes behind a cluster primary, ` : ''}logLevel warn, auth + all kernel hooks, openai provider type (allowPrivateNetwork)`,
          gatewayNodeArgs: GATEWAY_NODE_ARGS,
          gatewayWorkers: WORKERS,
          database: DATABASE_URL ? 'postgres (BENCH_DATABASE_URL)' : 'pglite on disk, data directory created by a separate first-start process',
          plugins: gatewayReady.plugins ?? [],
          upstream: `child process, test/fakes/fake-openai-upstream.ts (record: false), SSE sent in one write (${PACED_MODEL}: paced, see pacedStreams)`,
          loadGenerator: 'this process: autocannon for throughput, sequential undici Client (1 keep-alive connection) for latency and TTFT',
          requestBody: CHAT_BODY,
        },
        throughput: {
          connections: CONNECTIONS,
          warmupSeconds: THROUGHPUT_WARMUP_S,
          rounds: THROUGHPUT_ROUNDS,
          roundSeconds: THROUGHPUT_ROUND_S,
          directRps: Math.round(directRps),
          floorRps: Math.round(proxyRps),
          gatewayRps: Math.round(gatewayRps),
          ratio: Number(ratio.toFixed(4)),
          floorRatio: Number(proxyRatio.toFixed(4)),
          directMeanLatencyMs: Number(meanLatency(rounds.direct).toFixed(3)),
          gatewayMeanLatencyMs: Number(meanLatency(rounds.gateway).toFixed(3)),
          perRound: {
            direct: rounds.direct.map((r) => Math.round(r['2xx'] / r.duration)),
            floor: rounds.proxy.map((r) => Math.round(r['2xx'] / r.duration)),
            gateway: rounds.gateway.map((r) => Math.round(r['2xx'] / r.duration)),
          },
          cpuCoresDuringDirectRounds: roundCpu(cpuDirect),
          cpuCoresDuringGatewayRounds: roundCpu(cpuGateway),
          gatewayCpuPerRequestUs: Math.round(gatewayCpuPerRequestUs),
          floorCpuPerRequestUs: Math.round(proxyCpuPerRequestUs),
          upstreamCpuPerRequestUs: Math.round(upstreamCpuPerRequestUs),
          ...loadedP99Results(loadedP99),
          machineAllows: {
            note: "cores / CPU per call of the proxy, the fake upstream and the load generator together (measured in that proxy's rounds); share: its req/s over that",
            gateway: allowanceResults(gatewayAllows),
            floor: allowanceResults(floorAllows),
          },
          goal: `>= ${GOALS.ratio}`,
          pass: pass.ratio,
        },
        latency: {
          connections: 1,
          requests: LATENCY_REQUESTS,
          warmup: LATENCY_WARMUP,
          directMs: round3(latencyDirect),
          floorMs: round3(latencyProxy),
          gatewayMs: round3(latencyGateway),
          floorAddedP50Ms: Number(floor.p50.toFixed(3)),
          floorAddedP99Ms: Number(floor.p99.toFixed(3)),
          addedP50Ms: Number(added.p50.toFixed(3)),
          addedP99Ms: Number(added.p99.toFixed(3)),
          goal: `added p50 <= ${GOALS.addedP50Ms} ms`,
          pass: pass.addedP50,
        },
        ttft: {
          streams: TTFT_STREAMS,
          warmup: TTFT_WARMUP,
          directMs: round3(ttftDirect),
          floorMs: round3(ttftProxy),
          gatewayMs: round3(ttftGateway),
          floorAddedP50Ms: Number(floor.ttftP50.toFixed(3)),
          addedP50Ms: Number(added.ttftP50.toFixed(3)),
          addedP99Ms: Number(added.ttftP99.toFixed(3)),
          goal: `added p50 <= ${GOALS.addedTtftMs} ms`,
          pass: pass.addedTtft,
        },
        memory: {
          peakRssMiB: Number(peakRssMiB.toFixed(1)),
          floorPeakRssMiB: Number(floorPeakRssMiB.toFixed(1)),
          rssAfterStartMiB: Number((rssAfterStartKiB / 1024).toFixed(1)),
          maxSampledRssMiB: Number((sampler.maxKiB / 1024).toFixed(1)),
          childReportedMaxRssMiB: childStats.type === 'stats' ? Number((childStats.maxRssKiB / 1024).toFixed(1)) : null,
          heapUsedAfterStartMiB: Number(heapAfterStartMiB.toFixed(1)),
          heapUsedEndMiB: Number(heapMiB.toFixed(1)),
          heapUsedEndAfterGcMiB: Number(heapAfterGcMiB.toFixed(1)),
          externalMiB: Number(externalMiB.toFixed(1)),
          firstStartPeakRssMiB: Number((firstStartPeakKiB / 1024).toFixed(1)),
          note: 'peakRssMiB is the measured gateway process (started on an existing data directory); the first start (PGlite initdb) ran in a separate process',
          goal: `<= ${GOALS.peakRssMiB} MiB`,
          pass: pass.peakRss,
        },
        pacedStreams: pacedResults(paced),
        ...(breadth ? breadthResults(breadth) : {}),
        ...(batch ? { batch: { ...batch, batchLinesPerSecond: Math.round(batch.batchLinesPerSecond), liveCallsPerSecond: Math.round(batch.liveCallsPerSecond) } } : {}),
        ...(toolCalls ? { toolCalls: toolCallResults(toolCalls) } : {}),
        ...(consoleFigures ? { console: consoleResults(consoleFigures) } : {}),
        ...(PROFILE ? { profiles: phaseProfiles } : {}),
        gatewayClientGoneLogLines: gatewayChild.clientGoneLogs,
        allGoalsMet: allPass,
      };
      mkdirSync(dirname(RESULTS_FILE), { recursive: true });
      writeFileSync(RESULTS_FILE, `${JSON.stringify(results, null, 2)}\n`);
      log(`  written: ${RESULTS_FILE.slice(REPO_ROOT.length)}`);
    } finally {
      await Promise.allSettled(targets.map((target) => target.client.close()));
    }
  } finally {
    sampler?.stop();
    await stopChildren();
    rmSync(dataDir, { recursive: true, force: true });
    if (DATABASE_URL) await dropSchema(DATABASE_URL, DATABASE_SCHEMA).catch((error: unknown) => log(`could not drop schema ${DATABASE_SCHEMA}: ${String(error)}`));
  }

  for (const { phase, file, gatewayCalls } of phaseProfiles) {
    log();
    log(`Gateway CPU profile, ${phase}: ${file.slice(REPO_ROOT.length)}`);
    printProfileSummary(summarizeProfile(file, PROFILE_TOP), log, gatewayCalls);
  }
}

/** Section 9: each way of calling, direct next to the gateway, and the gateway's share of direct's calls/s. */
interface ConsoleFigures {
  gzippedBytes: number;
  /** Null where the machine has no chromium. */
  load: ConsoleLoad | null;
}

function printConsole(figures: ConsoleFigures): void {
  const kib = figures.gzippedBytes / 1024;
  log('  10. Web console');
  log(`       bundle      ${f(kib, 1)} KiB gzipped, script and stylesheet together   (goal <= ${CONSOLE_GOALS.gzippedKiB})`);
  if (!figures.load) {
    log(`       first load  not measured: no ${CHROMIUM} on this machine`);
  } else {
    const loads = figures.load.firstLoadMs;
    log(
      `       first load  median ${f(median(loads), 0)} ms (${f(Math.min(...loads), 0)}–${f(Math.max(...loads), 0)}) over ${loads.length}, navigation start to the overview's figures   (goal <= ${CONSOLE_GOALS.firstLoadMs})`,
    );
  }
  log();
}

const ms = (x: number) => Number(x.toFixed(1));

function consoleResults(figures: ConsoleFigures) {
  const loads = figures.load?.firstLoadMs ?? null;
  return {
    gzippedBytes: figures.gzippedBytes,
    firstLoadMs: loads ? { median: ms(median(loads)), min: ms(Math.min(...loads)), max: ms(Math.max(...loads)), each: loads.map(ms) } : null,
    goals: { gzippedKiB: CONSOLE_GOALS.gzippedKiB, firstLoadMs: CONSOLE_GOALS.firstLoadMs },
  };
}

function printToolCalls(figures: ToolCallFigures): void {
  const row = (label: string, x: { callsPerSecond: number; p50: number; p99: number }) =>
    log(`       ${label.padEnd(8)} ${f(x.callsPerSecond, 0).padStart(6)} calls/s   p50 ${f(x.p50, 2)} ms   p99 ${f(x.p99, 2)} ms`);
  log('  9. MCP tools/call, SDK client, stateless Streamable HTTP upstream with one echo tool');
  for (const [label, part] of [
    [`${figures.sequential.calls} sequential`, figures.sequential],
    [`${figures.concurrent.calls} at ${figures.concurrent.concurrency} at a time`, figures.concurrent],
  ] as const) {
    log(`     ${label}`);
    row('direct', part.direct);
    row('gateway', part.gateway);
    log(`       ratio gateway/direct calls/s ${f(part.gateway.callsPerSecond / part.direct.callsPerSecond, 3)}; added p50 ${f(part.gateway.p50 - part.direct.p50, 2)} ms`);
  }
  log();
}

function toolCallResults(figures: ToolCallFigures) {
  const round = (x: { callsPerSecond: number; p50: number; p99: number; mean: number }) => ({
    callsPerSecond: Math.round(x.callsPerSecond),
    p50Ms: Number(x.p50.toFixed(3)),
    p99Ms: Number(x.p99.toFixed(3)),
    meanMs: Number(x.mean.toFixed(3)),
  });
  const part = (p: ToolCallFigures['sequential'] | ToolCallFigures['concurrent']) => ({
    direct: round(p.direct),
    gateway: round(p.gateway),
    ratio: Number((p.gateway.callsPerSecond / p.direct.callsPerSecond).toFixed(3)),
  });
  return {
    note: 'MCP SDK client both ways; direct = the loopback upstream itself, gateway = /mcp/gateway with the bench key (grant, rate limit, outbound MCP session, usage row)',
    sequential: { calls: figures.sequential.calls, ...part(figures.sequential) },
    concurrent: { calls: figures.concurrent.calls, concurrency: figures.concurrent.concurrency, ...part(figures.concurrent) },
  };
}

function roundCpu(c: CpuShares) {
  const r = (x: number) => Number(x.toFixed(2));
  return { gateway: r(c.gateway), proxy: r(c.proxy), upstream: r(c.upstream), loadGenerator: r(c.loadGenerator), machine: r(c.machine) };
}

function round3(s: ReturnType<typeof stats>) {
  const r = (x: number) => Number(x.toFixed(3));
  return { n: s.n, mean: r(s.mean), p50: r(s.p50), p90: r(s.p90), p99: r(s.p99), max: r(s.max) };
}

// Bounded, and never leaves a child behind.
const hardLimit = setTimeout(() => {
  process.stderr.write(`bench: over ${HARD_LIMIT_MS / 1000} s, giving up\n`);
  killChildrenNow();
  process.exit(1);
}, HARD_LIMIT_MS);
hardLimit.unref();
process.on('exit', killChildrenNow);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    killChildrenNow();
    process.exit(130);
  });
}

main().then(
  () => {
    clearTimeout(hardLimit);
    process.exit(0);
  },
  (error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    killChildrenNow();
    process.exit(1);
  },
);

/**
 * CPU per call of the gateway process, for one kind of call at a time, beside the bare proxy, and
 * optionally of several builds side by side (a commit against its parent):
 *
 *   npx tsx bench/stream-cost.ts                       # paced streams, this tree, beside the bare proxy
 *   npx tsx bench/stream-cost.ts --mode json           # non-streamed calls at 32 connections
 *   npx tsx bench/stream-cost.ts --tree /tmp/parent --tree .   # two builds, alternating repeats
 *   npx tsx bench/stream-cost.ts --tree /tmp/parent --tree . --together --no-proxy   # both loaded at once
 *   npx tsx bench/stream-cost.ts --profile=cpu         # CPU profile of the measured calls only
 *   npx tsx bench/stream-cost.ts --profile=allocations # where the measured calls allocate, garbage included
 *   npx tsx bench/stream-cost.ts --profile=promoted    # where what outlives a scavenge (what old space fills with) is allocated
 *   npx tsx bench/stream-cost.ts --perf                # `perf record` of every target meanwhile: kernel time too
 *   npx tsx bench/stream-cost.ts --perf --perf-graph   # with call graphs, for `perf script` / `perf report -g`
 *   npx tsx bench/stream-cost.ts --governed-floor      # also the least a governed call costs (bench/governed-floor-process.ts)
 *   npx tsx bench/stream-cost.ts --tree . --tree . --together "--node-args=--max-semi-space-size=8" "--node-args=--max-semi-space-size=4"
 *                                                      # node flags side by side: one --node-args per --tree
 *
 * Streams are what the figures describe: STREAM_COST_CHUNKS chunks (default 20, plus the
 * usage chunk) written 5 ms apart by the fake upstream, 16 streams at a time. Every target (the
 * bare proxy and each build of bench/gateway-process.ts, on PostgreSQL from TEST_PG_URL or
 * --database, memory coordination unless --redis) runs the same calls in turn, the order rotated
 * each repeat; the figure is the target's process CPU time (user + system, all threads, read by
 * bench/stream-cost-probe.ts inside it) over its own calls, divided by their number. That is much
 * steadier on a shared machine than throughput; comparing builds repeat by repeat steadier still.
 * Streams also give each target's time to first content (p50 and p99, medians over the repeats).
 *
 * A tree is a directory holding the project's sources (e.g. `git archive <commit> | tar -x -C dir`,
 * with node_modules linked in); its bench/gateway-process.ts is built as the bench builds it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { bundleForNode } from './bundle.ts';
import { Pool } from 'undici';
import { generateToken, SESSION_PREFIX } from '../core/identity/api-tokens.ts';
import { dropSchema } from '../test/helpers/pg-schemas.ts';
import { printProfileSummary, summarizeProfile } from './profile-summary.ts';
import { median, percentile } from './run-statistics.ts';

const BENCH_DIR = fileURLToPath(new URL('.', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
const MODEL = 'gpt-4o-mini';

const { values: args } = parseArgs({
  options: {
    mode: { type: 'string', default: 'stream' },
    tree: { type: 'string', multiple: true },
    repeats: { type: 'string', default: '5' },
    streams: { type: 'string', default: '480' },
    concurrency: { type: 'string' },
    calls: { type: 'string', default: '6000' },
    /**
     * Warm-up calls, as a multiple of one repeat's. After a quarter of one repeat, TurboFan still
     * compiled about 140 functions in each 480 streams (an eighth of the gateway's CPU in perf):
     * per-call code is called once per call and takes a few thousand calls to be optimised.
     */
    warmup: { type: 'string', default: '5' },
    chunks: { type: 'string', default: '20' },
    'chunk-delay': { type: 'string', default: '5' },
    database: { type: 'string' },
    redis: { type: 'string' },
    'no-proxy': { type: 'boolean', default: false },
    /**
     * Also the governed floor: only the work no governed gateway can skip (key, admission, journal,
     * parse and serialise), so the gateway's cost splits into governance's and our own path's.
     */
    'governed-floor': { type: 'boolean', default: false },
    /** Every target at once in each repeat: a build against another under the very same conditions. */
    together: { type: 'boolean', default: false },
    /** `cpu`, `allocations` or `promoted`. */
    profile: { type: 'string' },
    /** µs between CPU samples, or bytes between allocation samples. */
    'profile-interval': { type: 'string' },
    perf: { type: 'boolean', default: false },
    /** With --perf: call graphs too (`perf script` then says which code each sample ran under). */
    'perf-graph': { type: 'boolean', default: false },
    /** Node's flags for every target; given once per --tree, each build's own (flags side by side). */
    'node-args': { type: 'string', multiple: true },
  },
});

const MODE = args.mode === 'json' ? 'json' : 'stream';
const REPEATS = Number(args.repeats);
const CALLS = MODE === 'stream' ? Number(args.streams) : Number(args.calls);
const CONCURRENCY = Number(args.concurrency ?? (MODE === 'stream' ? 16 : 32));
const WARMUP = Math.ceil(CALLS * Number(args.warmup));
const DATABASE_URL = args.database ?? process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = args.redis ?? null;
const TREES = (args.tree ?? [REPO_ROOT]).map((tree) => resolve(tree));
/** The production node flags (`npm run start:prod`), as the bench uses them. */
const PACKAGE: { scripts: Record<string, string> } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8'));
const flagsOf = (line: string) => line.split(/\s+/).filter((arg) => arg.startsWith('--'));
const NODE_ARGS_GIVEN = (args['node-args'] ?? [PACKAGE.scripts['start:prod']!]).map(flagsOf);
const NODE_ARGS = NODE_ARGS_GIVEN[0]!;
const PROFILE_DIR = join(BENCH_DIR, 'profiles');
const PROFILE = args.profile === undefined ? null : args.profile === 'allocations' || args.profile === 'promoted' ? args.profile : 'cpu';
/** perf names JIT-compiled JavaScript functions from the map node writes with this flag. */
const withPerfMap = (flags: string[]) => (args.perf ? [...flags, '--perf-basic-prof-only-functions'] : flags);
const CHILD_NODE_ARGS = withPerfMap(NODE_ARGS);
/** The flags of the gateway built from TREES[index]. */
const gatewayNodeArgs = (index: number) => withPerfMap(NODE_ARGS_GIVEN[NODE_ARGS_GIVEN.length > 1 ? index : 0]!);

/** The bench's chat request (bench/gateway-overhead.ts). */
const SYSTEM = 'You are a concise assistant for a developer tools company. Answer in at most two sentences.';
const QUESTION = 'What is the difference between a process and a thread? Give one example of when to use each.';
const CHAT_BODY = {
  model: MODEL,
  messages: [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: QUESTION },
  ],
  max_tokens: 128,
  temperature: 0.7,
  user: 'bench-user-42',
};
const STREAM_FIELDS = { stream: true, stream_options: { include_usage: true } };
const BODY = JSON.stringify(MODE === 'stream' ? { ...CHAT_BODY, ...STREAM_FIELDS } : CHAT_BODY);

const log = (line = '') => process.stdout.write(`${line}\n`);

// ---- Children -----------------------------------------------------------------------------------

interface Child {
  name: string;
  process: ChildProcess;
  next(type: string, timeoutMs: number): Promise<Record<string, unknown>>;
  send(message: object): void;
}

const children: Child[] = [];

interface ChildStart {
  /** What follows node's own flags: the entry file, or a loader and the file. */
  entry: string[];
  env: Record<string, string>;
  cwd: string;
  nodeArgs?: string[];
}

function startChild(name: string, { entry, env, cwd, nodeArgs = [] }: ChildStart): Child {
  const childEnv = { ...process.env, ...env, NODE_ENV: 'production' };
  const proc = spawn(process.execPath, [...nodeArgs, ...entry], { cwd, env: childEnv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const inbox: Array<Record<string, unknown>> = [];
  let wake: (() => void) | null = null;
  proc.on('message', (message) => {
    inbox.push(message as Record<string, unknown>);
    wake?.();
  });
  proc.on('exit', () => wake?.());
  const child: Child = {
    name,
    process: proc,
    async next(type, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const index = inbox.findIndex((message) => message.type === type || message.type === 'error');
        if (index !== -1) {
          const [message] = inbox.splice(index, 1);
          if (message!.type === 'error') throw new Error(`${name}: ${String(message!.message)}`);
          return message!;
        }
        if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`${name} exited`);
        if (Date.now() > deadline) throw new Error(`${name}: no '${type}' within ${timeoutMs} ms`);
        await new Promise<void>((done) => {
          const timer = setTimeout(done, 250);
          wake = () => {
            clearTimeout(timer);
            done();
          };
        });
      }
    },
    send(message) {
      if (proc.connected) proc.send(message);
    },
  };
  children.push(child);
  return child;
}

async function stopChildren(): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      const proc = child.process;
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise<void>((done) => proc.once('exit', () => done()));
      child.send({ type: 'shutdown' });
      const timer = setTimeout(() => proc.kill('SIGKILL'), 8_000);
      await exited;
      clearTimeout(timer);
    }),
  );
}

process.on('exit', () => {
  for (const { process: proc } of children) if (proc.exitCode === null && proc.signalCode === null) proc.kill(9);
});

async function buildEntry(tree: string, file: string, outName: string): Promise<string> {
  return bundleForNode(join(tree, file), join(tree, 'bench', '.build', outName));
}

/** CPU time (user + system, every thread) the child has used so far, in µs, as its probe reads it. */
async function cpuMicros(child: Child): Promise<number> {
  child.send({ type: 'cpu-usage' });
  return Number((await child.next('cpu-usage', 10_000)).micros);
}

// ---- Load ---------------------------------------------------------------------------------------

interface Target {
  name: string;
  pid: number;
  pool: Pool;
  origin: string;
  authorization: string;
  /** The child process, with bench/stream-cost-probe.ts loaded. */
  child: Child;
  /** Whether it is profiled (the gateways, when asked). */
  profiled: boolean;
}

/** Frames in an SSE body, and whether it ended with [DONE]. */
function framesOf(text: string): { frames: number; done: boolean } {
  let frames = 0;
  for (let at = text.indexOf('data:'); at !== -1; at = text.indexOf('data:', at + 5)) frames += 1;
  return { frames, done: text.trimEnd().endsWith('data: [DONE]') };
}

/** A chat chunk whose delta carries text: the first token a user sees (the role chunk carries none). */
const CONTENT = /"content":"[^"]/;

/** One call: its frame count (1 for JSON), and for a stream ms until its first content chunk arrived. */
async function oneCall(target: Target): Promise<{ frames: number; firstContentMs: number }> {
  const started = performance.now();
  const response = await target.pool.request({
    path: '/v1/chat/completions',
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: target.authorization },
    body: BODY,
  });
  let text = '';
  let firstContentMs = -1;
  response.body.setEncoding('utf8');
  for await (const piece of response.body as AsyncIterable<string>) {
    text += piece;
    if (MODE === 'stream' && firstContentMs < 0 && CONTENT.test(piece)) firstContentMs = performance.now() - started;
  }
  if (response.statusCode !== 200) throw new Error(`${target.name}: HTTP ${response.statusCode}: ${text.slice(0, 200)}`);
  if (MODE === 'json') return { frames: 1, firstContentMs };
  const { frames, done } = framesOf(text);
  if (!done) throw new Error(`${target.name}: a stream ended without [DONE]`);
  return { frames, firstContentMs };
}

/**
 * `count` calls, `CONCURRENCY` at a time: the set of frame counts seen (one value when every stream
 * was whole), and each stream's ms to its first content.
 */
async function run(target: Target, count: number): Promise<{ frames: Set<number>; firstContentMs: number[] }> {
  let left = count;
  const frames = new Set<number>();
  const firstContentMs: number[] = [];
  await Promise.all(
    Array.from({ length: Math.min(CONCURRENCY, count) }, async () => {
      while (left > 0) {
        left -= 1;
        const call = await oneCall(target);
        frames.add(call.frames);
        firstContentMs.push(call.firstContentMs);
      }
    }),
  );
  return { frames, firstContentMs };
}

interface Repeat {
  cpuPerCallUs: number;
  firstContentMs: number[];
}

async function measured(target: Target): Promise<Repeat> {
  const before = await cpuMicros(target.child);
  const { firstContentMs } = await run(target, CALLS);
  return { cpuPerCallUs: ((await cpuMicros(target.child)) - before) / CALLS, firstContentMs };
}

// ---- The run ------------------------------------------------------------------------------------

/** Schemas made for the gateways, dropped however the run ends. */
const schemas: string[] = [];

async function startUpstream(): Promise<string> {
  const env = { STREAM_COST_CHUNKS: args.chunks!, STREAM_COST_CHUNK_DELAY_MS: args['chunk-delay']! };
  const entry = ['--import', 'tsx', join(BENCH_DIR, 'stream-cost-upstream.ts')];
  const upstream = startChild('fake upstream', { entry, env, cwd: REPO_ROOT });
  return String((await upstream.next('ready', 30_000)).url);
}

/** A floor the gateways are read against: the bare proxy, or the governed floor. */
async function startFloor(upstreamUrl: string, probe: string, name: 'bare proxy' | 'governed floor'): Promise<Target> {
  const file = name === 'bare proxy' ? 'bare-proxy-process' : 'governed-floor-process';
  const entry = await buildEntry(REPO_ROOT, `bench/${file}.ts`, file);
  const env = { BENCH_UPSTREAM_URL: upstreamUrl };
  const nodeArgs = ['--import', probe, ...CHILD_NODE_ARGS];
  const floor = startChild(name, { entry: [entry], env, cwd: REPO_ROOT, nodeArgs });
  const url = String((await floor.next('ready', 30_000)).url);
  const pool = new Pool(url, { connections: CONCURRENCY });
  const authorization = 'Bearer sk-bench-upstream';
  return { name, pid: floor.process.pid!, child: floor, profiled: false, pool, origin: url, authorization };
}

/** One build of the gateway, on its own schema, with a real key made through the management API. */
async function startGateway(tree: string, index: number, upstreamUrl: string, probe: string): Promise<Target> {
  const entry = await buildEntry(tree, 'bench/gateway-process.ts', 'stream-cost-gateway');
  const schema = `cost_${Date.now().toString(36)}_${process.pid}_${index}`;
  schemas.push(schema);
  const ownerToken = generateToken(SESSION_PREFIX);
  const dataDir = join(tree, 'bench', '.build', `stream-cost-data-${index}`);
  rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(dataDir, { recursive: true });
  const env: Record<string, string> = {
    BENCH_UPSTREAM_URL: upstreamUrl,
    BENCH_OWNER_TOKEN: ownerToken,
    BENCH_DATA_DIR: dataDir,
    BENCH_MODEL: MODEL,
    BENCH_DATABASE_URL: DATABASE_URL,
    BENCH_DATABASE_SCHEMA: schema,
  };
  if (REDIS_URL) Object.assign(env, { BENCH_REDIS_URL: REDIS_URL, BENCH_REDIS_PREFIX: `cost:${schema}` });
  const name = TREES.length > 1 ? `gateway ${index + 1} (${tree.split('/').pop()})` : 'gateway';
  const nodeArgs = ['--import', probe, ...gatewayNodeArgs(index)];
  if (NODE_ARGS_GIVEN.length > 1) log(`  ${name}: node flags ${gatewayNodeArgs(index).join(' ') || '(none)'}`);
  const gateway = startChild(name, { entry: [entry], env, cwd: tree, nodeArgs });
  const url = String((await gateway.next('ready', 90_000)).url);
  const created = await fetch(`${url}/client/keys`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ownerToken}` },
    body: JSON.stringify({ name: 'stream-cost', scopes: ['inference'] }),
  });
  const key = ((await created.json()) as { key?: string }).key;
  if (created.status !== 201 || !key) throw new Error(`${name}: key creation answered ${created.status}`);
  const pool = new Pool(url, { connections: CONCURRENCY });
  const authorization = `Bearer ${key}`;
  return { name, pid: gateway.process.pid!, child: gateway, profiled: PROFILE !== null, pool, origin: url, authorization };
}

function describeRun(): string {
  const streams = `streams of ${args.chunks} chunks ${args['chunk-delay']} ms apart (+ usage chunk)`;
  const calls = MODE === 'stream' ? streams : 'non-streamed chat calls';
  return `${calls}, ${CONCURRENCY} at a time, ${CALLS} per target and repeat, ${REPEATS} repeats`;
}

/**
 * µs of CPU per call, by target: every target in turn, the order rotated each repeat, or with
 * --together all of them at once (each still at its own concurrency), so that whatever else the
 * machine does at the time weighs on each build alike.
 */
async function measureAll(targets: Target[]): Promise<Map<string, Repeat[]>> {
  const samples = new Map<string, Repeat[]>(targets.map((target) => [target.name, []]));
  for (let repeat = 0; repeat < REPEATS; repeat++) {
    if (args.together) {
      const figures = await Promise.all(targets.map(measured));
      for (const [index, target] of targets.entries()) samples.get(target.name)!.push(figures[index]!);
    } else {
      for (let j = 0; j < targets.length; j++) {
        const target = targets[(repeat + j) % targets.length]!;
        samples.get(target.name)!.push(await measured(target));
      }
    }
    const figures = targets.map((target) => `${target.name} ${samples.get(target.name)!.at(-1)!.cpuPerCallUs.toFixed(0)} µs`);
    log(`  repeat ${repeat + 1}: ${figures.join(', ')}`);
  }
  return samples;
}

function printMedians(targets: Target[], repeats: Map<string, Repeat[]>): void {
  const samples = new Map([...repeats].map(([name, rows]) => [name, rows.map((row) => row.cpuPerCallUs)]));
  log();
  log(`CPU per ${MODE === 'stream' ? 'stream' : 'call'}, median (range) over ${REPEATS} repeats:`);
  const floor = samples.get('bare proxy');
  for (const target of targets) {
    const values = samples.get(target.name)!;
    const ratio = floor && target.name !== 'bare proxy' ? `   ${spread(ratios(values, floor), 2)}× the bare proxy` : '';
    log(`  ${target.name.padEnd(24)} ${spread(values, 0)} µs${ratio}`);
  }
  if (MODE === 'stream') printFirstContent(targets, repeats);
  // Repeat by repeat, each build against the one before it (a commit against its parent): a drift
  // of the machine moves both alike.
  const gateways = targets.filter((target) => target.name !== 'bare proxy');
  for (const [index, target] of gateways.entries()) {
    if (index === 0) continue;
    const parent = gateways[index - 1]!;
    log(`  ${target.name} / ${parent.name}, repeat by repeat: ${spread(ratios(samples.get(target.name)!, samples.get(parent.name)!), 3)}`);
  }
}

/**
 * Time to the first content chunk, p50 and p99 of each repeat's streams, median (range) over the
 * repeats. Every stream is paced alike, so CONCURRENCY streams start together each round and the
 * last of them waits for the others' starts: the p99 is about CONCURRENCY times what starting a
 * stream costs the process.
 */
function printFirstContent(targets: Target[], repeats: Map<string, Repeat[]>): void {
  log();
  log(`Time to first content, ms, median (range) over ${REPEATS} repeats:`);
  for (const target of targets) {
    const sorted = repeats.get(target.name)!.map((row) => [...row.firstContentMs].sort((a, b) => a - b));
    const p50 = sorted.map((values) => percentile(values, 50));
    const p99 = sorted.map((values) => percentile(values, 99));
    log(`  ${target.name.padEnd(24)} p50 ${spread(p50, 3)}   p99 ${spread(p99, 3)}`);
  }
}

/** `a[i] / b[i]` for each repeat i. */
const ratios = (a: number[], b: number[]) => a.map((value, index) => value / b[index]!);

/** "median (min–max)". */
function spread(values: number[], digits: number): string {
  return `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)})`;
}

async function writeProfiles(targets: Target[]): Promise<void> {
  mkdirSync(PROFILE_DIR, { recursive: true });
  for (const [index, target] of targets.entries()) {
    if (!target.profiled) continue;
    const extension = PROFILE === 'cpu' ? 'cpuprofile' : 'heapprofile';
    const file = join(PROFILE_DIR, `stream-cost-${MODE}-${Date.now()}-${index}.${extension}`);
    target.child.send({ type: 'probe-profile-stop', file });
    await target.child.next('profiled', 30_000);
    log();
    log(`Profile of ${target.name} (${file}):`);
    if (PROFILE === 'cpu') printProfileSummary(summarizeProfile(file, 30), log);
    else printAllocations(file, REPEATS * CALLS);
  }
}

interface AllocationNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: AllocationNode[];
}

/**
 * Bytes per measured call by the function that allocated them: every allocation (garbage included),
 * or with `promoted` what outlived a scavenge, named with its caller too (where a call's objects are
 * kept: a queue, a timer, a pending promise, is usually the caller's doing).
 */
function printAllocations(file: string, calls: number): void {
  const { head } = JSON.parse(readFileSync(file, 'utf8')) as { head: AllocationNode };
  const bySite = new Map<string, number>();
  let total = 0;
  const frame = (node: AllocationNode) => `${node.callFrame.functionName || '(anonymous)'} ${node.callFrame.url.replace(/^.*\//, '')}:${node.callFrame.lineNumber + 1}`;
  const visit = (node: AllocationNode, caller: string | null) => {
    const own = frame(node);
    const site = PROFILE === 'promoted' && caller !== null ? `${own} < ${caller}` : own;
    bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
    total += node.selfSize;
    for (const child of node.children) visit(child, own);
  };
  visit(head, null);
  const what = PROFILE === 'promoted' ? 'outlived a scavenge' : 'allocated';
  log(`  ${(total / calls / 1024).toFixed(1)} KiB ${what} per ${MODE === 'stream' ? 'stream' : 'call'}; by function:`);
  for (const [site, bytes] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, 30)) {
    log(`    ${((100 * bytes) / total).toFixed(1).padStart(5)}%  ${(bytes / calls / 1024).toFixed(2).padStart(7)} KiB  ${site}`);
  }
}

/**
 * `perf record` of one target's process while the calls run: where its CPU time goes, kernel
 * included (the V8 profile counts the time a process waits to run again after a system call as
 * that call's). `stop()` ends it and prints the symbols by self time and the split by binary.
 */
function startPerf(target: Target): { stop(): Promise<void> } {
  mkdirSync(PROFILE_DIR, { recursive: true });
  const file = join(PROFILE_DIR, `perf-${MODE}-${target.name.replace(/\W+/g, '-')}.data`);
  const graph = args['perf-graph'] ? ['-g'] : [];
  const perf = spawn('perf', ['record', '-q', '-e', 'cpu-clock', '-F', '4999', ...graph, '-p', String(target.pid), '-o', file], { stdio: 'ignore' });
  return {
    async stop() {
      const exited = new Promise<void>((done) => perf.once('exit', () => done()));
      perf.kill('SIGINT');
      await exited;
      log();
      log(`perf of ${target.name} (${file}), self time:`);
      for (const sort of ['dso', 'sym']) {
        const options = ['--stdio', '-q', '--no-children', '--sort', sort, '--percent-limit', '0.7'];
        const report = spawnSync('perf', ['report', '-i', file, ...options], { encoding: 'utf8' });
        for (const line of report.stdout.split('\n').filter(Boolean).slice(0, 45)) log(`  ${line.trim().slice(0, 140)}`);
        log();
      }
    },
  };
}

async function main(): Promise<void> {
  const upstreamUrl = await startUpstream();
  const targets: Target[] = [];
  const probe = await buildEntry(REPO_ROOT, 'bench/stream-cost-probe.ts', 'stream-cost-probe');
  if (!args['no-proxy']) targets.push(await startFloor(upstreamUrl, probe, 'bare proxy'));
  // Before the gateways: the first of them is then read against it repeat by repeat.
  if (args['governed-floor']) targets.push(await startFloor(upstreamUrl, probe, 'governed floor'));
  for (const [index, tree] of TREES.entries()) targets.push(await startGateway(tree, index, upstreamUrl, probe));

  log(`stream-cost: ${describeRun()}`);
  const database = DATABASE_URL.replace(/\/\/[^@]*@/, '//…@');
  const coordination = REDIS_URL ? 'Redis' : 'memory';
  log(`  database ${database}, coordination ${coordination}; node flags ${NODE_ARGS.join(' ') || '(none)'}`);
  // Warm-up, and a check that every target answers the same stream.
  const frameCounts = new Set<number>();
  for (const target of targets) for (const frames of (await run(target, WARMUP)).frames) frameCounts.add(frames);
  if (frameCounts.size !== 1) throw new Error(`the targets answered different frame counts: ${[...frameCounts]}`);
  if (MODE === 'stream') log(`  ${[...frameCounts][0]} data: frames per stream ([DONE] included)`);

  if (PROFILE) {
    const interval = Number(args['profile-interval'] ?? (PROFILE === 'cpu' ? 100 : 1024));
    const start = { type: 'probe-profile-start', kind: PROFILE, interval };
    const profiled = targets.filter((target) => target.profiled);
    for (const target of profiled) target.child.send(start);
    for (const target of profiled) await target.child.next('profiling', 10_000);
  }
  const recordings = args.perf ? targets.map(startPerf) : [];
  printMedians(targets, await measureAll(targets));
  for (const recording of recordings) await recording.stop();
  if (PROFILE) await writeProfiles(targets);
}

async function cleanUp(): Promise<void> {
  await stopChildren();
  for (const schema of schemas) {
    await dropSchema(DATABASE_URL, schema).catch((error: unknown) => log(`could not drop schema ${schema}: ${error}`));
  }
}

main()
  .finally(cleanUp)
  .then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`stream-cost: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exit(1);
    },
  );

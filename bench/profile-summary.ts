/**
 * Summarises a V8 .cpuprofile (from `node --cpu-prof`): where the gateway's CPU time goes, by
 * area (fastify, undici, zod, gateway code…) and by function (self and inclusive time).
 *
 *   npx tsx bench/profile-summary.ts bench/profiles/CPU….cpuprofile
 *
 * `BENCH_PROFILE=1 npm run bench` profiles the gateway child, one profile per phase (the profile
 * of one phase holds the gateway's idle time while the other targets are measured), and prints this
 * for each at the end.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileSummary {
  totalMs: number;
  idleMs: number;
  areas: Array<{ area: string; selfMs: number }>;
  topSelf: Array<{ fn: string; selfMs: number }>;
  topInclusive: Array<{ fn: string; inclusiveMs: number }>;
}

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));

function shortUrl(url: string): string {
  let path = url.replace(/^file:\/\//, '');
  if (path.startsWith(REPO_ROOT)) path = path.slice(REPO_ROOT.length);
  return path.replace(/^.*node_modules\//, '~/');
}

function describe(frame: CallFrame): string {
  const name = frame.functionName || '(anonymous)';
  if (!frame.url) return name;
  // code compiled by tsx reports line 0 for everything: leave the line out then
  return frame.lineNumber > 0 ? `${name} ${shortUrl(frame.url)}:${frame.lineNumber + 1}` : `${name} ${shortUrl(frame.url)}`;
}

/** Which part of the stack a frame belongs to. */
function areaOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (!url) {
    if (functionName.startsWith('(')) return functionName; // (garbage collector), (idle), (program)
    return 'native / builtins';
  }
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) {
    const name = pkg[1]!;
    if (name === 'fastify' || name.startsWith('@fastify/') || name === 'find-my-way' || name === 'light-my-request' || name === 'avvio') return 'fastify (+router)';
    if (name === 'pino' || name.startsWith('pino-') || name === 'sonic-boom') return 'pino (logging)';
    return name;
  }
  if (url.startsWith('node:')) return 'node internals';
  const path = shortUrl(url);
  // The bench runs the gateway as one esbuild bundle: its own code, whichever folder it came from.
  if (path.startsWith('bench/.build/gateway-process/')) return 'gateway code (bundled)';
  const top = path.split('/')[0];
  if (top === 'core' || top === 'plugins' || top === 'providers' || top === 'adapters' || top === 'config') return `gateway ${top}/`;
  return path.includes('/') ? top! : path;
}

export function summarizeProfile(file: string, top = 20): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }

  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, index) => {
    // timeDeltas[i] is the gap before sample i; attribute the following gap to sample i instead
    const delta = profile.timeDeltas[index + 1] ?? 0;
    selfUs.set(id, (selfUs.get(id) ?? 0) + Math.max(0, delta));
  });

  const areas = new Map<string, number>();
  const selfByFn = new Map<string, number>();
  const inclusiveByFn = new Map<string, number>();
  let totalUs = 0;
  let idleUs = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    if (!node) continue;
    totalUs += us;
    const frame = node.callFrame;
    if (frame.functionName === '(idle)') idleUs += us;
    const area = areaOf(frame);
    areas.set(area, (areas.get(area) ?? 0) + us);
    const fn = describe(frame);
    selfByFn.set(fn, (selfByFn.get(fn) ?? 0) + us);
    // inclusive: every distinct function on the stack gets this sample's time once
    const seen = new Set<string>();
    for (let cursor: number | undefined = id; cursor !== undefined; cursor = parent.get(cursor)) {
      const key = describe(byId.get(cursor)!.callFrame);
      if (seen.has(key)) continue;
      seen.add(key);
      inclusiveByFn.set(key, (inclusiveByFn.get(key) ?? 0) + us);
    }
  }

  const ms = (us: number) => Math.round(us / 100) / 10;
  const skipInclusive = /^\((root|program|idle|garbage collector)\)/;
  return {
    totalMs: ms(totalUs),
    idleMs: ms(idleUs),
    areas: [...areas].sort((a, b) => b[1] - a[1]).map(([area, us]) => ({ area, selfMs: ms(us) })),
    topSelf: [...selfByFn]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([fn, us]) => ({ fn, selfMs: ms(us) })),
    topInclusive: [...inclusiveByFn]
      .filter(([fn]) => !skipInclusive.test(fn))
      .sort((a, b) => b[1] - a[1])
      .slice(0, top * 2)
      .map(([fn, us]) => ({ fn, inclusiveMs: ms(us) })),
  };
}

/** `calls`: the gateway calls the profile covers, when known: busy time per call is printed too. */
export function printProfileSummary(summary: ProfileSummary, log: (line: string) => void = console.log, calls: number | null = null): void {
  const busy = summary.totalMs - summary.idleMs || 1;
  const pct = (value: number) => `${((100 * value) / busy).toFixed(1).padStart(5)}%`;
  const perCall = calls ? `, ${((1000 * busy) / calls).toFixed(1)} µs busy per call (${calls} calls)` : '';
  log(`  sampled ${summary.totalMs} ms, of which idle ${summary.idleMs} ms${perCall}; percentages are of busy time`);
  // Samples are taken on the wall clock: a thread waiting for a core still counts as busy.
  if (calls) log('  (busy is wall time between samples, not CPU time: on a crowded machine it includes waiting for a core)');
  log('  self time by area:');
  for (const { area, selfMs } of summary.areas.filter((a) => a.area !== '(idle)').slice(0, 16)) log(`    ${pct(selfMs)}  ${selfMs.toFixed(1).padStart(9)} ms  ${area}`);
  log('  top functions by self time:');
  for (const { fn, selfMs } of summary.topSelf) if (!fn.startsWith('(idle)')) log(`    ${pct(selfMs)}  ${fn}`);
  log('  top functions by inclusive time:');
  for (const { fn, inclusiveMs } of summary.topInclusive) log(`    ${pct(inclusiveMs)}  ${fn}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const file = process.argv[2];
  if (!file) {
    console.error('usage: tsx bench/profile-summary.ts <file.cpuprofile> [top]');
    process.exit(2);
  }
  printProfileSummary(summarizeProfile(file, Number(process.argv[3] ?? 20)));
}

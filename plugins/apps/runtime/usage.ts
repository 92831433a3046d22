import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { statFields, treeOf } from './processes.ts';

const execFileAsync = promisify(execFile);

/**
 * What an instance's process tree uses, read from /proc: the group's leader and every descendant
 * (processes.ts `treeOf`, the tree the runtime signals), so a sandbox's bwrap, shell and app count
 * together, as do the workers an app forks.
 */
export interface TreeUsage {
  /** Processes in the tree when read. */
  processes: number;
  /** Resident memory: Σ /proc/PID/statm `resident` × the page size. */
  memoryBytes: number;
  /**
   * CPU time since the tree started, in ms: Σ utime + stime + cutime + cstime (/proc/PID/stat
   * fields 14–17) over its live processes; children already waited for are in their parent's c*time.
   */
  cpuMs: number;
}

/** The machine's clock ticks per second (`getconf CLK_TCK`) and page size; Linux's usual ones when getconf is absent. */
export interface ProcUnits {
  clockTicks: number;
  pageSize: number;
}

let units: Promise<ProcUnits> | null = null;

async function getconf(name: string, fallback: number): Promise<number> {
  try {
    const value = Number((await execFileAsync('getconf', [name])).stdout.trim());
    return Number.isInteger(value) && value > 0 ? value : fallback;
  } catch {
    return fallback;
  }
}

/** Read once per process. */
export function procUnits(): Promise<ProcUnits> {
  units ??= (async () => ({ clockTicks: await getconf('CLK_TCK', 100), pageSize: await getconf('PAGESIZE', 4096) }))();
  return units;
}

/** The tree led by `pgid`; null when nothing of it is left. */
export async function treeUsage(pgid: number, options: { procRoot?: string; units?: ProcUnits } = {}): Promise<TreeUsage | null> {
  const procRoot = options.procRoot ?? '/proc';
  const { clockTicks, pageSize } = options.units ?? (await procUnits());
  let processes = 0;
  let pages = 0;
  let ticks = 0;
  for (const pid of await treeOf(pgid, procRoot)) {
    const fields = await statFields(pid, procRoot);
    let statm: string;
    try {
      statm = await readFile(`${procRoot}/${pid}/statm`, 'utf8');
    } catch {
      continue;
    }
    if (!fields) continue;
    processes += 1;
    pages += Number(statm.split(' ')[1] ?? 0);
    // fields[0] is stat field 3: utime (14), stime (15), cutime (16), cstime (17) are fields[11..14].
    for (let i = 11; i <= 14; i += 1) ticks += Number(fields[i] ?? 0);
  }
  if (processes === 0) return null;
  return { processes, memoryBytes: pages * pageSize, cpuMs: Math.round((ticks * 1000) / clockTicks) };
}

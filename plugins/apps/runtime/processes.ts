import { readdir, readFile } from 'node:fs/promises';

/**
 * The process table as /proc shows it. A sandboxed app does not stay in the group the runtime made:
 * bwrap's `--new-session` gives it a session of its own, so signalling the group alone reaches only
 * bwrap. The runtime signals the group and every descendant of its leader; inside the sandbox's pid
 * namespace nothing can escape that tree (orphans are re-parented to the namespace's init).
 */
export interface ProcessEntry {
  pid: number;
  ppid: number;
  pgid: number;
  startTicks: number;
}

/** Every process of `procRoot` (/proc; a test hands a folder shaped like it). */
export async function processTable(procRoot = '/proc'): Promise<ProcessEntry[]> {
  const names = await readdir(procRoot);
  const entries: ProcessEntry[] = [];
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const entry = await readStat(Number(name), procRoot);
    if (entry) entries.push(entry);
  }
  return entries;
}

/** /proc/PID/stat: `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses, so split after the last `)`. */
async function readStat(pid: number, procRoot = '/proc'): Promise<ProcessEntry | null> {
  const fields = await statFields(pid, procRoot);
  // fields[0] is the state (stat field 3): ppid is field 4, pgrp 5, starttime 22.
  return fields ? { pid, ppid: Number(fields[1]), pgid: Number(fields[2]), startTicks: Number(fields[19]) } : null;
}

/** The fields of /proc/PID/stat after `(comm)`, from the state (field 3) on; null for a process gone. */
export async function statFields(pid: number, procRoot = '/proc'): Promise<string[] | null> {
  let text: string;
  try {
    text = await readFile(`${procRoot}/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  return text.slice(text.lastIndexOf(')') + 2).split(' ');
}

export async function startTicksOf(pid: number): Promise<number | null> {
  return (await readStat(pid))?.startTicks ?? null;
}

/** The pids of the group `pgid` and of every descendant of its leader, leader first. */
export async function treeOf(pgid: number, procRoot = '/proc'): Promise<number[]> {
  const table = await processTable(procRoot);
  const children = new Map<number, number[]>();
  for (const entry of table) children.set(entry.ppid, [...(children.get(entry.ppid) ?? []), entry.pid]);
  const found = new Set<number>(table.filter((entry) => entry.pgid === pgid).map((entry) => entry.pid));
  const queue = [pgid, ...found];
  while (queue.length > 0) {
    for (const child of children.get(queue.shift()!) ?? []) {
      if (!found.has(child)) {
        found.add(child);
        queue.push(child);
      }
    }
  }
  found.delete(pgid);
  return table.some((entry) => entry.pid === pgid) ? [pgid, ...found] : [...found];
}

/** Sends `signal` to the group and the leader's whole tree; answers how many processes it reached. */
export async function signalTree(pgid: number, signal: NodeJS.Signals): Promise<number> {
  const pids = await treeOf(pgid);
  try {
    process.kill(-pgid, signal);
  } catch {}
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {}
  }
  return pids.length;
}

/**
 * Kills a group a dead host left behind, unless its pid now belongs to someone else: a live leader
 * must have the recorded start time. A group whose leader is gone is killed by its pgid (the kernel
 * does not hand out a pid still in use as a group id).
 */
export async function killOrphanGroup(pgid: number, startTicks: number | null): Promise<number> {
  const leader = await startTicksOf(pgid);
  if (leader !== null && startTicks !== null && leader !== startTicks) return 0;
  return signalTree(pgid, 'SIGKILL');
}

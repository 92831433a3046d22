import { readFileSync } from 'node:fs';

/** USER_HZ: /proc/<pid>/stat counts CPU time in these ticks (100 on every mainstream Linux). */
export const CLOCK_TICKS_PER_S = 100;

/** CPU seconds (user + system) processes have used so far (summed), or NaN when one cannot be read. */
export function processCpuSeconds(pids: number | number[]): number {
  let total = 0;
  for (const pid of typeof pids === 'number' ? [pids] : pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      total += (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_S;
    } catch {
      return NaN;
    }
  }
  return total;
}

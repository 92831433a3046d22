/**
 * BENCH_WORKERS=n (n > 1): the gateway child becomes the cluster primary `server.workers` makes
 * (core/kernel/worker-processes.ts), and its n workers serve the bench on one shared port. A
 * worker's messages reach this primary, not the bench parent, so the primary speaks for them:
 *
 * - `ready` once every worker listens, with every pid of the gateway (this one first), so the
 *   parent counts the CPU and memory of all of them;
 * - `stats` summed over this process and every worker (each one's peak RSS, RSS, heap, external):
 *   the memory the deployment takes;
 * - `profile-*` go to the first worker alone (one worker's profile shows where a call's time goes);
 * - `shutdown` (or the parent going away) is a SIGTERM to this primary, which drains every worker.
 */
import cluster, { type Worker } from 'node:cluster';
import { runWorkerPrimary } from '../core/kernel/worker-processes.ts';
import { processStats, tellParent, type ChildMessage, type ParentMessage } from './ipc.ts';

type Stats = Extract<ChildMessage, { type: 'stats' }>;

function sum(all: Stats[]): Stats {
  const total = (field: 'maxRssKiB' | 'rssBytes' | 'heapUsedBytes' | 'externalBytes') => all.reduce((acc, s) => acc + s[field], 0);
  return {
    type: 'stats',
    maxRssKiB: total('maxRssKiB'),
    rssBytes: total('rssBytes'),
    heapUsedBytes: total('heapUsedBytes'),
    externalBytes: total('externalBytes'),
    afterGc: all.every((s) => s.afterGc),
  };
}

const workers = (): Worker[] => Object.values(cluster.workers ?? {}).filter((worker): worker is Worker => worker !== undefined);

/** Runs the primary until every worker has exited, then exits with the kernel primary's code. */
export async function runBenchPrimary(count: number, shutdownGraceMs: number): Promise<never> {
  let listening = 0;
  /** Answers to one `stats` request, until every worker has sent its own. */
  let collecting: { answers: Stats[]; expected: number; gc: boolean } | null = null;

  cluster.on('message', (_worker, message: ChildMessage) => {
    if (message?.type === 'ready') {
      listening += 1;
      // The first worker's `ready` alone would let the bench start while the others are still booting.
      if (listening === count) void tellParent({ ...message, pids: [process.pid, ...workers().map((worker) => worker.process.pid!)] });
    } else if (message?.type === 'stats' && collecting) {
      collecting.answers.push(message);
      if (collecting.answers.length === collecting.expected) {
        const all = [processStats(collecting.gc), ...collecting.answers];
        collecting = null;
        void tellParent(sum(all));
      }
    } else if (message?.type === 'profile-started' || message?.type === 'profile-written' || message?.type === 'error') {
      void tellParent(message);
    }
  });

  const stop = () => process.kill(process.pid, 'SIGTERM');
  process.on('message', (message: ParentMessage) => {
    if (message?.type === 'shutdown') {
      stop();
    } else if (message?.type === 'stats') {
      const all = workers();
      collecting = { answers: [], expected: all.length, gc: message.gc === true };
      for (const worker of all) worker.send(message);
    } else if (message?.type === 'profile-start' || message?.type === 'profile-stop') {
      const first = workers().sort((a, b) => a.id - b.id)[0];
      if (first) first.send(message);
      else void tellParent({ type: 'error', message: 'no gateway worker to profile' });
    }
  });
  process.on('disconnect', stop);

  const code = await runWorkerPrimary({ count, shutdownGraceMs, log: (line) => process.stdout.write(`${line}\n`) });
  process.exit(code);
}

import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import type { Registry } from 'prom-client';
import promClient from 'prom-client';

/**
 * `server.workers`: one process per core sharing the listening port, through Node's `cluster`.
 *
 * The primary serves nothing itself: it starts the first worker alone and waits until it listens, so
 * the migrations and the first start's bootstrap (and its one-time owner token) run exactly once,
 * then starts the rest. A worker that dies while the service runs is replaced in the same slot, after
 * a pause that grows while replacements keep dying young. SIGTERM/SIGINT reach every worker, each
 * drains its own requests (main.ts), and the primary exits once all have, 0 only if every one did.
 *
 * Everything a worker keeps for itself stays correct across processes because the deployment is the
 * one several replicas already make: PostgreSQL and Redis shared (the boot refuses anything else),
 * the billing journal per process (its segments are replayed by a live process when their owner dies).
 */

/** Sent by a worker once it listens. */
const LISTENING = 'svc:worker-listening';
/** A worker asking the primary for every worker's metrics, and the answer. */
const METRICS_REQUEST = 'svc:metrics-request';
const METRICS_ANSWER = 'svc:metrics-answer';
/** The worker's slot, 1..count: a replacement takes its predecessor's, so the `worker` label is stable. */
const SLOT_VARIABLE = 'SVC_WORKER_SLOT';

/** A replacement of a worker that lived less than this counts as another early death. */
const EARLY_DEATH_MS = 30_000;
const FIRST_RESTART_DELAY_MS = 500;
const MAX_RESTART_DELAY_MS = 30_000;
/** How long a primary gives a worker to answer for its metrics. */
const METRICS_TIMEOUT_MS = 5_000;

/** `auto`: one per core this process may use. */
export function workerCount(setting: number | 'auto'): number {
  return setting === 'auto' ? availableParallelism() : setting;
}

/** What several processes would each keep apart, and so cannot share; null when the storage allows it. */
export function unsharedStorage(storage: { database: { driver: string }; coordination: { driver: string } }): string | null {
  const reasons: string[] = [];
  if (storage.database.driver !== 'postgres') {
    reasons.push(`the embedded database (${storage.database.driver}) belongs to one process: set DATABASE_URL`);
  }
  if (storage.coordination.driver !== 'redis') {
    reasons.push('in-memory coordination would give each process its own limits and caps: set REDIS_URL');
  }
  return reasons.length === 0 ? null : reasons.join('; ');
}

/** True in a process the primary started (its slot is set). */
export function isWorkerProcess(): boolean {
  return cluster.isWorker && process.env[SLOT_VARIABLE] !== undefined;
}

/** This worker's slot (1..count), or null outside a cluster. */
export function workerSlot(): number | null {
  return isWorkerProcess() ? Number(process.env[SLOT_VARIABLE]) : null;
}

/** In a worker: tell the primary this worker listens. No-op outside a cluster. */
export function reportListening(): void {
  if (isWorkerProcess()) process.send?.({ type: LISTENING });
}

export interface PrimaryOptions {
  count: number;
  /** Each worker's own drain time; the primary waits this long and a little more before killing. */
  shutdownGraceMs: number;
  log: (line: string) => void;
}

/**
 * Runs the cluster's primary: resolves with the process's exit code once every worker has exited
 * after a signal, or at once when the first worker could not start (its own output says why).
 */
export function runWorkerPrimary(options: PrimaryOptions): Promise<number> {
  const { count, log } = options;
  const aggregator = new promClient.AggregatorRegistry();
  const bySlot = new Map<number, Worker>();
  const startedAt = new Map<Worker, number>();
  const earlyDeaths = new Map<number, number>();
  let stopping = false;
  let failed = false;
  let firstListens = false;

  return new Promise<number>((resolve) => {
    const finishWhenAllExited = () => {
      if (bySlot.size === 0) resolve(failed ? 1 : 0);
    };

    const start = (slot: number): Worker => {
      const worker = cluster.fork({ [SLOT_VARIABLE]: String(slot) });
      bySlot.set(slot, worker);
      startedAt.set(worker, Date.now());
      worker.on('message', (message: { type?: string; id?: number }) => {
        if (message?.type !== METRICS_REQUEST) return;
        aggregator.clusterMetrics().then(
          (text) => worker.isConnected() && worker.send({ type: METRICS_ANSWER, id: message.id, text }),
          (error: Error) => worker.isConnected() && worker.send({ type: METRICS_ANSWER, id: message.id, error: error.message }),
        );
      });
      worker.once('exit', (code, signal) => {
        bySlot.delete(slot);
        const lived = Date.now() - (startedAt.get(worker) ?? 0);
        startedAt.delete(worker);
        if (stopping) {
          if (code !== 0) failed = true;
          finishWhenAllExited();
          return;
        }
        if (!firstListens) {
          // The first start failed (a config the schema accepts but the start refuses, a port in use):
          // its own output says why, and starting it again would fail the same way.
          stopping = true;
          log(`worker ${slot} exited (${signal ?? code}) before listening; not starting the others`);
          resolve(code === 0 || code === null ? 1 : code);
          return;
        }
        const deaths = lived < EARLY_DEATH_MS ? (earlyDeaths.get(slot) ?? 0) + 1 : 1;
        earlyDeaths.set(slot, deaths);
        const delay = Math.min(MAX_RESTART_DELAY_MS, FIRST_RESTART_DELAY_MS * 2 ** (deaths - 1));
        log(`worker ${slot} (pid ${worker.process.pid}) exited (${signal ?? code}); replacing it in ${delay} ms`);
        setTimeout(() => {
          if (!stopping) start(slot);
        }, delay).unref();
      });
      return worker;
    };

    const stop = (signal: NodeJS.Signals) => {
      if (stopping) return;
      stopping = true;
      log(`${signal}: stopping ${bySlot.size} worker(s)`);
      for (const worker of bySlot.values()) worker.process.kill(signal);
      // Each worker ends itself after its grace period; this only catches one that cannot.
      setTimeout(() => {
        for (const worker of bySlot.values()) worker.process.kill('SIGKILL');
      }, options.shutdownGraceMs + 5_000).unref();
      finishWhenAllExited();
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));

    // The first worker alone: it migrates and, on a first start, creates the organisation.
    const first = start(1);
    first.on('message', (message: { type?: string }) => {
      if (message?.type !== LISTENING || stopping || firstListens) return;
      firstListens = true;
      log(`worker 1 (pid ${first.process.pid}) listens; starting ${count - 1} more`);
      for (let slot = 2; slot <= count; slot++) start(slot);
    });
  });
}

/**
 * In a worker, the metrics of every worker in one text (each series labelled with its `worker`);
 * in a process outside a cluster, the registry's own.
 */
export function workerMetrics(registry: Registry): Promise<string> {
  if (!isWorkerProcess()) return registry.metrics();
  return new Promise<string>((resolve, reject) => {
    const id = nextMetricsRequest++;
    const onMessage = (message: { type?: string; id?: number; text?: string; error?: string }) => {
      if (message?.type !== METRICS_ANSWER || message.id !== id) return;
      clearTimeout(timer);
      process.off('message', onMessage);
      if (message.error !== undefined) reject(new Error(`metrics of the other workers: ${message.error}`));
      else resolve(message.text ?? '');
    };
    const timer = setTimeout(() => {
      process.off('message', onMessage);
      reject(new Error('the primary did not answer for the workers’ metrics'));
    }, METRICS_TIMEOUT_MS + 1_000);
    process.on('message', onMessage);
    process.send?.({ type: METRICS_REQUEST, id });
  });
}
let nextMetricsRequest = 0;

/**
 * In a worker: label this registry's series with the worker's slot and answer the primary's requests
 * for them. Called once, by the app the worker serves.
 */
export function shareWorkerMetrics(registry: Registry): void {
  const slot = workerSlot();
  if (slot === null) return;
  registry.setDefaultLabels({ worker: String(slot) });
  promClient.AggregatorRegistry.setRegistries([registry]);
  // Constructing one adds the worker's listener for the primary's requests.
  new promClient.AggregatorRegistry();
}

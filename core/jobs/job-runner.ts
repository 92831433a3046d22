import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import type { Database, Transaction } from '../ports/database.ts';
import type { ClaimedJob, JobLeaseStore, JobOutcome, PeriodicStore } from '../ports/queue.ts';
import type { JobRegistry } from './job-registry.ts';
import type { WorkerNudges } from './job-queue.ts';
import { JobInterrupted, PermanentJobError, RetryJobAt, SnoozeJob, jobErrorMessage, retryDelayMs, type Job, type QueueDefinition } from './queue-definitions.ts';

export interface JobRunnerSettings {
  /** How often an idle worker looks for due jobs, expired leases and periodic ticks. */
  pollIntervalMs: number;
  /** On close, how long running jobs may finish before their leases are given back. */
  drainMs: number;
  /**
   * The queues this worker claims: names, or prefixes ending in `.*`. Absent: every registered queue.
   * Jobs of the others wait for a worker that takes them (config `jobs.queues`).
   */
  queues?: readonly string[];
}

/** Whether a worker told to take `patterns` (names, or prefixes ending in `.*`) claims `queue`; none given: every queue. */
export function takesQueue(patterns: readonly string[] | undefined, queue: string): boolean {
  if (!patterns) return true;
  return patterns.some((pattern) => (pattern.endsWith('.*') ? queue.startsWith(pattern.slice(0, -1)) : queue === pattern));
}

/**
 * Calls fire once ms of the clock's time have passed; the answer cancels it. The runner keeps a
 * run's timeout with it (lease renewals stay real timers: they are about this process staying alive).
 */
export type ScheduleTimer = (ms: number, fire: () => void) => () => void;

const realTimer: ScheduleTimer = (ms, fire) => {
  const timer = setTimeout(fire, ms);
  timer.unref();
  return () => clearTimeout(timer);
};

export interface JobRunnerDeps {
  leases: JobLeaseStore;
  periodic: PeriodicStore;
  /** For `job.complete` transactions. */
  database: Database;
  registry: JobRegistry;
  clock: () => Date;
  random?: () => number;
  logger: Pick<FastifyBaseLogger, 'warn' | 'error'>;
  settings: JobRunnerSettings;
  workerId?: string;
  /** Default: a real timer. Tests give their clock's, so a run times out when the clock is moved. */
  schedule?: ScheduleTimer;
}

interface ActiveJob {
  readonly claimed: ClaimedJob;
  readonly definition: QueueDefinition;
  readonly controller: AbortController;
  heartbeat: NodeJS.Timeout | null;
  /** Cancels the run's timeout (null: the queue has none, or it is over). */
  cancelTimeout: (() => void) | null;
  renewing: boolean;
  /** Succeeded through job.complete: nothing left to write. */
  completed: boolean;
  /** Given back at shutdown, found taken over, or timed out: this worker must write nothing more. */
  relinquished: boolean;
  /** Relinquished because it ran past its queue's timeoutMs (a late `complete` says so). */
  timedOut: boolean;
  /** Gives the run's slot back (once): when the handler ends, or at its timeout if that comes first. */
  freeSlot(): void;
  /** Resolves once the slot is free. */
  done: Promise<void>;
}

/**
 * Runs the jobs of every registered queue in this process. The policy:
 * - Claims happen one at a time per process, in one statement for all queues with free slots
 *   (each queue's `concurrency` is per process), when a job is enqueued here or a slot frees up on
 *   a queue that was full, and otherwise every `pollIntervalMs`; that idle poll also re-queues jobs
 *   whose lease expired and claims due periodic ticks.
 * - A running job's lease is renewed every third of its length; a renewal that finds the lease
 *   gone (or the job cancelled) aborts the job's signal.
 * - Every write about a job is fenced by its lease token, so a worker presumed dead can never
 *   finish a job someone else now runs.
 * - A failed run is retried after retryDelayMs (full jitter, exponential ceiling), or at the time
 *   a RetryJobAt it threw names, until maxAttempts, then the job is failed with the last error's message.
 * - A run that throws SnoozeJob is queued again at the time it names, the attempt not counted.
 * - A run longer than its queue's timeoutMs is timed out: its signal aborts, its outcome is written
 *   as a failed attempt's, and its slot is free at once; the handler, if it goes on, writes nothing.
 * - close() stops claiming at once, lets running jobs finish for `drainMs`, then aborts what is
 *   left and gives its leases back (queued again, the attempt not counted).
 */
export class JobRunner implements WorkerNudges {
  readonly workerId: string;
  private state: 'idle' | 'running' | 'draining' | 'closed' = 'idle';
  private readonly active = new Map<string, ActiveJob>();
  private readonly busy = new Map<string, number>();
  /** Outcomes of timed-out runs still being written: settled() waits for them, not for their handlers. */
  private readonly writing = new Set<Promise<void>>();
  private claimChain: Promise<unknown> = Promise.resolve();
  private periodicRegistered = false;
  private loopDone: Promise<void> = Promise.resolve();
  private wakeUp: (() => void) | null = null;
  private woken = false;
  private drainDeadline = 0;
  private readonly random: () => number;
  private readonly schedule: ScheduleTimer;

  constructor(private readonly deps: JobRunnerDeps) {
    this.random = deps.random ?? Math.random;
    this.schedule = deps.schedule ?? realTimer;
    this.workerId = deps.workerId ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  }

  start(): void {
    if (this.state !== 'idle') return;
    this.state = 'running';
    this.loopDone = this.loop();
  }

  wake(_queue?: string): void {
    if (this.state !== 'running') return;
    this.woken = true;
    this.wakeUp?.();
  }

  interrupt(jobId: string): void {
    this.active.get(jobId)?.controller.abort(new JobInterrupted('cancelled'));
  }

  /** Jobs this process is running now. */
  get running(): number {
    return this.active.size;
  }

  /** Whether this worker still claims new jobs (false once shutdown began). */
  get claiming(): boolean {
    return this.state === 'running';
  }

  /** One idle poll: expired leases, periodic ticks, then a claim. Returns how many jobs started. */
  async pollOnce(): Promise<number> {
    await this.maintain();
    return (await this.claimOnce()).started;
  }

  /**
   * Resolves once nothing this process runs is still running. A run that timed out counts as ended
   * once its outcome is written, though its handler may still be going: it can write nothing more.
   */
  async settled(): Promise<void> {
    while (this.active.size > 0 || this.writing.size > 0) await Promise.allSettled([...[...this.active.values()].map((a) => a.done), ...this.writing]);
  }

  /**
   * Runs due work until none is left (tests, and a one-shot worker). Idle means a poll started
   * nothing while nothing ran: a job this process's own loop claimed meanwhile may enqueue more
   * (an event's subscriber its deliveries), so waiting for it is followed by another poll.
   */
  async runUntilIdle(): Promise<void> {
    for (;;) {
      const started = await this.pollOnce();
      const running = this.active.size > 0;
      await this.settled();
      if (started === 0 && !running) return;
    }
  }

  /** Stops claiming; what runs keeps running until close() gives up on it. */
  stopClaiming(): void {
    if (this.state === 'closed' || this.state === 'draining') return;
    this.drainDeadline = performance.now() + this.deps.settings.drainMs;
    this.state = 'draining';
    this.wakeUp?.();
  }

  async close(): Promise<void> {
    this.stopClaiming();
    await this.loopDone;
    await this.claimChain.catch(() => undefined);
    const left = this.drainDeadline - performance.now();
    if (this.active.size > 0 && left > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.settled(), new Promise<void>((resolve) => (timer = setTimeout(resolve, left)))]);
      clearTimeout(timer);
    }
    const unfinished = [...this.active.values()];
    for (const active of unfinished) {
      active.relinquished = true;
      this.stopHeartbeat(active);
      active.controller.abort(new JobInterrupted('shutdown'));
      await this.write(active, { state: 'released' }, { evenIfRelinquished: true });
    }
    if (unfinished.length > 0) this.deps.logger.warn({ jobs: unfinished.map((a) => a.claimed.id) }, 'jobs still running at shutdown were given back to the queue');
    // A timed-out run's outcome still on its way is written before the database may close.
    await Promise.allSettled([...this.writing]);
    this.state = 'closed';
  }

  private async loop(): Promise<void> {
    let lastPoll = -Infinity;
    // While the database is unreachable every poll fails; the log gets the first failure and the recovery.
    let failing = false;
    while (this.state === 'running') {
      let more = false;
      // A wake arriving from here on (an enqueue, a freed slot) makes the idle wait below return at once.
      this.woken = false;
      try {
        if (performance.now() - lastPoll >= this.deps.settings.pollIntervalMs) {
          lastPoll = performance.now();
          await this.maintain();
        }
        more = (await this.claimOnce()).more;
        if (failing) this.deps.logger.warn('job worker reaches the queue again');
        failing = false;
      } catch (error) {
        if (!failing) this.deps.logger.error({ err: error }, 'job worker could not poll the queue; retrying every poll interval');
        failing = true;
      }
      if (more) continue;
      await this.idle(Math.max(0, lastPoll + this.deps.settings.pollIntervalMs - performance.now()));
    }
  }

  private idle(ms: number): Promise<void> {
    if (this.woken || this.state !== 'running') return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      const wakeUp = (): void => done();
      this.wakeUp = wakeUp;
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
    }).then(() => {
      this.wakeUp = null;
    });
  }

  private async maintain(): Promise<void> {
    const now = this.deps.clock();
    await this.deps.leases.recoverExpired(now);
    const periodic = this.deps.registry.periodic();
    if (periodic.length === 0 || this.state === 'draining' || this.state === 'closed') return;
    if (!this.periodicRegistered) {
      await this.deps.periodic.register(
        periodic.map((p) => ({ name: p.name, intervalMs: p.everyMs })),
        now,
      );
      this.periodicRegistered = true;
    }
    await this.deps.periodic.claimDue(periodic, now, this.workerId);
  }

  /** Claims are serialised per process, so the slot counts a claim is based on are never stale. */
  private claimOnce(): Promise<{ started: number; more: boolean }> {
    const next = this.claimChain.then(
      () => this.claimNow(),
      () => this.claimNow(),
    );
    this.claimChain = next.catch(() => undefined);
    return next;
  }

  private async claimNow(): Promise<{ started: number; more: boolean }> {
    if (this.state === 'draining' || this.state === 'closed') return { started: 0, more: false };
    const taken = this.deps.registry.queues().filter((definition) => takesQueue(this.deps.settings.queues, definition.spec.name));
    const requests = taken.map((definition) => ({
      queue: definition.spec.name,
      slots: definition.spec.concurrency - (this.busy.get(definition.spec.name) ?? 0),
      leaseMs: definition.spec.leaseMs,
    }));
    const open = requests.filter((r) => r.slots > 0);
    if (open.length === 0) return { started: 0, more: false };
    const claimed = await this.deps.leases.claim(open, this.deps.clock(), this.workerId);
    const draining = this.state !== 'idle' && this.state !== 'running';
    const perQueue = new Map<string, number>();
    for (const job of claimed) {
      perQueue.set(job.queue, (perQueue.get(job.queue) ?? 0) + 1);
      const definition = this.deps.registry.queue(job.queue)!;
      if (draining) {
        // Shutdown began while this claim was on its way: hand the job straight back.
        await this.deps.leases.finish(job, { state: 'released' }, this.deps.clock()).catch(() => undefined);
        continue;
      }
      this.begin(job, definition);
    }
    // A queue that filled every slot it asked for may have more jobs waiting.
    const more = open.some((r) => perQueue.get(r.queue) === r.slots) && !draining;
    return { started: draining ? 0 : claimed.length, more };
  }

  private begin(claimed: ClaimedJob, definition: QueueDefinition): void {
    let slotFree!: () => void;
    let free = false;
    const active: ActiveJob = {
      claimed,
      definition,
      controller: new AbortController(),
      heartbeat: null,
      cancelTimeout: null,
      renewing: false,
      completed: false,
      relinquished: false,
      timedOut: false,
      done: new Promise<void>((resolve) => (slotFree = resolve)),
      freeSlot: () => {
        if (free) return;
        free = true;
        this.stopHeartbeat(active);
        this.active.delete(claimed.id);
        const busy = this.busy.get(claimed.queue) ?? 1;
        this.busy.set(claimed.queue, busy - 1);
        slotFree();
        // Only a full queue can have left due jobs behind for want of a slot. One with room took every
        // due job at its last claim, and jobs enqueued since woke the loop themselves: claiming again
        // would be a second claim statement per job (each domain event's) that finds nothing.
        if (busy >= definition.spec.concurrency) this.wake(claimed.queue);
      },
    };
    this.active.set(claimed.id, active);
    this.busy.set(claimed.queue, (this.busy.get(claimed.queue) ?? 0) + 1);
    void this.execute(active)
      .catch((error: unknown) => this.deps.logger.error({ err: error, job: claimed.id }, 'a job run ended unexpectedly; it runs again when its lease expires'))
      .finally(() => active.freeSlot());
  }

  private async execute(active: ActiveJob): Promise<void> {
    const { claimed, definition } = active;
    const parsed = definition.spec.payload.safeParse(claimed.payload);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      await this.write(active, { state: 'failed', error: `the payload no longer matches queue ${claimed.queue}'s schema at '${issue?.path.join('.') ?? ''}': ${issue?.message ?? ''}` });
      return;
    }
    const every = Math.max(10, Math.floor(definition.spec.leaseMs / 3));
    active.heartbeat = setInterval(() => void this.renew(active), every);
    active.heartbeat.unref();
    const { timeoutMs } = definition.spec;
    if (timeoutMs !== undefined) active.cancelTimeout = this.schedule(timeoutMs, () => this.timeOut(active, timeoutMs));
    const job: Job<unknown> = {
      id: claimed.id,
      queue: claimed.queue,
      payload: parsed.data,
      attempt: claimed.attempt,
      maxAttempts: claimed.maxAttempts,
      signal: active.controller.signal,
      complete: (fn) => this.completeWith(active, fn),
    };
    try {
      await definition.run(job);
      this.stopTimeout(active);
      if (!active.completed) await this.write(active, { state: 'succeeded' });
    } catch (error) {
      // The handler has ended: the time its outcome takes to write is not the run's.
      this.stopTimeout(active);
      if (active.completed) {
        this.deps.logger.warn({ err: error, job: claimed.id, queue: claimed.queue }, 'job handler threw after completing; the job stays succeeded');
        return;
      }
      await this.write(active, this.outcomeOf(active, error));
    }
  }

  /**
   * The run's time is up: from now on it is no longer this worker's. Its outcome is written as a
   * failed attempt's (fenced by the lease like any other, so a completion that committed first
   * stands) and its slot is given back at once, whether or not the handler heeds the signal. A
   * run that had already completed, or lost its lease, has nothing left to write: only its slot.
   */
  private timeOut(active: ActiveJob, timeoutMs: number): void {
    active.cancelTimeout = null;
    const { claimed } = active;
    const interrupted = new JobInterrupted('timeout');
    if (!active.completed && !active.relinquished) {
      active.relinquished = true;
      active.timedOut = true;
      // Decided before the abort, so a cancellation already asked for still ends the job cancelled.
      const outcome = this.outcomeOf(active, interrupted, `timed out: the run took longer than queue ${claimed.queue}'s timeoutMs (${timeoutMs} ms)`);
      const written = this.write(active, outcome, { evenIfRelinquished: true, quietIfLost: true });
      this.writing.add(written);
      void written.finally(() => this.writing.delete(written));
    }
    active.controller.abort(interrupted);
    this.deps.logger.warn(
      { job: claimed.id, queue: claimed.queue, attempt: claimed.attempt, timeoutMs },
      "a job ran longer than its queue's timeout: its slot goes to the next job, and nothing the run does from now on is recorded",
    );
    active.freeSlot();
  }

  private outcomeOf(active: ActiveJob, error: unknown, message = jobErrorMessage(error)): JobOutcome {
    const { claimed, definition, controller } = active;
    const reason = controller.signal.reason;
    if (controller.signal.aborted && reason instanceof JobInterrupted && reason.reason === 'cancelled') return { state: 'cancelled', error: message };
    // Not now, not a failure: the attempt is given back, so snoozing never uses up a job's attempts.
    if (error instanceof SnoozeJob) return { state: 'snoozed', runAt: new Date(Math.max(this.deps.clock().getTime(), error.runAt.getTime())), reason: error.message };
    if (error instanceof PermanentJobError || claimed.attempt >= claimed.maxAttempts) return { state: 'failed', error: message };
    const now = this.deps.clock().getTime();
    // The handler chose when: its time stands (never before now), not the queue's backoff.
    if (error instanceof RetryJobAt) return { state: 'retry', runAt: new Date(Math.max(now, error.runAt.getTime())), error: message };
    const delay = retryDelayMs(claimed.attempt, definition.spec.backoff, this.random);
    return { state: 'retry', runAt: new Date(now + delay), error: message };
  }

  private async completeWith<T>(active: ActiveJob, fn: (tx: Transaction) => Promise<T>): Promise<T> {
    if (active.completed) throw new Error(`job ${active.claimed.id} is already complete`);
    if (active.relinquished) throw new JobInterrupted(active.timedOut ? 'timeout' : 'lease_lost');
    const result = await this.deps.database.transaction(async (tx) => {
      // First the fence, which also locks the job's row until this transaction ends.
      if (!(await this.deps.leases.finish(active.claimed, { state: 'succeeded' }, this.deps.clock(), tx))) {
        throw new JobInterrupted('lease_lost');
      }
      return fn(tx);
    });
    active.completed = true;
    return result;
  }

  private async renew(active: ActiveJob): Promise<void> {
    if (active.renewing || active.relinquished || active.completed) return;
    active.renewing = true;
    try {
      const lockedUntil = new Date(this.deps.clock().getTime() + active.definition.spec.leaseMs);
      const answer = await this.deps.leases.heartbeat(active.claimed, lockedUntil);
      if (answer === 'lost') {
        active.relinquished = true;
        this.stopHeartbeat(active);
        active.controller.abort(new JobInterrupted('lease_lost'));
      } else if (answer === 'cancel_requested') {
        active.controller.abort(new JobInterrupted('cancelled'));
      }
    } catch (error) {
      this.deps.logger.warn({ err: error, job: active.claimed.id }, 'could not renew a job lease; will try again');
    } finally {
      active.renewing = false;
    }
  }

  /**
   * Writes how a run ended, unless the job is no longer this worker's. A timed-out run's outcome
   * finding the lease gone is no news (a completion committed just before, or the lease expired).
   */
  private async write(active: ActiveJob, outcome: JobOutcome, options: { evenIfRelinquished?: boolean; quietIfLost?: boolean } = {}): Promise<void> {
    if (active.relinquished && !options.evenIfRelinquished) return;
    try {
      const held = await this.deps.leases.finish(active.claimed, outcome, this.deps.clock());
      if (!held && outcome.state !== 'released' && !options.quietIfLost) {
        this.deps.logger.warn({ job: active.claimed.id, queue: active.claimed.queue }, 'a job finished after its lease was lost; another worker owns it');
      }
    } catch (error) {
      this.deps.logger.error({ err: error, job: active.claimed.id }, 'could not record how a job ended; it runs again when its lease expires');
    }
  }

  /** Stops the run's timers: its lease renewal and its timeout. */
  private stopHeartbeat(active: ActiveJob): void {
    if (active.heartbeat) clearInterval(active.heartbeat);
    active.heartbeat = null;
    this.stopTimeout(active);
  }

  private stopTimeout(active: ActiveJob): void {
    active.cancelTimeout?.();
    active.cancelTimeout = null;
  }
}

import type { Queryable } from '../ports/database.ts';
import type { PubSub } from '../ports/coordination.ts';
import type { JobLogChunk, JobLogStore } from '../ports/job-logs.ts';

export interface JobLogSettings {
  /** A line waits at most this long before it is written (production 250 ms). */
  flushIntervalMs: number;
  /** Lines, or bytes of them, that are written at once without waiting for the interval. */
  flushLines: number;
  flushBytes: number;
  /** A follower that hears nothing looks again after this long (the pub/sub message may be lost). */
  pollMs: number;
}

export const DEFAULT_JOB_LOG_SETTINGS: JobLogSettings = {
  flushIntervalMs: 250,
  flushLines: 500,
  flushBytes: 64 * 1024,
  pollMs: 2_000,
};

/** Lines read per query: a follower far behind catches up in pages of this many. */
const READ_PAGE = 5_000;

/** The channel a stream's writer publishes on after each write, and its followers listen to. */
export const jobLogChannel = (stream: string): string => `job-logs:${stream}`;

export interface FollowOptions {
  /** The first line wanted (the lines before it the caller has). */
  from?: number;
  signal: AbortSignal;
  ended: () => Promise<boolean>;
}

interface Deps {
  store: JobLogStore;
  pubsub: PubSub;
  clock: () => Date;
  settings?: Partial<JobLogSettings>;
  /** A write (or a wake-up) that failed: the lines stay queued for the next write. */
  report?: (error: unknown, stream: string) => void;
}

/**
 * A running job's log, readable from every replica while it runs (`Tokens.JobLogs`). The worker
 * opens a writer and appends lines synchronously, in the job's order; they are written to the
 * database in chunks (on a short interval, on size, and when the writer closes) and each write is
 * published on the coordination pub/sub so followers on any replica read at once; a follower that
 * hears nothing (a message lost, a store without pub/sub across processes) looks again every
 * `pollMs`. The rows live while the job runs: its owner keeps the finished log where it keeps
 * finished things and then discards the stream. An organisation's erasure deletes its streams.
 */
export class JobLogs {
  readonly settings: JobLogSettings;

  constructor(private readonly deps: Deps) {
    this.settings = { ...DEFAULT_JOB_LOG_SETTINGS, ...deps.settings };
  }

  /** The worker's side: one writer per run of a job. */
  writer(stream: string, organizationId: string): JobLogWriter {
    return new JobLogWriter(stream, organizationId, this.deps, this.settings);
  }

  /** Every line written so far from line `from` on (what a follower has not seen yet). */
  async read(stream: string, from = 0): Promise<string[]> {
    const lines: string[] = [];
    for (;;) {
      const page = await this.deps.store.read(stream, from + lines.length, READ_PAGE);
      lines.push(...page);
      if (page.length < READ_PAGE) return lines;
    }
  }

  /**
   * The lines from line `from` on as they are written, until `ended()` answers true after the
   * lines stored so far were given (the job finished: whatever it kept of its log, past the lines
   * given, is its owner's to give), or until `signal` aborts. `ended` is asked each time the
   * follower has caught up, so it should be a cheap read (a row's status).
   */
  async *follow(stream: string, options: FollowOptions): AsyncGenerator<string> {
    const { signal, ended } = options;
    let next = options.from ?? 0;
    const wake = new Wake();
    const unsubscribe = await this.deps.pubsub
      .subscribe(jobLogChannel(stream), () => wake.ring())
      .catch((error: unknown) => {
        this.deps.report?.(error, stream);
        return null;
      });
    try {
      while (!signal.aborted) {
        wake.reset();
        const page = await this.deps.store.read(stream, next, READ_PAGE);
        next += page.length;
        for (const line of page) yield line;
        if (page.length === READ_PAGE) continue;
        if (await ended()) return;
        await wake.wait(this.settings.pollMs, signal);
      }
    } finally {
      await unsubscribe?.().catch(() => undefined);
    }
  }

  eraseForOrganization(db: Queryable, organizationId: string): Promise<number> {
    return this.deps.store.eraseForOrganization(db, organizationId);
  }
}

/**
 * One run's writer. `append` never waits and never throws (the job's output must not stall on the
 * database); `close` writes what is left and waits for it, `discard` forgets the stream. Chunks are
 * written one at a time, in order; a failed write keeps its chunk (and those after it) for the next
 * write, and the upsert makes a repeated chunk harmless.
 */
export class JobLogWriter {
  private pending: string[] = [];
  private pendingBytes = 0;
  /** The number of the first pending line: every line before it is in a chunk. */
  private nextLine = 0;
  private readonly unwritten: JobLogChunk[] = [];
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();
  private abandoned = false;

  constructor(
    readonly stream: string,
    private readonly organizationId: string,
    private readonly deps: Deps,
    private readonly settings: JobLogSettings,
  ) {}

  /** Starts the stream afresh: a job run again after an interruption logs from its first line. */
  async begin(): Promise<void> {
    this.stopTimer();
    await this.writing;
    this.pending = [];
    this.pendingBytes = 0;
    this.nextLine = 0;
    this.unwritten.length = 0;
    await this.deps.store.clear(this.stream);
    this.publish();
  }

  append(line: string): void {
    if (this.abandoned) return;
    this.pending.push(line);
    this.pendingBytes += Buffer.byteLength(line) + 1;
    const full = this.pending.length >= this.settings.flushLines || this.pendingBytes >= this.settings.flushBytes;
    if (full) void this.flush();
    else if (this.timer === null) {
      this.timer = setTimeout(() => void this.flush(), this.settings.flushIntervalMs);
      this.timer.unref();
    }
  }

  /** Writes every line appended so far; resolves once they are stored, or their write failed (reported). */
  flush(): Promise<void> {
    this.stopTimer();
    if (this.pending.length > 0) {
      this.unwritten.push({
        stream: this.stream,
        organizationId: this.organizationId,
        firstLine: this.nextLine,
        lines: this.pending,
        writtenAt: this.deps.clock(),
      });
      this.nextLine += this.pending.length;
      this.pending = [];
      this.pendingBytes = 0;
    }
    this.writing = this.writing.then(() => this.writeUnwritten());
    return this.writing;
  }

  /** The last write: what is appended after it is written only by another flush. */
  close(): Promise<void> {
    return this.flush();
  }

  /** Forgets the stream's lines (the job kept its log elsewhere) and wakes its followers to see it ended. */
  async discard(): Promise<void> {
    this.stopTimer();
    this.pending = [];
    this.pendingBytes = 0;
    await this.writing;
    this.unwritten.length = 0;
    await this.deps.store.clear(this.stream);
    this.publish();
  }

  /**
   * This run lost the job (its lease, a shutdown): the run that takes it over begins the stream
   * afresh, so nothing more is written from here, and nothing is deleted that the next run may own.
   */
  abandon(): void {
    this.abandoned = true;
    this.stopTimer();
    this.pending = [];
    this.pendingBytes = 0;
    this.unwritten.length = 0;
  }

  private async writeUnwritten(): Promise<void> {
    if (this.abandoned || this.unwritten.length === 0) return;
    while (this.unwritten.length > 0 && !this.abandoned) {
      try {
        await this.deps.store.append(this.unwritten[0]!);
      } catch (error) {
        this.deps.report?.(error, this.stream);
        break;
      }
      this.unwritten.shift();
    }
    this.publish();
  }

  private publish(): void {
    const report = (error: unknown) => this.deps.report?.(error, this.stream);
    this.deps.pubsub.publish(jobLogChannel(this.stream), '').catch(report);
  }

  private stopTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}

/** A follower's wait: until a message rings, `ms` pass, or the signal aborts. A ring before the wait counts. */
class Wake {
  private rung = false;
  private resolve: (() => void) | null = null;

  reset(): void {
    this.rung = false;
  }

  ring(): void {
    this.rung = true;
    this.resolve?.();
  }

  wait(ms: number, signal: AbortSignal): Promise<void> {
    if (this.rung || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.resolve = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.resolve = done;
      signal.addEventListener('abort', done, { once: true });
    });
  }
}

export interface BatchedWriterSettings {
  /** How often queued rows are written. */
  flushIntervalMs: number;
  /** Rows per write at most; a full batch is written at once, without waiting for the tick. */
  batchSize: number;
  /** Rows held at most (waiting plus failed); past it new rows are dropped and counted. */
  maxQueue: number;
}

export interface BatchedWriterStats {
  queued: number;
  written: number;
  dropped: number;
  failedFlushes: number;
}

/**
 * Rows written off the hot path: `enqueue` only pushes onto an in-memory queue, and a timer (or a
 * full batch) writes them `batchSize` at a time through `write`. A failed write keeps its rows and
 * is tried again at the next tick; the queue is bounded, so a database outage drops (and counts)
 * rows instead of growing memory without limit or ever failing the caller. On stop, what is queued
 * is written if the store lets it.
 *
 * For rows whose loss is tolerable (traffic logs). The inference request log keeps its own writer
 * (plugins/metering/request-log-writer.ts) because its rows are money: it journals them to disk
 * and tracks what is pending per scope.
 */
export class BatchedWriter<Row> {
  private queue: Row[] = [];
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  private readonly stats = { written: 0, dropped: 0, failedFlushes: 0 };
  /** `dropped` when a write last succeeded: the first drop after it is reported. */
  private droppedAtLastWrite = 0;
  /**
   * Rows at the head of the queue whose last write failed. A failure may come after the database
   * stored them (the answer to a commit lost), so their next write is told they may be there.
   */
  private uncertain = 0;

  constructor(
    /**
     * Stores a batch. `mayBeStored`: some of these rows were in a write that failed, and may have
     * been stored by it; the write must then not store them twice (a unique key with ON CONFLICT DO
     * NOTHING, say). Otherwise every row is new, and the write may skip that cost.
     */
    private readonly write: (rows: readonly Row[], attempt: { mayBeStored: boolean }) => Promise<void>,
    private readonly settings: BatchedWriterSettings,
    /** Told of each failed write (the rows stay queued) and of the first row dropped after a write succeeded. */
    private readonly report: (event: { kind: 'write_failed'; error: unknown; rows: number } | { kind: 'dropping' }) => void,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.flush(), this.settings.flushIntervalMs);
    this.timer.unref();
  }

  /** Never blocks and never throws: the caller is a request path. False when the row was dropped. */
  enqueue(row: Row): boolean {
    if (this.queue.length >= this.settings.maxQueue) {
      // Reported once per outage, not once per row: a full queue under load would flood the log.
      if (this.stats.dropped === this.droppedAtLastWrite) this.report({ kind: 'dropping' });
      this.stats.dropped += 1;
      return false;
    }
    this.queue.push(row);
    if (this.queue.length >= this.settings.batchSize && this.flushing === null) void this.flush();
    return true;
  }

  snapshot(): BatchedWriterStats {
    return { ...this.stats, queued: this.queue.length };
  }

  /** Writes what is queued now (one flush at a time; a caller arriving meanwhile waits for it). */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    if (this.queue.length === 0) return Promise.resolve();
    this.flushing = this.flushBatches().finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  /** Stops the timer and writes what is left, giving up after a few failed rounds. Answers the rows left unwritten. */
  async stop(): Promise<number> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.flushing;
    for (let round = 0; round < 3 && this.queue.length > 0; round += 1) {
      const before = this.stats.failedFlushes;
      await this.flush();
      if (this.stats.failedFlushes > before) break;
    }
    return this.queue.length;
  }

  /**
   * Writes the rows queued when the flush began, plus further full batches; a trickle arriving
   * meanwhile waits for the next tick rather than becoming a stream of one-row writes.
   */
  private async flushBatches(): Promise<void> {
    let due = this.queue.length;
    while (this.queue.length > 0 && (due > 0 || this.queue.length >= this.settings.batchSize)) {
      const batch = this.queue.slice(0, this.settings.batchSize);
      try {
        await this.write(batch, { mayBeStored: this.uncertain > 0 });
      } catch (error) {
        this.uncertain = Math.max(this.uncertain, batch.length);
        this.stats.failedFlushes += 1;
        this.report({ kind: 'write_failed', error, rows: batch.length });
        return;
      }
      this.queue = this.queue.slice(batch.length);
      this.uncertain = Math.max(0, this.uncertain - batch.length);
      due -= batch.length;
      this.stats.written += batch.length;
      this.droppedAtLastWrite = this.stats.dropped;
    }
  }
}

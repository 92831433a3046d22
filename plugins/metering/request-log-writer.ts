import type { FastifyBaseLogger } from 'fastify';
import type { RequestLogRow, UsageRecorder } from '../../core/ports/metering.ts';
import type { BillingJournal, ProvisionalCall } from './billing-journal.ts';

export interface WriterSettings {
  flushIntervalMs: number;
  batchSize: number;
  /** Rows held at most (waiting plus failed); past it new rows are dropped from memory and counted (the journal, if any, keeps them). */
  maxQueue: number;
}

export type PendingScope = 'account' | 'project' | 'key';

/** Rows queued but not yet stored in one scope: their cost, how many, and their tokens (input plus output). */
export interface PendingRows {
  micros: bigint;
  requests: number;
  tokens: number;
}

export interface WriterStats {
  queued: number;
  written: number;
  dropped: number;
  failedFlushes: number;
}

/**
 * Keeps request-log writes off the hot path: calls are queued in memory and written in batches
 * (one transaction per batch, which also charges the balances). A failed flush keeps its rows and
 * tries again; the queue is bounded so a database outage cannot grow memory without limit. On
 * stop, everything queued is written before the process exits. With a billing journal, every call
 * is also appended to local disk when it is admitted (provisionally) and when its row is queued, so
 * a process that dies loses none (see billing-journal.ts).
 */
export class RequestLogWriter {
  private queue: RequestLogRow[] = [];
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  /** Counted as they happen; `queued` is read off the queue in snapshot(). */
  private readonly stats: Omit<WriterStats, 'queued'> = { written: 0, dropped: 0, failedFlushes: 0 };
  /**
   * Rows queued but not yet stored, per account / project / key: what seeding a money counter must
   * subtract, and a rate window re-seeded after a coordination store's loss must count.
   */
  private readonly pending: Record<PendingScope, Map<string, PendingRows>> = { account: new Map(), project: new Map(), key: new Map() };
  /** Batch lines queued but not yet stored, per spend hold: what its outstanding amount must not count twice. */
  private readonly pendingHeld = new Map<string, PendingRows>();
  private stored: () => void = () => undefined;

  constructor(
    private readonly recorder: UsageRecorder,
    private readonly settings: WriterSettings,
    private readonly logger: FastifyBaseLogger,
    private readonly journal: BillingJournal | null = null,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.flush(), this.settings.flushIntervalMs);
    this.timer.unref();
  }

  /** Never blocks and never throws: the caller is the request path. */
  enqueue(row: RequestLogRow): void {
    if (this.queue.length >= this.settings.maxQueue) {
      this.stats.dropped += 1;
      if (this.journal) {
        this.journal.append(row, false);
        this.logger.error({ requestId: row.id }, 'request log queue full: row kept only in the billing journal (stored and charged at the next start)');
      } else {
        this.logger.error({ requestId: row.id }, 'request log queue full: row dropped (its charge is lost from the ledger)');
      }
      return;
    }
    this.journal?.append(row, true);
    this.queue.push(row);
    this.track(row, 1n);
    if (this.queue.length >= this.settings.batchSize) void this.flush();
  }

  /**
   * A call was admitted and is about to be sent upstream: what to bill if the process dies before
   * the call's own row is queued.
   */
  admitted(call: ProvisionalCall): void {
    this.journal?.admitted(call);
  }

  /** Called after each batch is stored, once its rows no longer count as pending. */
  afterStore(listener: () => void): void {
    this.stored = listener;
  }

  /** Spend queued but not yet in the database for an account (organisation), project or key. */
  pendingMicros(scope: PendingScope, id: string): bigint {
    return this.pending[scope].get(id)?.micros ?? 0n;
  }

  /** Cost of the batch lines of a spend hold queued but not yet in the database. */
  pendingHeldMicros(holdId: string): bigint {
    return this.pendingHeld.get(holdId)?.micros ?? 0n;
  }

  /** Rows queued but not yet in the database for an account, project or key (null: none). */
  pendingRows(scope: PendingScope, id: string): Readonly<PendingRows> | null {
    return this.pending[scope].get(id) ?? null;
  }

  /** Every scope with rows queued but not yet in the database. */
  forEachPending(visit: (scope: PendingScope, id: string, rows: Readonly<PendingRows>) => void): void {
    for (const scope of ['account', 'project', 'key'] as const) for (const [id, rows] of this.pending[scope]) visit(scope, id, rows);
  }

  snapshot(): WriterStats {
    return { ...this.stats, queued: this.queue.length };
  }

  /** Writes everything queued now (one flush at a time). */
  async flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    if (this.queue.length === 0) return;
    this.flushing = this.flushBatches().finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.flushing;
    // Drain: keep flushing until empty or the database keeps failing.
    for (let round = 0; round < 5 && this.queue.length > 0; round += 1) await this.flush();
    if (this.queue.length > 0) this.logger.error({ rows: this.queue.length }, 'request log rows could not be written before shutdown');
  }

  /**
   * Writes the rows queued when the flush began; rows that arrive meanwhile wait for the next tick
   * unless a full batch builds up. Chasing them at once would turn a busy gateway's log into a
   * stream of tiny transactions (one ledger line and one commit each) that costs the database far
   * more per row.
   */
  private async flushBatches(): Promise<void> {
    let due = this.queue.length;
    while (this.queue.length > 0 && (due > 0 || this.queue.length >= this.settings.batchSize)) {
      const batch = this.queue.slice(0, this.settings.batchSize);
      try {
        await this.recorder.record(batch);
      } catch (error) {
        this.stats.failedFlushes += 1;
        this.logger.error({ err: error, rows: batch.length }, 'request log flush failed; will retry');
        return;
      }
      this.queue = this.queue.slice(batch.length);
      this.journal?.committed(batch.length);
      due -= batch.length;
      this.stats.written += batch.length;
      for (const row of batch) this.track(row, -1n);
      this.stored();
    }
  }

  /** Every row counts, a free one too: it was a call admitted, which rate windows count. */
  private track(row: RequestLogRow, sign: bigint): void {
    const tokens = Number(sign) * (row.inputTokens + row.outputTokens);
    const micros = sign * row.costMicros;
    add(this.pending.account, row.organizationId, micros, Number(sign), tokens);
    if (row.projectId) add(this.pending.project, row.projectId, micros, Number(sign), tokens);
    if (row.keyId) add(this.pending.key, row.keyId, micros, Number(sign), tokens);
    // A maker's cap and windows count what the keys it made spend (plugins/keys/key-rules.ts).
    if (row.makerKeyIds) for (const maker of row.makerKeyIds) add(this.pending.key, maker, micros, Number(sign), tokens);
    if (row.holdId !== undefined) add(this.pendingHeld, row.holdId, micros, Number(sign), tokens);
  }
}

function add(totals: Map<string, PendingRows>, id: string, micros: bigint, requests: number, tokens: number): void {
  const rows = totals.get(id);
  if (!rows) {
    totals.set(id, { micros, requests, tokens });
    return;
  }
  rows.micros += micros;
  rows.requests += requests;
  rows.tokens += tokens;
  if (rows.requests === 0) totals.delete(id);
}

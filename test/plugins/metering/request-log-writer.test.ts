import t from 'tap';
import Fastify from 'fastify';
import { RequestLogWriter, type WriterSettings } from '../../../plugins/metering/request-log-writer.ts';
import { requestLogRow } from '../../helpers/request-log-rows.ts';
import type { RequestLogRow, UsageRecorder } from '../../../core/ports/metering.ts';

/** A recorder whose writes finish only when the test says so; it keeps every batch it was given. */
class HeldRecorder implements UsageRecorder {
  readonly batches: string[][] = [];
  private releases: Array<(error?: Error) => void> = [];
  failNext = false;

  record(rows: RequestLogRow[]): Promise<number> {
    this.batches.push(rows.map((row) => row.id));
    return new Promise((resolve, reject) => {
      this.releases.push((error) => (error ? reject(error) : resolve(rows.length)));
    });
  }

  /** Finishes the oldest write still open, then lets the writer's continuation run. */
  async finishOne(): Promise<void> {
    const release = this.releases.shift();
    if (!release) throw new Error('no write is open');
    release(this.failNext ? new Error('database unavailable') : undefined);
    this.failNext = false;
    await new Promise((resolve) => setImmediate(resolve));
  }

  get open(): number {
    return this.releases.length;
  }
}

/** Fastify's no-op logger: the writer logs failures, which these tests read from its stats instead. */
const silent = Fastify({ logger: false }).log;

const row = (costMicros = 10n): RequestLogRow => requestLogRow({ organizationId: 'org', projectId: 'project', keyId: 'key', costMicros });

function writerWith(settings: Partial<WriterSettings> = {}) {
  const recorder = new HeldRecorder();
  const writer = new RequestLogWriter(recorder, { flushIntervalMs: 60_000, batchSize: 3, maxQueue: 10, ...settings }, silent);
  return { recorder, writer };
}

t.test('a flush writes the rows queued when it began, in batches of batchSize', async (t) => {
  const { recorder, writer } = writerWith({ batchSize: 100 });
  const rows = [row(), row()];
  for (const r of rows) writer.enqueue(r);
  const ids = rows.map((r) => r.id);
  const flushed = writer.flush();
  await recorder.finishOne();
  await flushed;
  t.same(recorder.batches, [ids]);
  t.equal(writer.snapshot().written, 2);
  t.equal(writer.snapshot().queued, 0);
});

t.test('rows arriving during a flush wait for the next flush instead of becoming a small transaction of their own', async (t) => {
  const { recorder, writer } = writerWith({ batchSize: 100 });
  writer.enqueue(row());
  const flushed = writer.flush();
  writer.enqueue(row());
  writer.enqueue(row());
  await recorder.finishOne();
  await flushed;
  t.equal(recorder.batches.length, 1, 'one write for the row that was due');
  t.equal(writer.snapshot().queued, 2, 'the late rows are still queued');
  const next = writer.flush();
  await recorder.finishOne();
  await next;
  t.equal(recorder.batches.length, 2);
  t.equal(recorder.batches[1]!.length, 2, 'the late rows go together in the next write');
});

t.test('a full batch that builds up during a flush is written at once', async (t) => {
  const { recorder, writer } = writerWith({ batchSize: 3 });
  writer.enqueue(row());
  const flushed = writer.flush();
  for (let i = 0; i < 3; i += 1) writer.enqueue(row());
  await recorder.finishOne();
  t.equal(recorder.open, 1, 'the full batch is already being written');
  await recorder.finishOne();
  await flushed;
  t.same(
    recorder.batches.map((b) => b.length),
    [1, 3],
  );
});

t.test('reaching batchSize starts a flush without waiting for the interval', async (t) => {
  const { recorder, writer } = writerWith({ batchSize: 3 });
  writer.enqueue(row());
  writer.enqueue(row());
  t.equal(recorder.open, 0);
  writer.enqueue(row());
  t.equal(recorder.open, 1);
  await recorder.finishOne();
  t.equal(writer.snapshot().written, 3);
});

t.test('a failed flush keeps its rows and their pending spend, and the next flush writes them', async (t) => {
  const { recorder, writer } = writerWith({ batchSize: 100 });
  writer.enqueue(row(7n));
  recorder.failNext = true;
  const failed = writer.flush();
  await recorder.finishOne();
  await failed;
  t.equal(writer.snapshot().failedFlushes, 1);
  t.equal(writer.snapshot().queued, 1);
  t.equal(writer.pendingMicros('account', 'org'), 7n, 'the unwritten cost still counts as pending');
  const retried = writer.flush();
  await recorder.finishOne();
  await retried;
  t.equal(writer.snapshot().written, 1);
  t.equal(writer.pendingMicros('account', 'org'), 0n);
  t.same(recorder.batches[0], recorder.batches[1], 'the same rows were written again');
});

t.test('pending spend is tracked per account, project and key until written', async (t) => {
  const { recorder, writer } = writerWith({ batchSize: 100 });
  writer.enqueue(row(5n));
  writer.enqueue({ ...row(6n), keyId: 'other-key' });
  t.equal(writer.pendingMicros('account', 'org'), 11n);
  t.equal(writer.pendingMicros('project', 'project'), 11n);
  t.equal(writer.pendingMicros('key', 'key'), 5n);
  t.equal(writer.pendingMicros('key', 'other-key'), 6n);
  const flushed = writer.flush();
  await recorder.finishOne();
  await flushed;
  t.equal(writer.pendingMicros('account', 'org'), 0n);
  t.equal(writer.pendingMicros('key', 'other-key'), 0n);
});

t.test('pending rows count every call and its tokens, a free one too, until stored, and each stored batch is announced', async (t) => {
  const { recorder, writer } = writerWith({ batchSize: 100 });
  let stored = 0;
  writer.afterStore(() => {
    stored += 1;
  });
  writer.enqueue({ ...row(0n), inputTokens: 7, outputTokens: 3 });
  writer.enqueue({ ...row(4n), inputTokens: 20, outputTokens: 5 });
  t.same(writer.pendingRows('key', 'key'), { micros: 4n, requests: 2, tokens: 35 }, 'a re-seeded rate window counts both calls');
  const flushed = writer.flush();
  t.equal(stored, 0, 'nothing is announced before the batch is stored');
  await recorder.finishOne();
  await flushed;
  t.equal(stored, 1);
  t.equal(writer.pendingRows('key', 'key'), null, 'stored rows are no longer pending');
});

t.test('past maxQueue new rows are dropped and counted, never blocking the caller', async (t) => {
  const { writer } = writerWith({ batchSize: 100, maxQueue: 2 });
  writer.enqueue(row());
  writer.enqueue(row());
  writer.enqueue(row());
  t.equal(writer.snapshot().queued, 2);
  t.equal(writer.snapshot().dropped, 1);
});

t.test('stop writes everything still queued, rows that arrived mid-flush included', async (t) => {
  const { recorder, writer } = writerWith({ batchSize: 100 });
  writer.enqueue(row());
  const flushing = writer.flush();
  writer.enqueue(row());
  const stopped = writer.stop();
  await recorder.finishOne();
  await flushing;
  await recorder.finishOne();
  await stopped;
  t.equal(writer.snapshot().written, 2);
  t.equal(writer.snapshot().queued, 0);
});

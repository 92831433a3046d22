import t from 'tap';
import { BatchedWriter } from '../../core/kernel/batched-writer.ts';

interface Write {
  rows: number[];
  mayBeStored: boolean;
}

/** A writer over numbered rows whose store fails the writes `failing` names (by their order, from 1). */
function writerFailing(failing: ReadonlySet<number>, batchSize = 3) {
  const writes: Write[] = [];
  const writer = new BatchedWriter<number>(
    async (rows, { mayBeStored }) => {
      writes.push({ rows: [...rows], mayBeStored });
      if (failing.has(writes.length)) throw new Error('the answer to the commit was lost');
    },
    { flushIntervalMs: 60_000, batchSize, maxQueue: 100 },
    () => undefined,
  );
  return { writer, writes };
}

t.test('rows never written before are written as new', async (t) => {
  const { writer, writes } = writerFailing(new Set());
  // The third row fills a batch, which is written at once; the fourth waits for the next flush.
  for (const row of [1, 2, 3, 4]) writer.enqueue(row);
  await writer.flush();
  await writer.flush();
  t.same(writes, [
    { rows: [1, 2, 3], mayBeStored: false },
    { rows: [4], mayBeStored: false },
  ]);
});

t.test('rows whose write failed are written again as rows that may already be stored', async (t) => {
  const { writer, writes } = writerFailing(new Set([1]));
  for (const row of [1, 2]) writer.enqueue(row);
  await writer.flush();
  writer.enqueue(3);
  await writer.flush();
  t.same(writes, [
    { rows: [1, 2], mayBeStored: false },
    { rows: [1, 2, 3], mayBeStored: true },
  ]);
});

t.test('once the uncertain rows are written, the rows after them are new again', async (t) => {
  const { writer, writes } = writerFailing(new Set([1]), 2);
  for (const row of [1, 2]) writer.enqueue(row);
  await writer.flush();
  for (const row of [3, 4, 5]) writer.enqueue(row);
  await writer.flush();
  await writer.flush();
  t.same(writes, [
    { rows: [1, 2], mayBeStored: false },
    { rows: [1, 2], mayBeStored: true },
    { rows: [3, 4], mayBeStored: false },
    { rows: [5], mayBeStored: false },
  ]);
});

t.test('a failure of a larger retried batch leaves every row of it uncertain', async (t) => {
  const { writer, writes } = writerFailing(new Set([1, 2]), 3);
  writer.enqueue(1);
  await writer.flush();
  for (const row of [2, 3]) writer.enqueue(row);
  await writer.flush();
  writer.enqueue(4);
  await writer.flush();
  t.same(writes, [
    { rows: [1], mayBeStored: false },
    { rows: [1, 2, 3], mayBeStored: true },
    { rows: [1, 2, 3], mayBeStored: true },
    { rows: [4], mayBeStored: false },
  ]);
});

/** A store whose writes wait until the test lets each one finish (or fail), so a test can act while one is under way. */
function gatedStore() {
  const writes: Array<{ rows: number[]; finish: (error?: Error) => void }> = [];
  let arrived: (() => void) | null = null;
  const write = (rows: readonly number[]) =>
    new Promise<void>((resolve, reject) => {
      writes.push({ rows: [...rows], finish: (error) => (error ? reject(error) : resolve()) });
      arrived?.();
    });
  /** Resolves once `count` writes have begun. */
  const begun = async (count: number) => {
    while (writes.length < count) await new Promise<void>((resolve) => (arrived = resolve));
  };
  return { writes, write, begun };
}

type Reported = { kind: 'write_failed'; error: unknown; rows: number } | { kind: 'dropping' };

t.test('a full queue drops new rows, counts them, and reports the first drop of each outage once', async (t) => {
  const reported: Reported[] = [];
  let failing = true;
  const writer = new BatchedWriter<number>(
    async () => {
      if (failing) throw new Error('database away');
    },
    { flushIntervalMs: 60_000, batchSize: 10, maxQueue: 3 },
    (event) => reported.push(event),
  );
  t.same(
    [1, 2, 3, 4, 5].map((row) => writer.enqueue(row)),
    [true, true, true, false, false],
  );
  t.same(writer.snapshot(), { queued: 3, written: 0, dropped: 2, failedFlushes: 0 });
  await writer.flush();
  t.match(reported, [{ kind: 'dropping' }, { kind: 'write_failed', rows: 3 }], 'one report for both drops, one for the failed write');
  t.same(writer.snapshot(), { queued: 3, written: 0, dropped: 2, failedFlushes: 1 }, 'the failed rows stay queued');

  failing = false;
  await writer.flush();
  t.same(writer.snapshot(), { queued: 0, written: 3, dropped: 2, failedFlushes: 1 });
  for (const row of [6, 7, 8, 9]) writer.enqueue(row);
  t.same(
    reported.map((event) => event.kind),
    ['dropping', 'write_failed', 'dropping'],
    'a drop after a write succeeded is a new outage, reported again',
  );
});

t.test('a batch filling up is written at once, one write at a time; rows arriving meanwhile wait for it', async (t) => {
  const store = gatedStore();
  const writer = new BatchedWriter<number>(store.write, { flushIntervalMs: 60_000, batchSize: 2, maxQueue: 100 }, () => undefined);
  writer.enqueue(1);
  t.equal(store.writes.length, 0, 'one row waits for its batch or the tick');
  writer.enqueue(2);
  await store.begun(1);
  t.same(store.writes[0]?.rows, [1, 2], 'the full batch is written without a flush');
  for (const row of [3, 4]) writer.enqueue(row);
  t.equal(store.writes.length, 1, 'no second write while one is under way');
  const waiting = writer.flush();
  store.writes[0]?.finish();
  await store.begun(2);
  t.same(store.writes[1]?.rows, [3, 4], 'the same flush goes on with the full batch that arrived');
  store.writes[1]?.finish();
  await waiting;
  t.same(writer.snapshot(), { queued: 0, written: 4, dropped: 0, failedFlushes: 0 });
});

t.test('a flush writes what was queued when it began, not a trickle that arrives during it', async (t) => {
  const store = gatedStore();
  const writer = new BatchedWriter<number>(store.write, { flushIntervalMs: 60_000, batchSize: 10, maxQueue: 100 }, () => undefined);
  writer.enqueue(1);
  writer.enqueue(2);
  const flushed = writer.flush();
  await store.begun(1);
  writer.enqueue(3);
  store.writes[0]?.finish();
  await flushed;
  t.same(
    store.writes.map((write) => write.rows),
    [[1, 2]],
  );
  t.equal(writer.snapshot().queued, 1);
});

t.test('started, the writer writes on its interval', async (t) => {
  const store = gatedStore();
  const writer = new BatchedWriter<number>(store.write, { flushIntervalMs: 5, batchSize: 10, maxQueue: 100 }, () => undefined);
  writer.start();
  writer.enqueue(1);
  // The writer's timer does not hold the process open (it must not keep a stopping service alive): this does, meanwhile.
  const holdOpen = setTimeout(() => undefined, 30_000);
  await store.begun(1);
  clearTimeout(holdOpen);
  t.same(store.writes[0]?.rows, [1]);
  store.writes[0]?.finish();
  t.equal(await writer.stop(), 0);
});

t.test('stop writes what is left, and answers the rows it could not write after a failed round', async (t) => {
  const attempts: number[][] = [];
  const writer = new BatchedWriter<number>(
    async (rows) => {
      attempts.push([...rows]);
      if (attempts.length > 1) throw new Error('database away');
    },
    { flushIntervalMs: 60_000, batchSize: 2, maxQueue: 100 },
    () => undefined,
  );
  writer.enqueue(1);
  t.equal(await writer.stop(), 0, 'everything written');
  writer.enqueue(2);
  t.equal(await writer.stop(), 1, 'one row left when the store fails');
  t.same(attempts, [[1], [2]], 'one failed round, not three');
});

t.test('stop also writes rows that arrive while it writes, for three rounds at most', async (t) => {
  const attempts: number[][] = [];
  let next = 100;
  let keepComing = 1;
  const writer: BatchedWriter<number> = new BatchedWriter<number>(
    async (rows) => {
      attempts.push([...rows]);
      // A request finishing meanwhile leaves one more row.
      if (keepComing > 0) {
        keepComing -= 1;
        writer.enqueue(next++);
      }
    },
    { flushIntervalMs: 60_000, batchSize: 10, maxQueue: 100 },
    () => undefined,
  );
  writer.enqueue(1);
  t.equal(await writer.stop(), 0, 'the row that arrived during the first round is written in the second');
  t.same(attempts, [[1], [100]]);

  attempts.length = 0;
  keepComing = 10;
  writer.enqueue(2);
  t.equal(await writer.stop(), 1, 'rows that keep coming are not chased past the third round');
  t.same(attempts, [[2], [101], [102]]);
});

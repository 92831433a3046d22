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

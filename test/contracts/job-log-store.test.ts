import t, { type Test } from 'tap';
import { MemoryPubSub } from '../../adapters/memory/memory-pubsub.ts';
import { coreMigrations } from '../../adapters/sql/core-migrations.ts';
import { SqlJobLogStore } from '../../adapters/sql/job-log-store.ts';
import { runMigrations } from '../../adapters/sql/migrator.ts';
import { JobLogs } from '../../core/jobs/job-logs.ts';
import type { PubSub } from '../../core/ports/coordination.ts';
import type { Database } from '../../core/ports/database.ts';
import { databaseBackends } from '../helpers/databases.ts';

const ORG = '0b5d7c7e-2f4e-4d0a-9a51-2f6f1c1f0a11';
const OTHER_ORG = '9e8d7c6b-5a49-4382-9170-6f5e4d3c2b1a';
const AT = new Date('2026-03-01T10:00:00.000Z');
const HOUR = 3_600_000;

const numbered = (from: number, count: number) => Array.from({ length: count }, (_, i) => `line ${from + i}`);

/** A pub/sub that delivers nothing: followers must find the lines by looking again. */
const deafPubSub: PubSub = {
  publish: async () => undefined,
  subscribe: async () => async () => undefined,
};

/** Takes `count` lines from a follower, awaiting each (no clock involved). */
async function take(lines: AsyncGenerator<string>, count: number): Promise<string[]> {
  const taken: string[] = [];
  while (taken.length < count) {
    const next = await lines.next();
    if (next.done) break;
    taken.push(next.value);
  }
  return taken;
}

/** The running job log store, and the kernel's writer and follower over it, on every database backend. */
async function storeContract(t: Test, db: Database) {
  await runMigrations(db, coreMigrations);
  const store = new SqlJobLogStore(db);

  t.test('lines are read from any line number, across chunks, in order, up to the number asked', async (t) => {
    await store.append({ stream: 's1', organizationId: ORG, firstLine: 0, lines: numbered(0, 3), writtenAt: AT });
    await store.append({ stream: 's1', organizationId: ORG, firstLine: 3, lines: numbered(3, 4), writtenAt: AT });
    const awkward = ['with, "quotes" and {braces}', ''];
    await store.append({ stream: 's1', organizationId: ORG, firstLine: 7, lines: awkward, writtenAt: AT });
    await store.append({ stream: 'other', organizationId: ORG, firstLine: 0, lines: ['not s1'], writtenAt: AT });
    t.same(await store.read('s1', 0, 100), [...numbered(0, 7), 'with, "quotes" and {braces}', '']);
    t.same(await store.read('s1', 2, 3), ['line 2', 'line 3', 'line 4'], 'from inside a chunk, into the next');
    t.same(await store.read('s1', 5, 100), ['line 5', 'line 6', 'with, "quotes" and {braces}', '']);
    t.same(await store.read('s1', 9, 100), [], 'past the end: nothing yet');
    t.same(await store.read('s1', 0, 0), []);
    t.same(await store.read('never', 0, 10), []);
  });

  t.test('a chunk not written yet stops the read at the gap; a chunk written again replaces itself', async (t) => {
    await store.append({ stream: 's2', organizationId: ORG, firstLine: 0, lines: ['a', 'b'], writtenAt: AT });
    await store.append({ stream: 's2', organizationId: ORG, firstLine: 4, lines: ['e'], writtenAt: AT });
    t.same(await store.read('s2', 0, 10), ['a', 'b']);
    await store.append({ stream: 's2', organizationId: ORG, firstLine: 2, lines: ['c', 'd'], writtenAt: AT });
    await store.append({ stream: 's2', organizationId: ORG, firstLine: 2, lines: ['c', 'd'], writtenAt: AT });
    t.same(await store.read('s2', 0, 10), ['a', 'b', 'c', 'd', 'e']);
  });

  t.test('clearing a stream forgets its lines only', async (t) => {
    t.equal(await store.clear('s2'), 3);
    t.same(await store.read('s2', 0, 10), []);
    t.equal((await store.read('s1', 0, 100)).length, 9);
  });

  t.test("erasing an organisation deletes its streams and keeps the others'", async (t) => {
    await store.append({ stream: 'theirs', organizationId: OTHER_ORG, firstLine: 0, lines: ['kept'], writtenAt: AT });
    t.equal(await db.transaction((tx) => store.eraseForOrganization(tx, ORG)), 4);
    t.same(await store.read('s1', 0, 10), []);
    t.same(await store.read('theirs', 0, 10), ['kept']);
  });

  t.test('a writer on one replica, a follower on another: written on size, at close, woken by pub/sub', async (t) => {
    const pubsub = new MemoryPubSub();
    // Neither the interval nor polling can fire during the test: only size, close and the message move lines.
    const settings = { flushIntervalMs: HOUR, flushLines: 3, flushBytes: 1 << 20, pollMs: HOUR };
    const worker = new JobLogs({ store, pubsub, clock: () => AT, settings });
    const api = new JobLogs({ store: new SqlJobLogStore(db), pubsub, clock: () => AT, settings });
    const writer = worker.writer('job:1', ORG);
    await writer.begin();
    let ended = false;
    const controller = new AbortController();
    const followed = api.follow('job:1', { signal: controller.signal, ended: async () => ended });
    const firstThree = take(followed, 3);
    for (const line of numbered(0, 3)) writer.append(line);
    t.same(await firstThree, numbered(0, 3), 'a full chunk is written without waiting for the interval');

    writer.append('line 3');
    t.same(await api.read('job:1'), numbered(0, 3), 'one line waits for the interval');
    const fourth = take(followed, 1);
    await writer.close();
    t.same(await fourth, ['line 3'], 'close writes what is left');
    t.same(await api.read('job:1'), numbered(0, 4));
    t.same(await api.read('job:1', 2), ['line 2', 'line 3'], 'from a line number');

    ended = true;
    const rest = take(followed, 1);
    await writer.discard();
    t.same(await rest, [], 'the follower ends once the job is over and nothing more is stored');
    t.same(await api.read('job:1'), []);
  });

  t.test('without pub/sub a follower finds the lines by looking again', async (t) => {
    const settings = { flushIntervalMs: HOUR, flushLines: 100, pollMs: HOUR };
    const writing = new JobLogs({ store, pubsub: deafPubSub, clock: () => AT, settings });
    const following = new JobLogs({ store, pubsub: deafPubSub, clock: () => AT, settings: { pollMs: 5 } });
    const writer = writing.writer('job:2', ORG);
    await writer.begin();
    const controller = new AbortController();
    const lines = take(following.follow('job:2', { signal: controller.signal, ended: async () => false }), 2);
    writer.append('one');
    writer.append('two');
    await writer.flush();
    t.same(await lines, ['one', 'two']);
    controller.abort();
  });

  t.test('a run begun again starts the stream afresh; a run that lost the job writes nothing more', async (t) => {
    const settings = { flushIntervalMs: HOUR };
    const logs = new JobLogs({ store, pubsub: new MemoryPubSub(), clock: () => AT, settings });
    const first = logs.writer('job:3', ORG);
    await first.begin();
    first.append('first run');
    await first.flush();
    first.append('not written');
    first.abandon();
    first.append('after the loss');
    await first.flush();
    t.same(await logs.read('job:3'), ['first run']);
    const second = logs.writer('job:3', ORG);
    await second.begin();
    t.same(await logs.read('job:3'), []);
    second.append('second run');
    await second.close();
    t.same(await logs.read('job:3'), ['second run']);
    await second.discard();
  });

  t.test('a long log is read whole, past one query page', async (t) => {
    const settings = { flushIntervalMs: HOUR, flushLines: 700 };
    const logs = new JobLogs({ store, pubsub: new MemoryPubSub(), clock: () => AT, settings });
    const writer = logs.writer('job:4', ORG);
    await writer.begin();
    for (const line of numbered(0, 12_000)) writer.append(line);
    await writer.close();
    const lines = await logs.read('job:4');
    t.equal(lines.length, 12_000);
    t.equal(lines[11_999], 'line 11999');
    t.same(await logs.read('job:4', 11_998), ['line 11998', 'line 11999']);
    await writer.discard();
  });
}

for (const backend of databaseBackends()) {
  t.test(`running job log store on ${backend.name}`, async (t) => {
    const { db, cleanup } = await backend.create();
    t.teardown(cleanup);
    await storeContract(t, db);
  });
}

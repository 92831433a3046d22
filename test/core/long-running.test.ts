import t from 'tap';
import { z } from 'zod';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { definePlugin } from '../../core/kernel/plugin.ts';
import { PermanentJobError, SnoozeJob } from '../../core/jobs/queue-definitions.ts';
import { defineLongRunning, type LongRunningOperations } from '../../core/operations/long-running.ts';
import type { Database } from '../../core/ports/database.ts';
import type { LongRunningOperation } from '../../core/ports/long-running.ts';
import { accountPlugin } from '../../plugins/account/index.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { deferred, testClock } from '../helpers/jobs.ts';

// Each test builds its own service (several for the replica and restart tests): more than the default 120 s on a loaded machine.
t.setTimeout(300_000);

/**
 * The kernel's long-running operations (core/operations/long-running.ts): a record started with its
 * job in the caller's transaction, moved by the job queued → running → succeeded | failed, cancelled
 * while queued, and listed per viewer. A test plugin declares one kind whose work the test steers.
 */
const work = defineLongRunning({
  kind: 'tests.work',
  input: z.object({ text: z.string(), fail: z.enum(['never', 'always', 'permanently', 'then-snooze']).default('never') }),
  maxAttempts: 2,
});

interface WorkState {
  runs: Array<{ text: string; status: string; attempt: number }>;
  hold: ReturnType<typeof deferred<void>> | null;
  holding: ReturnType<typeof deferred<void>>;
}

function workPlugin(state: WorkState) {
  return definePlugin({
    name: 'work',
    description: 'Test: long-running work',
    migrations: [{ owner: 'work', version: 1, name: 'done', sql: 'CREATE TABLE work_done (text text PRIMARY KEY);' }],
    queues: ({ container }) => [
      container.resolve(Tokens.LongRunning).handle(work, async ({ operation, input, job, complete }) => {
        state.runs.push({ text: input.text, status: operation.status, attempt: job.attempt });
        if (state.hold) {
          state.holding.resolve();
          await state.hold.promise;
        }
        if (input.fail === 'permanently') throw new PermanentJobError(`refused ${input.text}`);
        if (input.fail === 'always') throw new Error(`failed ${input.text} on attempt ${job.attempt}`);
        // Fails its first attempt, then snoozes once on its last (a time past: due again at once).
        if (input.fail === 'then-snooze' && state.runs.length === 1) throw new Error(`failed ${input.text} on attempt ${job.attempt}`);
        if (input.fail === 'then-snooze' && state.runs.length === 2) throw new SnoozeJob(new Date(0), 'not now');
        return complete(async (tx) => {
          await tx.query('INSERT INTO work_done (text) VALUES ($1)', [input.text]);
          return { length: input.text.length };
        });
      }),
    ],
  });
}

interface Kit {
  test: TestApp;
  state: WorkState;
  clock: ReturnType<typeof testClock>;
  db: Database;
  operations: LongRunningOperations;
  start(text: string, options?: { fail?: 'never' | 'always' | 'permanently' | 'then-snooze'; runAt?: Date; organizationId?: string }): Promise<LongRunningOperation>;
  get(id: string): Promise<LongRunningOperation | null>;
  run(): Promise<void>;
}

async function kit(t: Parameters<typeof buildTestApp>[0]): Promise<Kit> {
  const state: WorkState = { runs: [], hold: null, holding: deferred() };
  const clock = testClock();
  // No background worker (role api): the test runs due jobs itself, and retries are due at once.
  const test = await buildTestApp(t, {
    manifest: [accountPlugin, workPlugin(state)],
    plugins: { account: {}, work: {} },
    config: { server: { role: 'api' } },
    clock,
    random: () => 0,
  });
  const db = test.app.svc.container.resolve(Tokens.Database);
  const operations = test.app.svc.container.resolve(Tokens.LongRunning);
  return {
    test,
    state,
    clock,
    db,
    operations,
    start: (text, options = {}) =>
      db.transaction((tx) =>
        operations.start(
          tx,
          work,
          { text, fail: options.fail ?? 'never' },
          { organizationId: options.organizationId ?? test.organizationId, ...(options.runAt ? { runAt: options.runAt } : {}) },
        ),
      ),
    get: (id) => operations.get(test.organizationId, id),
    run: () => test.app.svc.workers.runUntilIdle(),
  };
}

t.test('an operation and its job exist only if the transaction that started them commits', async (t) => {
  const k = await kit(t);
  let started: LongRunningOperation | null = null;
  await t.rejects(
    k.db.transaction(async (tx) => {
      started = await k.operations.start(tx, work, { text: 'rolled back' }, { organizationId: k.test.organizationId });
      throw new Error('the change failed');
    }),
    /the change failed/,
  );
  t.ok(started, 'it was started inside');
  t.equal(await k.get(started!.id), null, 'no operation');
  t.equal(await k.test.app.svc.container.resolve(Tokens.Jobs).get(started!.jobId), null, 'no job');
  await k.run();
  t.same(k.state.runs, [], 'nothing ran');
});

t.test('its job moves it from queued to running to succeeded, with the result complete() returned', async (t) => {
  const k = await kit(t);
  const started = await k.start('hello');
  t.match(started, { status: 'queued', kind: 'tests.work', result: null, error: null, finishedAt: null, startedBy: { kind: 'system' } });
  k.state.hold = deferred();
  const running = k.run();
  await k.state.holding.promise;
  t.equal((await k.get(started.id))?.status, 'running', 'running while the work runs');
  k.state.hold.resolve();
  await running;
  const done = await k.get(started.id);
  t.match(done, { status: 'succeeded', result: { length: 5 }, error: null });
  t.ok(done?.finishedAt, 'finished');
  t.same(k.state.runs, [{ text: 'hello', status: 'running', attempt: 1 }], 'the handler saw it running, once');
  const { rows } = await k.db.query('SELECT text FROM work_done');
  t.same(rows, [{ text: 'hello' }], 'what complete() wrote is there');
});

t.test('a failed attempt leaves it running for the retry; the last attempt marks it failed with the error', async (t) => {
  const k = await kit(t);
  const started = await k.start('flaky', { fail: 'always' });
  await k.test.app.svc.workers.pollOnce();
  await k.test.app.svc.workers.settled();
  t.equal((await k.get(started.id))?.status, 'running', 'after the first failure it is retried');
  await k.run();
  const failed = await k.get(started.id);
  t.match(failed, { status: 'failed', result: null, error: { message: 'failed flaky on attempt 2' } });
  t.equal(k.state.runs.length, 2, 'both attempts ran');
});

t.test('a PermanentJobError fails it at once', async (t) => {
  const k = await kit(t);
  const started = await k.start('never', { fail: 'permanently' });
  await k.run();
  t.match(await k.get(started.id), { status: 'failed', error: { message: 'PermanentJobError: refused never' } });
  t.equal(k.state.runs.length, 1);
});

t.test('a snooze on its last attempt does not fail it: the work runs again and succeeds', async (t) => {
  const k = await kit(t);
  const started = await k.start('patient', { fail: 'then-snooze' });
  await k.run();
  t.same(
    k.state.runs.map((run) => run.attempt),
    [1, 2, 2],
    'failed, snoozed on the last attempt, ran again as the same attempt',
  );
  t.match(await k.get(started.id), { status: 'succeeded', result: { length: 7 }, error: null });
});

t.test('a scheduled operation waits for its runAt', async (t) => {
  const k = await kit(t);
  const runAt = new Date(k.clock().getTime() + 3_600_000);
  const started = await k.start('later', { runAt });
  t.equal(started.runAt.toISOString(), runAt.toISOString());
  await k.run();
  t.equal((await k.get(started.id))?.status, 'queued', 'not before its time');
  k.clock.advance(3_600_000);
  await k.run();
  t.equal((await k.get(started.id))?.status, 'succeeded', 'run once due');
});

t.test('cancelled while queued, it is cancelled with its job and the work never runs', async (t) => {
  const k = await kit(t);
  const started = await k.start('unwanted', { runAt: new Date(k.clock().getTime() + 60_000) });
  const outcome = await k.db.transaction((tx) => k.operations.cancel(tx, k.test.organizationId, started.id, 'not wanted'));
  t.match(outcome, { cancelled: true, operation: { status: 'cancelled', error: { message: 'not wanted' } } });
  t.match(await k.get(started.id), { status: 'cancelled', error: { message: 'not wanted' } });
  k.clock.advance(60_000);
  await k.run();
  t.same(k.state.runs, [], 'the work never ran');
  t.equal((await k.test.app.svc.container.resolve(Tokens.Jobs).get(started.jobId))?.state, 'cancelled', 'its job is cancelled');
  const again = await k.db.transaction((tx) => k.operations.cancel(tx, k.test.organizationId, started.id, 'twice'));
  t.same(again, { cancelled: false, reason: 'finished' }, 'a finished operation has nothing to cancel');
});

t.test('once running, it is not cancelled: the cancel says so', async (t) => {
  const k = await kit(t);
  const started = await k.start('busy');
  k.state.hold = deferred();
  const running = k.run();
  await k.state.holding.promise;
  const outcome = await k.db.transaction((tx) => k.operations.cancel(tx, k.test.organizationId, started.id, 'too late'));
  t.same(outcome, { cancelled: false, reason: 'running' });
  k.state.hold.resolve();
  await running;
  t.equal((await k.get(started.id))?.status, 'succeeded');
});

t.test('an operation whose job ended without saying (recovered as failed) is brought in line when read', async (t) => {
  const k = await kit(t);
  const started = await k.start('orphan');
  // What lease recovery writes for a worker that died on its last attempt.
  await k.db.query("UPDATE jobs SET state = 'failed', last_error = 'the worker running it stopped renewing its lease', finished_at = now() WHERE id = $1", [started.jobId]);
  t.match(await k.get(started.id), { status: 'failed', error: { message: 'the worker running it stopped renewing its lease' } });
});

t.test("another organisation's operation is not found", async (t) => {
  const k = await kit(t);
  const started = await k.start('mine');
  t.equal(await k.operations.get('00000000-0000-4000-8000-000000000000', started.id), null);
  t.equal(await k.operations.get(k.test.organizationId, 'not-a-uuid'), null);
});

t.test('the progress list shows unfinished and recently finished operations, and each viewer hides its own', async (t) => {
  const k = await kit(t);
  const old = await k.start('old');
  await k.run();
  k.clock.advance(2 * 86_400_000);
  const done = await k.start('done');
  await k.run();
  k.clock.advance(1_000);
  const waiting = await k.start('waiting', { runAt: new Date(k.clock().getTime() + 60_000) });
  const since = new Date(k.clock().getTime() - 86_400_000);
  const filter = (viewer: string) => ({ viewer, projectIds: null, finishedSince: since });
  const listed = async (viewer: string) => (await k.operations.list(k.test.organizationId, filter(viewer), { limit: 10 })).items.map((op) => op.id);
  t.same(await listed('person:a'), [waiting.id, done.id], 'newest first; one finished two days ago is not listed');
  t.notOk((await listed('person:a')).includes(old.id));
  t.equal(await k.operations.hide(k.test.organizationId, filter('person:a'), [done.id]), 1);
  t.same(await listed('person:a'), [waiting.id], 'hidden for the one who hid it');
  t.same(await listed('person:b'), [waiting.id, done.id], 'still listed for another');
  t.equal(await k.operations.hide(k.test.organizationId, filter('person:b'), 'all'), 2);
  t.same(await listed('person:b'), [], 'all of them, for that viewer');
  k.clock.advance(1_000);
  const later = await k.start('later');
  t.same(await listed('person:b'), [later.id], 'what starts afterwards is listed');
  t.equal(await k.operations.hide('00000000-0000-4000-8000-000000000000', filter('person:a'), [waiting.id]), 0, "another organisation's hide touches nothing");
});

import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import t from 'tap';
import { createPgDatabase } from '../../adapters/pg/pg-database.ts';
import { JobRegistry } from '../../core/jobs/job-registry.ts';
import { createSharedPgSchema, testPgUrl } from '../helpers/databases.ts';
import { eventually } from '../helpers/eventually.ts';
import { jobKit, testClock } from '../helpers/jobs.ts';
import { processQueue } from '../fixtures/queue-worker.ts';

// Separate processes need a database server they can all reach; PGlite is one process's.
const skip = testPgUrl() ? false : 'needs TEST_PG_URL';

interface Worker {
  child: ChildProcessWithoutNullStreams;
  /** Resolves with the first stdout line matching the pattern. */
  line(pattern: RegExp): Promise<string>;
}

function startWorker(t: { teardown(fn: () => unknown): void }, env: Record<string, string>): Worker {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/queue-worker.ts'], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let buffered = '';
  const waiting: Array<{ pattern: RegExp; resolve(line: string): void }> = [];
  child.stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    let newline: number;
    while ((newline = buffered.indexOf('\n')) !== -1) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      for (const waiter of [...waiting]) {
        if (waiter.pattern.test(line)) {
          waiting.splice(waiting.indexOf(waiter), 1);
          waiter.resolve(line);
        }
      }
    }
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  return {
    child,
    line: (pattern) =>
      new Promise((resolve, reject) => {
        waiting.push({ pattern, resolve });
        child.once('exit', (code) => reject(new Error(`worker exited (${code}) before printing ${pattern}: ${stderr.slice(-2000)}`)));
      }),
  };
}

/** Waits for a condition the workers make true (they run on their own; nothing else tells us). */
const until = (check: () => Promise<boolean>, what: string) => eventually(check, what, { timeoutMs: 60_000, everyMs: 50 });

t.test('two worker processes on one PostgreSQL never run a job twice', { skip }, async (t) => {
  const shared = await createSharedPgSchema();
  t.teardown(() => shared.cleanup());
  const db = await createPgDatabase({ ...shared.options, poolSize: 2 });
  t.teardown(() => db.close());
  const kit = await jobKit(db, { clock: testClock(new Date().toISOString()) });
  kit.registry.addQueue(processQueue.handle(async () => undefined));
  await db.query('CREATE TABLE runs (job_id text NOT NULL, worker text NOT NULL)');

  const env = { WORKER_URL: shared.options.url, WORKER_SCHEMA: shared.options.schema, WORKER_MODE: 'record' };
  const a = startWorker(t, { ...env, WORKER_NAME: 'a' });
  const b = startWorker(t, { ...env, WORKER_NAME: 'b' });
  await Promise.all([a.line(/^ready$/), b.line(/^ready$/)]);

  await db.transaction(async (tx) => {
    for (let n = 0; n < 200; n += 1) await kit.jobs.enqueue(processQueue, { n }, { tx });
  });
  await until(async () => (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE state = 'succeeded'")).rows[0]?.n === 200, 'every job to succeed');
  const { rows } = await db.query<{ runs: number; jobs: number; a: number; b: number }>(
    `SELECT count(*)::int AS runs, count(DISTINCT job_id)::int AS jobs,
            count(*) FILTER (WHERE worker = 'a')::int AS a, count(*) FILTER (WHERE worker = 'b')::int AS b FROM runs`,
  );
  t.equal(rows[0]?.runs, 200, 'every job ran');
  t.equal(rows[0]?.jobs, 200, 'no job ran twice');
  t.ok(rows[0]!.a > 0 && rows[0]!.b > 0, `both processes took part (a ${rows[0]?.a}, b ${rows[0]?.b})`);

  // SIGTERM drains: both exit cleanly.
  const exits = [once(a.child, 'exit'), once(b.child, 'exit')];
  a.child.kill('SIGTERM');
  b.child.kill('SIGTERM');
  t.same(
    (await Promise.all(exits)).map(([code]) => code),
    [0, 0],
    'both workers exit 0 on SIGTERM',
  );
});

t.test('a job whose worker process was killed mid-job runs again after its lease', { skip }, async (t) => {
  const shared = await createSharedPgSchema();
  t.teardown(() => shared.cleanup());
  const db = await createPgDatabase({ ...shared.options, poolSize: 2 });
  t.teardown(() => db.close());
  // The worker process uses the real time; this side's clock is the real time plus what the test moves it by.
  let offset = 0;
  const clock = Object.assign(() => new Date(Date.now() + offset), { advance: (ms: number) => void (offset += ms) });
  const kit = await jobKit(db, { clock });
  kit.registry.addQueue(processQueue.handle(async () => undefined));

  const worker = startWorker(t, { WORKER_URL: shared.options.url, WORKER_SCHEMA: shared.options.schema, WORKER_MODE: 'hang', WORKER_NAME: 'doomed' });
  await worker.line(/^ready$/);
  const { id } = await kit.jobs.enqueue(processQueue, { n: 1 });
  const started = await worker.line(/^started /);
  t.equal(started, `started ${id}`);
  const exited = once(worker.child, 'exit');
  worker.child.kill('SIGKILL');
  await exited;

  const ran: string[] = [];
  const registry = new JobRegistry();
  registry.addQueue(processQueue.handle(async (job) => void ran.push(job.id)));
  const survivor = kit.runner({ registry, workerId: 'survivor' });
  await survivor.runUntilIdle();
  t.same(ran, [], 'not taken over while the dead worker’s lease still holds');
  clock.advance(61_000);
  await survivor.runUntilIdle();
  t.same(ran, [id], 'run again once the lease expired');
  const job = await kit.jobs.get(id);
  t.same([job?.state, job?.attempts], ['succeeded', 2]);
});

import t from 'tap';
import { z } from 'zod';
import { createPgliteDatabase } from '../../adapters/pglite/pglite-database.ts';
import { takesQueue } from '../../core/jobs/job-runner.ts';
import { defineQueue } from '../../core/jobs/queue-definitions.ts';
import { parseConfig } from '../../config/load.ts';
import { jobKit, testClock } from '../helpers/jobs.ts';

/**
 * Workers told which queues they take (`jobs.queues`, `--queues`, SVC_JOB_QUEUES): builds run on
 * dedicated workers, the others never claim them.
 */
const builds = defineQueue({ name: 'apps.build', payload: z.object({ n: z.number() }) });
const mail = defineQueue({ name: 'mail.send', payload: z.object({ n: z.number() }) });

t.test('a worker given queues claims only those; a worker given none claims every queue', async (t) => {
  const db = await createPgliteDatabase({ dataDir: 'memory://' });
  t.teardown(() => db.close());
  const kit = await jobKit(db, { clock: testClock() });
  const ran: string[] = [];
  kit.registry.addQueue(builds.handle(async (job) => void ran.push(`build ${job.payload.n}`)));
  kit.registry.addQueue(mail.handle(async (job) => void ran.push(`mail ${job.payload.n}`)));
  await db.transaction(async (tx) => {
    await kit.jobs.enqueue(builds, { n: 1 }, { tx });
    await kit.jobs.enqueue(mail, { n: 1 }, { tx });
  });

  await kit.runner({ settings: { queues: ['apps.build'] } }).runUntilIdle();
  t.same(ran, ['build 1'], 'the build worker ran the build only');
  const waiting = await db.query<{ queue: string; state: string }>('SELECT queue, state FROM jobs WHERE queue = $1', ['mail.send']);
  t.same(waiting.rows, [{ queue: 'mail.send', state: 'queued' }], 'the mail waits for a worker that takes it');

  await kit.runner().runUntilIdle();
  t.same(ran, ['build 1', 'mail 1'], 'a worker of every queue ran it');
});

t.test('a queue pattern ending in .* takes every queue under that prefix, nothing else', async (t) => {
  t.ok(takesQueue(['event.*'], 'event.apps.deploy-on-push'));
  t.notOk(takesQueue(['event.*'], 'events'));
  t.notOk(takesQueue(['apps.build'], 'apps.build.extra'));
  t.ok(takesQueue(undefined, 'anything'));
});

t.test('--queues and SVC_JOB_QUEUES set jobs.queues; a malformed name stops the boot', async (t) => {
  t.same(parseConfig({}, {}, ['--role', 'worker', '--queues', 'apps.build,event.*']).jobs.queues, ['apps.build', 'event.*']);
  t.same(parseConfig({}, { SVC_JOB_QUEUES: 'apps.build' }).jobs.queues, ['apps.build']);
  t.equal(parseConfig({}, {}).jobs.queues, undefined, 'absent: every queue');
  t.throws(() => parseConfig({ jobs: { queues: ['Apps Build'] } }, {}), /jobs\.queues\.0: a queue name/);
});

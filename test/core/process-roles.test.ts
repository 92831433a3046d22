import t from 'tap';
import { z } from 'zod';
import { parseConfig } from '../../config/load.ts';
import { defineQueue } from '../../core/jobs/queue-definitions.ts';
import { definePlugin, type AnyPlugin } from '../../core/kernel/plugin.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { manifest as defaultManifest } from '../../plugins/index.ts';
import { allPlugins, buildTestApp } from '../helpers/app.ts';
import { dropSchema, randomSchemaName, testPgUrl } from '../helpers/databases.ts';
import { assertEnvelope } from '../helpers/envelope.ts';
import { assertConfigError } from '../helpers/config-errors.ts';
import { deferred } from '../helpers/jobs.ts';

type Role = 'api' | 'worker' | 'all';

const pings = defineQueue({ name: 'pings.send', payload: z.object({ text: z.string() }) });

/** A plugin with one queue whose handler reports each payload it ran. */
function pingsPlugin(ran: (text: string) => void): AnyPlugin {
  return definePlugin({
    name: 'pings',
    description: 'Test pings',
    queues: () => [pings.handle(async (job) => ran(job.payload.text))],
  });
}

async function pingsApp(t: Parameters<typeof buildTestApp>[0], role: Role, ran: (text: string) => void, storage?: Record<string, unknown>) {
  const manifest = [...defaultManifest, pingsPlugin(ran)];
  return buildTestApp(t, {
    manifest,
    plugins: { ...allPlugins(defaultManifest), pings: {} },
    config: { server: { role }, ...(storage ? { storage } : {}) },
  });
}

async function jobState(test: Awaited<ReturnType<typeof pingsApp>>, id: string): Promise<string | undefined> {
  return (await test.app.svc.container.resolve(Tokens.Jobs).get(id))?.state;
}

t.test('role api runs no jobs: a job it enqueues stays queued and no periodic tick is scheduled', async (t) => {
  const ran: string[] = [];
  const test = await pingsApp(t, 'api', (text) => ran.push(text));
  t.equal(test.app.svc.workers.claiming, false, 'the job runner was never started');
  const job = await test.app.svc.container.resolve(Tokens.Jobs).enqueue(pings, { text: 'later' });
  t.equal(await jobState(test, job.id), 'queued');
  const db = test.app.svc.container.resolve(Tokens.Database);
  t.same((await db.query('SELECT name FROM periodic_jobs')).rows, [], 'no periodic job was scheduled by this process');
  t.same(ran, []);
});

t.test('role worker runs the jobs it finds on the queue', async (t) => {
  const done = deferred<string>();
  const test = await pingsApp(t, 'worker', (text) => done.resolve(text));
  t.equal(test.app.svc.workers.claiming, true);
  await test.app.svc.container.resolve(Tokens.Jobs).enqueue(pings, { text: 'now' });
  t.equal(await done.promise, 'now', 'the worker ran the job on its own');
});

t.test('role worker runs the kernel periodic jobs, the abandoned-upload sweep among them', async (t) => {
  const test = await buildTestApp(t, { config: { server: { role: 'worker' } } });
  await test.app.svc.workers.runUntilIdle();
  const db = test.app.svc.container.resolve(Tokens.Database);
  const { rows } = await db.query<{ queue: string; state: string }>("SELECT queue, state FROM jobs WHERE queue LIKE 'periodic.kernel.%' ORDER BY queue");
  t.same(rows, [
    { queue: 'periodic.kernel.blobs-sweep', state: 'succeeded' },
    { queue: 'periodic.kernel.prune', state: 'succeeded' },
  ]);
});

t.test('a job an api replica enqueues is run by a worker replica on the same database', { skip: testPgUrl() ? false : 'needs TEST_PG_URL' }, async (t) => {
  const url = testPgUrl()!;
  const schema = randomSchemaName();
  t.teardown(() => dropSchema(url, schema));
  const storage = { database: { driver: 'postgres', url, schema, poolSize: 3 } };
  const done = deferred<string>();
  const apiRan: string[] = [];
  // The worker first: it migrates the schema the api replica then finds ready.
  const worker = await pingsApp(t, 'worker', (text) => done.resolve(text), storage);
  const api = await pingsApp(t, 'api', (text) => apiRan.push(text), storage);
  const job = await api.app.svc.container.resolve(Tokens.Jobs).enqueue(pings, { text: 'across replicas' });
  t.equal(await done.promise, 'across replicas', 'the worker replica ran it');
  await worker.app.svc.workers.settled();
  t.equal(await jobState(api, job.id), 'succeeded');
  t.same(apiRan, [], 'the api replica ran nothing');
});

t.test('role worker serves no /v1 and no /client routes, only the health endpoints', async (t) => {
  const test = await buildTestApp(t, { config: { server: { role: 'worker' } } });
  for (const url of ['/v1/models', '/client/keys', '/client/openapi.json', '/']) {
    assertEnvelope(t, await test.call('GET', url), 404, { code: 'route_not_found' });
  }
  assertEnvelope(t, await test.call('POST', '/v1/chat/completions', { body: { model: 'mock-small', messages: [{ role: 'user', content: 'hi' }] } }), 404, {
    code: 'route_not_found',
  });
  t.equal((await test.call('GET', '/health/live', { token: null })).statusCode, 200);
  t.equal((await test.call('GET', '/health/ready', { token: null })).statusCode, 200);
});

t.test('role api and role all serve the API', async (t) => {
  for (const role of ['api', 'all'] as const) {
    const test = await buildTestApp(t, { config: { server: { role } } });
    t.equal((await test.call('GET', '/client/keys')).statusCode, 200, `${role}: /client`);
    t.equal((await test.call('GET', '/health/live', { token: null })).statusCode, 200, `${role}: /health/live`);
  }
});

t.test('the role is all unless set; --role wins over SVC_ROLE, which wins over the file', async (t) => {
  t.equal(parseConfig({}).server.role, 'all');
  t.equal(parseConfig({ server: { role: 'api' } }).server.role, 'api');
  t.equal(parseConfig({ server: { role: 'api' } }, { SVC_ROLE: 'worker' }).server.role, 'worker');
  t.equal(parseConfig({ server: { role: 'api' } }, { SVC_ROLE: 'worker' }, ['--role', 'all']).server.role, 'all');
  t.equal(parseConfig({}, {}, ['--role=worker']).server.role, 'worker');
});

t.test('an unknown role, a --role without a value or another argument stops the boot naming it', async (t) => {
  assertConfigError(t, () => parseConfig({}, { SVC_ROLE: 'both' }), 'server.role');
  assertConfigError(t, () => parseConfig({}, {}, ['--role']), '--role', /needs a value/);
  assertConfigError(t, () => parseConfig({}, {}, ['--port', '80']), '--port', /unknown argument/);
});

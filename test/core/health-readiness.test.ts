import { once } from 'node:events';
import { createConnection, createServer, type Socket } from 'node:net';
import t from 'tap';
import { Readiness } from '../../core/kernel/readiness.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { buildTestApp } from '../helpers/app.ts';
import { dropSchema, randomSchemaName, testPgUrl } from '../helpers/databases.ts';
import { assertEnvelope } from '../helpers/envelope.ts';
import { deferred } from '../helpers/jobs.ts';
import { RawConnection } from '../helpers/raw-http.ts';

const answering = { query: async () => ({ rows: [], rowCount: 0 }) };
const pong = { ping: async () => undefined };

t.test('/health/live and /health answer 200 without credentials while the process is up', async (t) => {
  const test = await buildTestApp(t);
  for (const url of ['/health/live', '/health']) {
    const response = await test.call('GET', url, { token: null });
    t.equal(response.statusCode, 200, url);
    t.same(response.json(), { status: 'ok' });
  }
});

t.test('/health/ready is 200 when the database and coordination answer and the job runner runs', async (t) => {
  const test = await buildTestApp(t);
  const response = await test.call('GET', '/health/ready', { token: null });
  t.equal(response.statusCode, 200);
  t.same(response.json(), { status: 'ok' });
});

t.test('/health/ready is 503 not_ready naming the database once the database is closed (PGlite)', async (t) => {
  const test = await buildTestApp(t);
  await test.app.svc.container.resolve(Tokens.Database).close();
  const envelope = assertEnvelope(t, await test.call('GET', '/health/ready', { token: null }), 503, { code: 'not_ready' });
  t.match(envelope?.error.message, /failing checks: database$/);
  t.equal((await test.call('GET', '/health/live', { token: null })).statusCode, 200, 'liveness does not ask the database');
});

t.test('/health/ready is 503 naming the database once its PostgreSQL pool is ended, and shows no connection string', { skip: testPgUrl() ? false : 'needs TEST_PG_URL' }, async (t) => {
  const url = testPgUrl()!;
  const schema = randomSchemaName();
  t.teardown(() => dropSchema(url, schema));
  const test = await buildTestApp(t, { config: { storage: { database: { driver: 'postgres', url, schema, poolSize: 2 } } } });
  await test.app.svc.container.resolve(Tokens.Database).close();
  const response = await test.call('GET', '/health/ready', { token: null });
  const envelope = assertEnvelope(t, response, 503, { code: 'not_ready' });
  t.match(envelope?.error.message, /database/);
  t.notMatch(response.body, /postgres:|127\.0\.0\.1|5432/, 'no connection details');
});

t.test('/health/ready is 503 naming coordination when Redis stops answering', { skip: process.env.TEST_REDIS_URL ? false : 'needs TEST_REDIS_URL' }, async (t) => {
  // A relay to the real Redis that the test can hold, as a network partition would: commands go
  // out and nothing comes back. Released before the app closes, so it shuts down cleanly.
  const target = new URL(process.env.TEST_REDIS_URL!);
  const links: Array<{ client: Socket; upstream: Socket }> = [];
  const relay = createServer((client) => {
    const upstream = createConnection({ host: target.hostname, port: Number(target.port || 6379) });
    client.pipe(upstream).pipe(client);
    for (const socket of [client, upstream]) socket.on('error', () => undefined);
    links.push({ client, upstream });
  });
  relay.listen(0, '127.0.0.1');
  await once(relay, 'listening');
  const port = (relay.address() as { port: number }).port;
  t.teardown(() => {
    for (const { client, upstream } of links) {
      client.destroy();
      upstream.destroy();
    }
    relay.close();
  });
  const prefix = `test:ready:${Math.random().toString(36).slice(2)}:`;
  const test = await buildTestApp(t, { config: { storage: { coordination: { driver: 'redis', url: `redis://127.0.0.1:${port}`, keyPrefix: prefix } } } });
  for (const { client, upstream } of links) client.unpipe(upstream);
  const response = await test.call('GET', '/health/ready', { token: null });
  for (const { client, upstream } of links) client.pipe(upstream);
  const envelope = assertEnvelope(t, response, 503, { code: 'not_ready' });
  t.match(envelope?.error.message, /failing checks: coordination$/);
  t.notMatch(response.body, new RegExp(`redis:|${port}`), 'no connection details');
});

t.test('/health/ready is 503 as soon as draining begins, on a connection kept alive across it', async (t) => {
  const test = await buildTestApp(t, { ready: false });
  const held = deferred();
  const entered = deferred();
  test.app.get('/test/held', { config: { auth: false } }, async () => {
    entered.resolve();
    await held.promise;
    return { finished: true };
  });
  await test.app.listen({ host: '127.0.0.1', port: 0 });
  const connection = await RawConnection.open(test.app);
  t.teardown(() => connection.close());
  connection.write('GET /health/ready HTTP/1.1\r\nHost: x\r\n\r\n');
  t.equal((await connection.response()).statusCode, 200, 'ready before');
  // A connection busy when close() begins is kept (idle ones are closed): the balancer's probe rides on it.
  connection.write('GET /test/held HTTP/1.1\r\nHost: x\r\n\r\n');
  await entered.promise;
  const closed = test.app.close();
  // The runner stops claiming in a preClose hook registered after the draining one.
  while (test.app.svc.workers.claiming) await new Promise((resolve) => setImmediate(resolve));
  held.resolve();
  t.equal((await connection.response()).statusCode, 200, 'the request in flight finishes');
  connection.write('GET /health/ready HTTP/1.1\r\nHost: x\r\n\r\n');
  assertEnvelope(t, await connection.response(), 503, { code: 'shutting_down' });
  await closed;
});

t.test('a dependency that does not answer within the timeout counts as down', async (t) => {
  const readiness = new Readiness({ database: { query: () => new Promise(() => undefined) }, coordination: pong, jobs: null, timeoutMs: 5 });
  t.same(await readiness.check(), { ready: false, failed: ['database'] });
});

t.test('a coordination store whose ping fails counts as down', async (t) => {
  const readiness = new Readiness({ database: answering, coordination: { ping: () => Promise.reject(new Error('ECONNREFUSED 10.0.0.1:6379')) }, jobs: null });
  t.same(await readiness.check(), { ready: false, failed: ['coordination'] });
});

t.test('a process that runs workers is not ready while its job runner is not claiming; one that runs none is not asked', async (t) => {
  const runner = { claiming: false };
  t.same(await new Readiness({ database: answering, coordination: pong, jobs: runner }).check(), { ready: false, failed: ['jobs'] });
  runner.claiming = true;
  t.same(await new Readiness({ database: answering, coordination: pong, jobs: runner }).check(), { ready: true, failed: [] });
  t.same(await new Readiness({ database: answering, coordination: pong, jobs: null }).check(), { ready: true, failed: [] });
});

t.test('the dependency probe is reused for a second, and concurrent checks share one probe', async (t) => {
  let queries = 0;
  let now = 0;
  const database = {
    query: async () => {
      queries += 1;
      return { rows: [], rowCount: 0 };
    },
  };
  const readiness = new Readiness({ database, coordination: pong, jobs: null, now: () => now, cacheMs: 1_000 });
  await Promise.all([readiness.check(), readiness.check(), readiness.check()]);
  t.equal(queries, 1, 'one probe for three concurrent checks');
  now = 999;
  await readiness.check();
  t.equal(queries, 1, 'reused within the second');
  now = 1_000;
  await readiness.check();
  t.equal(queries, 2, 'probed again after it');
});

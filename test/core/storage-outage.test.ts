import { once } from 'node:events';
import { createConnection, createServer, type Socket } from 'node:net';
import t from 'tap';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { buildTestApp, createKey, realServersConfig } from '../helpers/app.ts';
import { TEST_PRICES } from '../helpers/gateway.ts';

const servers = realServersConfig();

t.test('an unreachable storage backend answers 503 with retry-after and does nothing', { skip: servers ? false : 'needs TEST_PG_URL and TEST_REDIS_URL' }, async (t) => {
  t.teardown(() => servers!.dropSchema());
  const test = await buildTestApp(t, {
    config: { storage: servers!.storage },
    plugins: {
      account: {},
      projects: {},
      keys: {},
      inference: { providers: { mock: { type: 'mock' } }, models: { 'mock-small': { routes: [{ provider: 'mock', model: 'mock-small' }], prices: TEST_PRICES } } },
      metering: { initialCreditUsd: 10 },
    },
  });
  const { key } = await createKey(test, { name: 'outage' });
  const chat = () => test.call('POST', '/v1/chat/completions', { token: key, body: { model: 'mock-small', messages: [{ role: 'user', content: 'hi' }] } });
  t.equal((await chat()).statusCode, 200, 'works while Redis is up');

  // Redis goes away: rate limits and spend counters cannot be read, so nothing is served unmetered.
  await test.app.svc.container.resolve(Tokens.Coordination).close();
  const refused = await chat();
  t.equal(refused.statusCode, 503);
  t.equal(refused.json().error.code, 'service_unavailable');
  t.equal(refused.headers['retry-after'], '1');
  t.notMatch(refused.body, /client is closed/i, 'the driver message stays in the log');

  // PostgreSQL goes away: a key not in the cache cannot be checked.
  await test.app.svc.container.resolve(Tokens.Database).close();
  const lookup = await test.call('GET', '/client/whoami', { token: `svc_live_${'x'.repeat(43)}` });
  t.equal(lookup.statusCode, 503);
});

t.test('shutting down while Redis is unreachable still closes the database', { skip: process.env.TEST_REDIS_URL ? false : 'needs TEST_REDIS_URL' }, async (t) => {
  // A relay to the real Redis that the test takes down, as a Redis host that died would be:
  // the client's reconnects are refused from then on.
  const target = new URL(process.env.TEST_REDIS_URL!);
  const sockets: Socket[] = [];
  const relay = createServer((client) => {
    const upstream = createConnection({ host: target.hostname, port: Number(target.port || 6379) });
    client.pipe(upstream).pipe(client);
    for (const socket of [client, upstream]) {
      socket.on('error', () => undefined);
      sockets.push(socket);
    }
  });
  relay.listen(0, '127.0.0.1');
  await once(relay, 'listening');
  const port = (relay.address() as { port: number }).port;
  const prefix = `test:outage:${Math.random().toString(36).slice(2)}:`;
  const test = await buildTestApp(t, { config: { storage: { coordination: { driver: 'redis', url: `redis://127.0.0.1:${port}`, keyPrefix: prefix } } } });
  t.equal((await test.call('GET', '/client/whoami')).statusCode, 200, 'works while Redis is up');

  const closed = once(relay, 'close');
  relay.close();
  for (const socket of sockets) socket.destroy();
  await closed;

  await t.resolves(test.app.close(), 'the shutdown completes');
  const database = test.app.svc.container.resolve(Tokens.Database);
  await t.rejects(database.query('SELECT 1'), 'the database was closed');
});

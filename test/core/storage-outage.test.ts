import t from 'tap';
import { Tokens } from '../../core/tokens.ts';
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
  const chat = () =>
    test.call('POST', '/v1/chat/completions', { token: key, body: { model: 'mock-small', messages: [{ role: 'user', content: 'hi' }] } });
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
  const lookup = await test.call('GET', '/client/whoami', { token: 'svc_live_' + 'x'.repeat(43) });
  t.equal(lookup.statusCode, 503);
});

import t, { type Test } from 'tap';
import type { AppConfigInput } from '../../../config/schema.ts';
import { MeteringTokens } from '../../../plugins/metering/index.ts';
import { addPerson, allPlugins, buildTestApp, createKey, realServersConfig, type TestApp } from '../../helpers/app.ts';
import { assertEnvelope } from '../../helpers/envelope.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';

/*
 * /v1 takes API keys only. A person's session there would be billed to no key, so no key or
 * project spend cap and no key rate limit would apply. Run on the embedded stack, and on
 * PostgreSQL + Redis when TEST_PG_URL and TEST_REDIS_URL are set.
 */
const CHAT = { model: 'mock-small', messages: [{ role: 'user', content: 'hello' }] };
const ROUTES: Array<[string, string, unknown?]> = [
  ['GET', '/v1'],
  ['GET', '/v1/models'],
  ['GET', '/v1/models/mock-small'],
  ['POST', '/v1/chat/completions', CHAT],
  ['POST', '/v1/chat/completions', { ...CHAT, stream: true }],
];

const INFERENCE = {
  providers: { mock: { type: 'mock' } },
  models: { 'mock-small': { routes: [{ provider: 'mock', model: 'mock-small' }], prices: TEST_PRICES } },
};

function runOn(t: Test, storage: AppConfigInput['storage'] | undefined) {
  let test: TestApp;
  t.before(async () => {
    test = await buildTestApp(t, { config: { storage }, plugins: { ...allPlugins(), inference: INFERENCE } });
  });

  t.test('a session on every /v1 route answers 401 api_key_required, saying to create a key', async (t) => {
    const sessions = {
      owner: test.ownerToken,
      admin: (await addPerson(test, { role: 'admin' })).token,
      member: (await addPerson(test, { role: 'member' })).token,
    };
    for (const [role, token] of Object.entries(sessions)) {
      for (const [method, url, body] of ROUTES) {
        const response = await test.call(method, url, { token, body });
        const envelope = assertEnvelope(t, response, 401, { code: 'api_key_required' });
        t.match(envelope?.error.message ?? '', /create a key with POST \/client\/keys/, `${role} ${method} ${url}: the message says to create a key`);
      }
    }
    await test.app.svc.container.resolve(MeteringTokens.Writer).flush();
    const logged = await test.call('GET', '/client/requests');
    t.equal(logged.statusCode, 200);
    t.same((logged.json() as { data: unknown[] }).data, [], 'nothing was served or logged');
  });

  t.test('an API key on the same routes is served', async (t) => {
    const { key } = await createKey(test, { name: 'v1', scopes: ['inference'] });
    for (const [method, url, body] of ROUTES) {
      const response = await test.call(method, url, { token: key, body });
      t.equal(response.statusCode, 200, `${method} ${url} (${response.body.slice(0, 120)})`);
    }
  });
}

t.test('embedded (PGlite + memory)', async (t) => runOn(t, undefined));

const real = realServersConfig();
t.test('PostgreSQL + Redis', { skip: real ? false : 'needs TEST_PG_URL and TEST_REDIS_URL' }, async (t) => {
  t.teardown(() => real!.dropSchema());
  runOn(t, real!.storage);
});

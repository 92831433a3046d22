import t from 'tap';
import { buildTestApp } from './helpers/app.ts';

t.test('a fresh service answers whoami for its bootstrap owner', async (t) => {
  const started = Date.now();
  const test = await buildTestApp(t);
  const response = await test.call('GET', '/client/whoami');
  t.equal(response.statusCode, 200);
  t.equal(response.json().credential.role, 'owner');
  t.comment(`built in ${Date.now() - started} ms`);
});

t.test('GET / lists only the surfaces this deployment serves', async (t) => {
  const withInference = await buildTestApp(t);
  t.same((await withInference.call('GET', '/', { token: null })).json().surfaces, { inference: '/v1', management: '/client', regionalManagement: '/platform/v1' });
  const managementOnly = await buildTestApp(t, { plugins: { account: {}, keys: {} } });
  t.same((await managementOnly.call('GET', '/', { token: null })).json().surfaces, { management: '/client', regionalManagement: '/platform/v1' });
});

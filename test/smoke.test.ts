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

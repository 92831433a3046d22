import t from 'tap';
import { buildTestApp } from '../helpers/app.ts';

t.test('a project name taken in the account is a 409 naming the field', async (t) => {
  const test = await buildTestApp(t);
  const first = await test.call('POST', '/client/projects', { body: { name: 'Twin' } });
  t.equal(first.statusCode, 201);
  const again = await test.call('POST', '/client/projects', { body: { name: 'twin' } });
  t.equal(again.statusCode, 409, 'names are unique without regard to case');
  t.same(again.json().error, { message: 'A project named "twin" already exists', type: 'conflict_error', code: 'project_name_taken', param: 'name' });

  const other = (await test.call('POST', '/client/projects', { body: { name: 'Other' } })).json();
  const rename = await test.call('PATCH', `/client/projects/${other.id}`, { body: { name: 'TWIN' } });
  t.equal(rename.statusCode, 409);
  t.equal(rename.json().error.code, 'project_name_taken');
});

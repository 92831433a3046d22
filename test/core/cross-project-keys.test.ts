import t from 'tap';
import { SCOPES } from '../../core/identity/scopes.ts';
import { buildTestApp, createKey } from '../helpers/app.ts';

/**
 * `projects:write` lets an API key reach every project of its organisation, but never another
 * project's keys (core/identity/authorization.ts): the scope matrix's project-bound keys lack `projects:write`,
 * so these cases hold it — every scope there is — and aim at project A from a key of project B.
 */
const test = await buildTestApp(t);
const projectA = test.defaultProjectId;
const projectB = ((await test.call('POST', '/client/projects', { body: { name: 'project B' } })).json() as { id: string }).id;
const keyOfB = (await createKey(test, { name: 'B, every scope', projectId: projectB, scopes: [...SCOPES] })).key;

const freshKeyOfA = async () => (await createKey(test, { name: 'of A', projectId: projectA })).id;
const errorCode = (body: unknown) => (body as { error?: { code?: string } }).error?.code;

t.test("a project-B key holding projects:write reaches project A itself (the scope's purpose)", async (t) => {
  const response = await test.call('GET', `/client/projects/${projectA}`, { token: keyOfB });
  t.equal(response.statusCode, 200, response.body.slice(0, 200));
});

t.test("a project-B key holding projects:write cannot read project A's keys", async (t) => {
  const id = await freshKeyOfA();
  const response = await test.call('GET', `/client/keys/${id}`, { token: keyOfB });
  t.same([response.statusCode, errorCode(response.json())], [404, 'key_not_found'], response.body.slice(0, 200));
});

t.test("a project-B key holding projects:write cannot list project A's keys", async (t) => {
  const response = await test.call('GET', `/client/keys?projectId=${projectA}`, { token: keyOfB });
  t.same([response.statusCode, errorCode(response.json())], [404, 'project_not_found'], response.body.slice(0, 200));
});

t.test("a project-B key holding projects:write cannot change project A's keys", async (t) => {
  const id = await freshKeyOfA();
  const response = await test.call('PATCH', `/client/keys/${id}`, { token: keyOfB, body: { name: 'taken over' } });
  t.same([response.statusCode, errorCode(response.json())], [404, 'key_not_found'], response.body.slice(0, 200));
  const unchanged = (await test.call('GET', `/client/keys/${id}`)).json() as { name: string };
  t.equal(unchanged.name, 'of A');
});

t.test("a project-B key holding projects:write cannot revoke project A's keys", async (t) => {
  const id = await freshKeyOfA();
  const response = await test.call('DELETE', `/client/keys/${id}`, { token: keyOfB });
  t.same([response.statusCode, errorCode(response.json())], [404, 'key_not_found'], response.body.slice(0, 200));
  t.equal((await test.call('GET', `/client/keys/${id}`)).statusCode, 200, 'the key is still there');
});

t.test('a project-B key holding projects:write cannot create a key in project A', async (t) => {
  const response = await test.call('POST', '/client/keys', { token: keyOfB, body: { name: 'planted in A', projectId: projectA } });
  t.same([response.statusCode, errorCode(response.json())], [403, 'cross_project'], response.body.slice(0, 200));
});

t.test('a project-B key holding projects:write cannot move a key into project A', async (t) => {
  const { id } = await createKey(test, { name: 'of B', projectId: projectB });
  const response = await test.call('PATCH', `/client/keys/${id}`, { token: keyOfB, body: { projectId: projectA } });
  t.same([response.statusCode, errorCode(response.json())], [403, 'key_cannot_move_key'], response.body.slice(0, 200));
});

import t from 'tap';
import type { Test } from 'tap';
import { addPerson, buildTestApp, createKey, type TestApp } from '../../helpers/app.ts';
import { storedApp } from '../apps/apps-fixtures.ts';
import { connectAccount, githubServer } from './github-fixtures.ts';

t.setTimeout(300_000);

/** The local git server with the apps plugin (for the 409 and the deploy refusal) and a few repositories. */
async function localServer(t: Test, repos: string[] = ['hello', 'other']): Promise<TestApp> {
  const test = await buildTestApp(t, { plugins: { keys: {}, projects: {}, githost: {}, apps: { proxy: { port: 0 } } } });
  for (const name of repos) {
    const created = await test.call('POST', '/client/githost/repos', { body: { name } });
    if (created.statusCode !== 201) throw new Error(`create ${name}: ${created.body}`);
  }
  return test;
}

const put = (test: TestApp, body: unknown, token?: string) => test.call('PUT', '/client/githost/repo-allow-list', { body, token });

t.test('the allow-list starts unrestricted, every repository a candidate, and only the owner reads or changes it', async (t) => {
  const test = await localServer(t);
  const list = await test.call('GET', '/client/githost/repo-allow-list');
  t.same(list.json(), {
    object: 'githost_repo_allow_list',
    restricted: false,
    mode: 'repos',
    allowed: [],
    allowedOrgs: [],
    candidates: ['hello', 'other'],
    candidateOrgs: [],
  });
  const admin = await addPerson(test, { role: 'admin' });
  t.equal((await test.call('GET', '/client/githost/repo-allow-list', { token: admin.token })).statusCode, 403);
  t.equal((await put(test, { restricted: true, repos: ['hello'] }, admin.token)).statusCode, 403);
  const { key } = await createKey(test, { scopes: ['apps:deploy', 'apps:read'] });
  t.equal((await put(test, { restricted: true, repos: ['hello'] }, key)).statusCode, 403);
});

t.test('a repository outside a restricted list is not listed, and its branches and deploys answer 404', async (t) => {
  const test = await localServer(t);
  const saved = await put(test, { restricted: true, repos: ['hello'] });
  t.equal(saved.statusCode, 200);
  t.match(saved.json(), { restricted: true, mode: 'repos', allowed: ['hello'] });
  t.same(
    (await test.call('GET', '/client/githost/repos')).json().data.map((r: { name: string }) => r.name),
    ['hello'],
  );
  const branches = await test.call('GET', '/client/githost/branches?repo=other');
  t.equal(branches.statusCode, 404);
  t.equal(branches.json().error.code, 'git_repository_not_found');
  t.equal((await test.call('GET', '/client/githost/branches?repo=hello')).statusCode, 200);
  const deploy = await test.call('POST', '/client/apps/githost', { body: { repo: 'other', startCommand: 'node index.js' } });
  t.equal(deploy.statusCode, 404);
  t.equal(deploy.json().error.code, 'git_repository_not_found');
  t.same((await test.call('GET', '/client/apps')).json().data, [], 'nothing was created');
  await put(test, { restricted: false });
  t.equal((await test.call('GET', '/client/githost/branches?repo=other')).statusCode, 200, 'unrestricted again: every repository');
});

t.test('an omitted list keeps the stored one, and both lists are kept while the other mode is active', async (t) => {
  const server = await githubServer(t);
  server.github.install({ id: 7001, account: 'acme', repos: [{ fullName: 'acme/web', branches: { main: 'a'.repeat(40) } }] });
  server.github.install({ id: 7002, account: 'beta', repos: [{ fullName: 'beta/api', branches: { main: 'b'.repeat(40) } }] });
  await connectAccount(server, { id: 501, login: 'alice', installations: [7001, 7002] });
  await server.test.call('POST', '/client/githost/claim', { body: { installationId: 7001 } });
  await server.test.call('POST', '/client/githost/claim', { body: { installationId: 7002 } });
  t.equal((await put(server.test, { restricted: true, repos: ['acme/web'] })).statusCode, 200);
  const orgs = await put(server.test, { restricted: true, mode: 'orgs', orgs: ['beta'] });
  t.match(orgs.json(), { mode: 'orgs', allowed: ['acme/web'], allowedOrgs: ['beta'], candidateOrgs: ['acme', 'beta'] });
  t.same(
    (await server.test.call('GET', '/client/githost/repos')).json().data.map((r: { name: string }) => r.name),
    ['beta/api'],
    'orgs mode: the accounts’ repositories',
  );
  const back = await put(server.test, { restricted: true, mode: 'repos' });
  t.match(back.json(), { mode: 'repos', allowed: ['acme/web'], allowedOrgs: ['beta'] });
  t.same(
    (await server.test.call('GET', '/client/githost/repos')).json().data.map((r: { name: string }) => r.name),
    ['acme/web'],
  );
});

t.test('PUT refuses a bad name, a repository the git host does not show, an account no installation is on, and over 500 names', async (t) => {
  const server = await githubServer(t);
  server.github.install({ id: 7001, account: 'acme', repos: [{ fullName: 'acme/web', branches: {} }] });
  await connectAccount(server, { id: 501, login: 'alice', installations: [7001] });
  await server.test.call('POST', '/client/githost/claim', { body: { installationId: 7001 } });
  const bad = await put(server.test, { restricted: true, repos: ['acme/web', 'no-slash'] });
  t.equal(bad.statusCode, 400);
  t.match(bad.json().error, { code: 'invalid_parameter', param: 'repos.1' });
  const unseen = await put(server.test, { restricted: true, repos: ['acme/secret'] });
  t.equal(unseen.statusCode, 400);
  t.match(unseen.json().error, { code: 'githost_repo_not_visible', param: 'repos.0' });
  const org = await put(server.test, { restricted: true, mode: 'orgs', orgs: ['stranger'] });
  t.equal(org.statusCode, 400);
  t.match(org.json().error, { code: 'githost_org_not_connected', param: 'orgs.0' });
  const many = await put(server.test, { restricted: true, repos: Array.from({ length: 501 }, (_, i) => `acme/r${i}`) });
  t.equal(many.statusCode, 400);
  const unknown = await put(server.test, { restricted: true, colour: 'red' });
  t.equal(unknown.statusCode, 400);
  t.equal(unknown.json().error.code, 'unknown_field');
  t.match((await server.test.call('GET', '/client/githost/repo-allow-list')).json(), { restricted: false, allowed: [] }, 'nothing was written');
});

t.test('PUT answers 409 when an app here deploys from a repository the new list leaves out, and writes nothing', async (t) => {
  const test = await localServer(t);
  await storedApp(test, 'hello');
  const refused = await put(test, { restricted: true, repos: ['other'] });
  t.equal(refused.statusCode, 409);
  t.equal(refused.json().error.code, 'githost_allow_list_conflict');
  t.match(refused.json().error.message, /app hello \(hello\)/);
  t.match((await test.call('GET', '/client/githost/repo-allow-list')).json(), { restricted: false, allowed: [] });
  t.equal((await put(test, { restricted: true, repos: ['hello', 'other'] })).statusCode, 200, 'a list keeping it is taken');
});

t.test('with the local git server the account routes say there is nothing to connect; it is always connected', async (t) => {
  const test = await buildTestApp(t, { plugins: { keys: {}, githost: {} } });
  const authorize = await test.call('GET', '/client/githost/authorize');
  t.equal(authorize.statusCode, 400);
  t.equal(authorize.json().error.code, 'githost_not_oauth');
  t.same((await test.call('GET', '/client/githost/authorization')).json(), {
    object: 'githost_authorization',
    provider: 'local',
    connected: true,
    login: null,
    connectedAt: null,
    installations: [],
  });
  for (const [method, path, body] of [
    ['DELETE', '/client/githost/authorization', undefined],
    ['POST', '/client/githost/claim', { installationId: 1 }],
    ['POST', '/client/githost/share', { installationId: 1, shared: true }],
    ['POST', '/client/githost/add-installation', undefined],
  ] as const) {
    const response = await test.call(method, path, { body });
    t.equal(response.json().error?.code, 'githost_not_oauth', `${method} ${path}`);
  }
  const policy = await test.call('POST', '/client/githost/member-connect', { body: { allowed: true } });
  t.same(policy.json(), { object: 'githost_member_connect', allowed: true }, 'the policy is kept all the same');
});

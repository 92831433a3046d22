import t from 'tap';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { addPerson, createKey } from '../../helpers/app.ts';
import { connectAccount, githubServer } from './github-fixtures.ts';

t.setTimeout(300_000);

const ALICE = { id: 501, login: 'alice', installations: [7001] };

function installAcme(server: Awaited<ReturnType<typeof githubServer>>, repos = [{ fullName: 'acme/web', branches: { main: 'a'.repeat(40) } }]) {
  server.github.install({ id: 7001, account: 'acme', repos });
}

t.test('authorize answers the GitHub authorization URL with the app’s client id, the callback and a state', async (t) => {
  const server = await githubServer(t);
  const response = await server.test.call('GET', '/client/githost/authorize');
  t.equal(response.statusCode, 200);
  const url = new URL(response.json().url);
  t.equal(url.origin + url.pathname, `${server.github.url}/login/oauth/authorize`);
  t.equal(url.searchParams.get('client_id'), 'Iv1.fakeclient');
  t.match(url.searchParams.get('redirect_uri'), /\/client\/githost\/callback$/);
  t.match(url.searchParams.get('state'), /^[\w-]{40,}$/);
});

t.test('the callback trades the code for a token kept in the secret vault, and authorization shows the account', async (t) => {
  const server = await githubServer(t);
  installAcme(server);
  const back = await connectAccount(server, ALICE);
  t.equal(back.statusCode, 200);
  t.match(back.body, /Connected to GitHub as alice/);
  const authorization = (await server.test.call('GET', '/client/githost/authorization')).json();
  t.match(authorization, { object: 'githost_authorization', provider: 'github', connected: true, login: 'alice' });
  t.same(
    authorization.installations.map((i: { id: number; account: string; held: boolean }) => [i.id, i.account, i.held]),
    [[7001, 'acme', false]],
  );
  const db = server.test.app.svc.container.resolve(Tokens.Database);
  const { rows } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM secrets WHERE owner_kind = 'githost.user'");
  t.equal(rows[0]?.n, 1, 'the token is a vault secret');
  const tables = await db.query('SELECT person_id, github_login FROM githost_authorizations');
  t.notMatch(JSON.stringify(tables.rows), /ghu_/, 'no token in the authorization row');
});

t.test('a state is good once: the same callback again answers 400 and connects nothing more', async (t) => {
  const server = await githubServer(t);
  const started = (await server.test.call('GET', '/client/githost/authorize')).json();
  const state = new URL(started.url).searchParams.get('state');
  const code = server.github.codeFor(ALICE);
  const first = await server.test.call('GET', `/client/githost/callback?code=${code}&state=${state}`, { token: null });
  t.equal(first.statusCode, 200);
  const again = await server.test.call('GET', `/client/githost/callback?code=${server.github.codeFor(ALICE)}&state=${state}`, { token: null });
  t.equal(again.statusCode, 400);
  t.match(again.body, /expired or was used already/);
});

t.test('a code GitHub refuses leaves the account unconnected (400 page)', async (t) => {
  const server = await githubServer(t);
  const started = (await server.test.call('GET', '/client/githost/authorize')).json();
  const state = new URL(started.url).searchParams.get('state');
  const back = await server.test.call('GET', `/client/githost/callback?code=wrong&state=${state}`, { token: null });
  t.equal(back.statusCode, 400);
  t.match(back.body, /GitHub did not accept/);
  t.match((await server.test.call('GET', '/client/githost/authorization')).json(), { connected: false, login: null });
});

t.test('members may connect only while the owner allows it; the policy is the owner’s alone', async (t) => {
  const server = await githubServer(t);
  const member = await addPerson(server.test, { role: 'member' });
  const admin = await addPerson(server.test, { role: 'admin' });
  const refused = await server.test.call('GET', '/client/githost/authorize', { token: member.token });
  t.equal(refused.statusCode, 403);
  t.equal(refused.json().error.code, 'githost_member_connect_off');
  t.equal((await server.test.call('GET', '/client/githost/authorize', { token: admin.token })).statusCode, 200, 'admins always may');
  const notOwner = await server.test.call('POST', '/client/githost/member-connect', { token: admin.token, body: { allowed: true } });
  t.equal(notOwner.statusCode, 403);
  const allowed = await server.test.call('POST', '/client/githost/member-connect', { body: { allowed: true } });
  t.same(allowed.json(), { object: 'githost_member_connect', allowed: true });
  t.equal((await server.test.call('GET', '/client/githost/authorize', { token: member.token })).statusCode, 200);
});

t.test('an API key cannot connect a GitHub account: the account routes are a person’s (403 person_required)', async (t) => {
  const server = await githubServer(t);
  const { key } = await createKey(server.test, { scopes: ['apps:deploy', 'apps:read'] });
  const response = await server.test.call('GET', '/client/githost/authorize', { token: key });
  t.equal(response.statusCode, 403);
  t.equal(response.json().error.code, 'person_required');
});

t.test('add-installation answers the app’s install URL with a state; the callback after installing claims the installation', async (t) => {
  const server = await githubServer(t);
  installAcme(server);
  await connectAccount(server, ALICE);
  const link = (await server.test.call('POST', '/client/githost/add-installation')).json();
  const url = new URL(link.url);
  t.equal(url.pathname, '/apps/svc-test-app/installations/new');
  const state = url.searchParams.get('state');
  const back = await server.test.call('GET', `/client/githost/callback?installation_id=7001&setup_action=install&state=${state}`, { token: null });
  t.equal(back.statusCode, 200);
  t.match(back.body, /installation on acme is this organisation/);
  t.match((await server.test.call('GET', '/client/githost/status')).json(), { connected: true });
});

t.test('deleting the authorization removes the token from the vault; installations stay', async (t) => {
  const server = await githubServer(t);
  installAcme(server);
  await connectAccount(server, ALICE);
  await server.test.call('POST', '/client/githost/claim', { body: { installationId: 7001 } });
  const deleted = await server.test.call('DELETE', '/client/githost/authorization');
  t.equal(deleted.statusCode, 200);
  t.match(deleted.json(), { connected: false, login: null, installations: [] });
  const db = server.test.app.svc.container.resolve(Tokens.Database);
  const { rows } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM secrets WHERE owner_kind = 'githost.user'");
  t.equal(rows[0]?.n, 0);
  t.match((await server.test.call('GET', '/client/githost/status')).json(), { connected: true });
});

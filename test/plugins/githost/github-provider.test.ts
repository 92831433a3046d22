import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { GitHostTokens } from '../../../plugins/githost/git-host.ts';
import { pushedEvents } from './git-fixtures.ts';
import { bareRepo, connectAccount, deliver, githubServer, otherOrganization } from './github-fixtures.ts';

t.setTimeout(300_000);

const ALICE = { id: 501, login: 'alice', installations: [7001] };

function installAcme(server: Awaited<ReturnType<typeof githubServer>>, repos = [{ fullName: 'acme/web', branches: { main: 'a'.repeat(40) } }]) {
  server.github.install({ id: 7001, account: 'acme', repos });
}

t.test('claiming a reachable installation connects the organisation: status, repositories as owner/name, branches', async (t) => {
  const server = await githubServer(t);
  installAcme(server);
  t.match((await server.test.call('GET', '/client/githost/status')).json(), { provider: 'github', connected: false, baseUrl: null });
  await connectAccount(server, ALICE);
  const claimed = await server.test.call('POST', '/client/githost/claim', { body: { installationId: 7001 } });
  t.equal(claimed.statusCode, 200);
  t.match(claimed.json(), { object: 'githost_installation', id: 7001, account: 'acme', held: true, shared: false });
  t.match((await server.test.call('GET', '/client/githost/status')).json(), { provider: 'github', connected: true });
  const repos = (await server.test.call('GET', '/client/githost/repos')).json();
  t.same(repos.data, [{ object: 'git_repository', name: 'acme/web', cloneUrl: `${server.github.url}/acme/web.git`, defaultBranch: 'main', empty: false }]);
  const branches = (await server.test.call('GET', '/client/githost/branches?repo=acme/web')).json();
  t.same(branches.data, [{ object: 'git_branch', name: 'main', commit: 'a'.repeat(40) }]);
  const missing = await server.test.call('GET', '/client/githost/branches?repo=acme/other');
  t.equal(missing.statusCode, 404);
  t.equal(missing.json().error.code, 'git_repository_not_found');
});

t.test('claim refuses an installation the person’s GitHub account does not reach (404), and without a connected account (400)', async (t) => {
  const server = await githubServer(t);
  installAcme(server);
  server.github.install({ id: 7002, account: 'elsewhere', repos: [] });
  const before = await server.test.call('POST', '/client/githost/claim', { body: { installationId: 7001 } });
  t.equal(before.statusCode, 400);
  t.equal(before.json().error.code, 'githost_not_authorized');
  await connectAccount(server, ALICE);
  const foreign = await server.test.call('POST', '/client/githost/claim', { body: { installationId: 7002 } });
  t.equal(foreign.statusCode, 404);
  t.match(foreign.json().error, { code: 'githost_installation_not_found', param: 'installationId' });
});

t.test('an installation another organisation holds is claimed only once that organisation shares it (409 before)', async (t) => {
  const server = await githubServer(t);
  installAcme(server);
  await connectAccount(server, ALICE);
  t.equal((await server.test.call('POST', '/client/githost/claim', { body: { installationId: 7001 } })).statusCode, 200);
  const other = await otherOrganization(server.test);
  await connectAccount(server, { id: 502, login: 'bob', installations: [7001] }, other.ownerToken);
  const refused = await server.test.call('POST', '/client/githost/claim', { token: other.ownerToken, body: { installationId: 7001 } });
  t.equal(refused.statusCode, 409);
  t.equal(refused.json().error.code, 'githost_installation_claimed');
  const shared = await server.test.call('POST', '/client/githost/share', { body: { installationId: 7001, shared: true } });
  t.match(shared.json(), { id: 7001, shared: true, held: true });
  const claimed = await server.test.call('POST', '/client/githost/claim', { token: other.ownerToken, body: { installationId: 7001 } });
  t.equal(claimed.statusCode, 200);
  t.same(
    (await server.test.call('GET', '/client/githost/repos', { token: other.ownerToken })).json().data.map((r: { name: string }) => r.name),
    ['acme/web'],
  );
});

t.test('share answers 404 for an installation the organisation does not hold', async (t) => {
  const server = await githubServer(t);
  const response = await server.test.call('POST', '/client/githost/share', { body: { installationId: 99, shared: true } });
  t.equal(response.statusCode, 404);
  t.equal(response.json().error.code, 'githost_installation_not_found');
});

t.test('installation tokens come from a JWT the app signs, and one is reused until close to its expiry', async (t) => {
  let now = Date.now();
  const server = await githubServer(t, { clock: () => new Date(now) });
  installAcme(server);
  await connectAccount(server, ALICE);
  await server.test.call('POST', '/client/githost/claim', { body: { installationId: 7001 } });
  await server.test.call('GET', '/client/githost/repos');
  await server.test.call('GET', '/client/githost/branches?repo=acme/web');
  const tokenCalls = () => server.github.requests.filter((r) => r.path === '/app/installations/7001/access_tokens');
  t.equal(tokenCalls().length, 1, 'the fake verified the RS256 JWT and issued one token, reused');
  t.match(tokenCalls()[0]?.authorization, /^Bearer [\w-]+\.[\w-]+\.[\w-]+$/);
  now += 56 * 60_000;
  await server.test.call('GET', '/client/githost/repos');
  t.equal(tokenCalls().length, 2, 'within five minutes of its expiry a new token is asked for');
});

t.test('checkout clones with the installation token in a header, a branch or a commit', async (t) => {
  const server = await githubServer(t);
  const repo = await bareRepo(t);
  server.github.install({ id: 7001, account: 'acme', repos: [{ fullName: 'acme/web', bareDir: repo.dir }] });
  await connectAccount(server, ALICE);
  await server.test.call('POST', '/client/githost/claim', { body: { installationId: 7001 } });
  const host = server.test.app.svc.container.resolve(GitHostTokens.Host);
  const into = mkdtempSync(join(tmpdir(), 'github-checkout-'));
  t.teardown(() => rmSync(into, { recursive: true, force: true }));
  const head = await host.checkout(server.test.organizationId, { repo: 'acme/web', ref: 'main', into: join(into, 'a') });
  t.equal(head.commit, repo.second);
  t.equal(readFileSync(join(into, 'a', 'second.txt'), 'utf8'), 'two\n');
  const older = await host.checkout(server.test.organizationId, { repo: 'acme/web', ref: repo.first, into: join(into, 'b') });
  t.equal(older.commit, repo.first);
  const gitRequests = server.github.requests.filter((r) => r.path.startsWith('/acme/web.git/'));
  t.ok(gitRequests.length > 0);
  for (const request of gitRequests) t.notMatch(request.path, /ghs_|x-access-token/, 'no token in a URL');
  t.ok(
    gitRequests.some((r) => r.authorization?.startsWith('Basic ')),
    'the token travels as an Authorization header',
  );
  await t.rejects(host.checkout(server.test.organizationId, { repo: 'acme/web', ref: 'nope', into: join(into, 'c') }), { name: 'GitRefNotFoundError' });
});

t.test('a push webhook with a valid X-Hub-Signature-256 records githost.pushed for the organisation holding the installation', async (t) => {
  const server = await githubServer(t);
  installAcme(server);
  await connectAccount(server, ALICE);
  await server.test.call('POST', '/client/githost/claim', { body: { installationId: 7001 } });
  const payload = {
    ref: 'refs/heads/main',
    before: '0'.repeat(40),
    after: 'b'.repeat(40),
    created: true,
    deleted: false,
    repository: { id: 1, name: 'web', full_name: 'acme/web', owner: { login: 'acme' } },
    installation: { id: 7001 },
    sender: { login: 'alice' },
  };
  const response = await deliver(server.test, 'push', payload);
  t.equal(response.statusCode, 202);
  const [event] = await pushedEvents(server.test);
  t.match(event, { subject: 'acme/web', organizationId: server.test.organizationId });
  t.same(event?.data, { provider: 'github', repo: 'acme/web', branch: 'main', before: null, after: 'b'.repeat(40) });
});

t.test('a webhook with a missing or wrong signature is 401 and records nothing', async (t) => {
  const server = await githubServer(t);
  installAcme(server);
  await connectAccount(server, ALICE);
  await server.test.call('POST', '/client/githost/claim', { body: { installationId: 7001 } });
  const payload = { ref: 'refs/heads/main', before: 'a'.repeat(40), after: 'b'.repeat(40), repository: { full_name: 'acme/web' }, installation: { id: 7001 } };
  const wrong = await deliver(server.test, 'push', payload, `sha256=${'0'.repeat(64)}`);
  t.equal(wrong.statusCode, 401);
  t.equal(wrong.json().error.type, 'authentication_error');
  t.equal((await deliver(server.test, 'push', payload, null)).statusCode, 401);
  t.equal((await deliver(server.test, 'push', payload, 'sha256=abc')).statusCode, 401, 'a short signature too');
  t.same(await pushedEvents(server.test), []);
});

t.test('an installation deleted on GitHub is no longer held', async (t) => {
  const server = await githubServer(t);
  installAcme(server);
  await connectAccount(server, ALICE);
  await server.test.call('POST', '/client/githost/claim', { body: { installationId: 7001 } });
  await deliver(server.test, 'installation', { action: 'deleted', installation: { id: 7001, account: { login: 'acme' } } });
  t.match((await server.test.call('GET', '/client/githost/status')).json(), { connected: false });
});

t.test('a github provider without its app settings, or with a key that is no PEM, stops the boot', async (t) => {
  const { buildTestApp } = await import('../../helpers/app.ts');
  await t.rejects(buildTestApp(t, { plugins: { keys: {}, githost: { provider: 'github' } } }), /provider github needs the GitHub App/);
  const github = { appId: '1', appSlug: 'a', privateKey: 'nope', clientId: 'c', clientSecret: 's', webhookSecret: 'w'.repeat(16) };
  await t.rejects(buildTestApp(t, { plugins: { keys: {}, githost: { provider: 'github', github } } }), /not a PEM private key/);
});

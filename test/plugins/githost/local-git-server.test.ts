import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import t from 'tap';
import { GitHostTokens } from '../../../plugins/githost/git-host.ts';
import { LocalTokens } from '../../../plugins/githost/index.ts';
import { createKey } from '../../helpers/app.ts';
import { createRepo, git, gitServer, pushedEvents, tinyApp } from './git-fixtures.ts';

t.test('a repository is created empty and listed with its clone URL', async (t) => {
  const server = await gitServer(t);
  const created = await createRepo(server, 'hello');
  t.match(created, { object: 'git_repository', name: 'hello', defaultBranch: null, empty: true });
  t.match(created.cloneUrl, new RegExp(`/git/${server.test.organizationId}/hello\\.git$`));
  const list = (await server.test.call('GET', '/client/githost/repos')).json();
  t.same(
    list.data.map((repo: { name: string }) => repo.name),
    ['hello'],
  );
  const status = (await server.test.call('GET', '/client/githost/status')).json();
  t.match(status, { object: 'githost_status', provider: 'local', connected: true });
  t.match(status.baseUrl, /\/git$/);
});

t.test('a second repository of the same name is refused with 409', async (t) => {
  const server = await gitServer(t);
  await createRepo(server, 'hello');
  const again = await server.test.call('POST', '/client/githost/repos', { body: { name: 'hello' } });
  t.equal(again.statusCode, 409);
  t.equal(again.json().error.code, 'git_repository_exists');
});

t.test('repository names that could leave the organisation folder, or are not lowercase names, are refused', async (t) => {
  const server = await gitServer(t);
  for (const name of ['../evil', '..', 'a/b', 'Hello', '-dash', 'a'.repeat(64), 'x.git', '']) {
    const response = await server.test.call('POST', '/client/githost/repos', { body: { name } });
    t.equal(response.statusCode, 400, JSON.stringify(name));
  }
  t.same((await server.test.call('GET', '/client/githost/repos')).json().data, []);
});

t.test('git push over HTTP with an apps:deploy key records githost.pushed with the branch and commits', async (t) => {
  const server = await gitServer(t);
  const { cloneUrl } = await createRepo(server, 'hello');
  const pushUrl = `${server.orgUrl}/hello.git`;
  t.match(cloneUrl, new RegExp(`/git/${server.test.organizationId}/hello\\.git$`));
  const app = await tinyApp(t);
  await git(t, app.dir, ['push', '--quiet', pushUrl, 'main'], server.deployKey);

  const [first] = await pushedEvents(server.test);
  t.match(first, { subject: 'hello', organizationId: server.test.organizationId, actor: { kind: 'key' } });
  t.same(first?.data, { provider: 'local', repo: 'hello', branch: 'main', before: null, after: app.commit });
  const branches = (await server.test.call('GET', '/client/githost/branches?repo=hello')).json();
  t.same(branches.data, [{ object: 'git_branch', name: 'main', commit: app.commit }]);

  writeFileSync(join(app.dir, 'index.js'), 'console.log("hello again")\n');
  await git(t, app.dir, ['commit', '--quiet', '-am', 'again']);
  const second = (await git(t, app.dir, ['rev-parse', 'HEAD'])).stdout.trim();
  await git(t, app.dir, ['push', '--quiet', pushUrl, 'main'], server.deployKey);
  const events = await pushedEvents(server.test);
  t.equal(events.length, 2, 'one event per push of the one branch');
  t.same(events[1]?.data, { provider: 'local', repo: 'hello', branch: 'main', before: app.commit, after: second });
  const repo = (await server.test.call('GET', '/client/githost/repos')).json().data[0];
  t.match(repo, { name: 'hello', defaultBranch: 'main', empty: false });
});

t.test('an apps:read key clones and fetches but may not push (403)', async (t) => {
  const server = await gitServer(t);
  await createRepo(server, 'hello');
  const pushUrl = `${server.orgUrl}/hello.git`;
  const app = await tinyApp(t);
  await git(t, app.dir, ['push', '--quiet', pushUrl, 'main'], server.deployKey);

  const into = mkdtempSync(join(tmpdir(), 'githost-clone-'));
  t.teardown(() => rmSync(into, { recursive: true, force: true }));
  await git(t, into, ['clone', '--quiet', pushUrl, 'copy'], server.readKey);
  t.equal(readFileSync(join(into, 'copy', 'index.js'), 'utf8'), 'console.log("hello")\n');

  const refused = await git(t, app.dir, ['push', pushUrl, 'main:other'], server.readKey).then(
    () => null,
    (error: { stderr: string }) => error,
  );
  t.ok(refused, 'the push failed');
  t.match(refused?.stderr, /403/);
  t.equal((await pushedEvents(server.test)).length, 1, 'nothing recorded for the refused push');
});

t.test('without a credential, or with a wrong one, git gets 401 and a Basic challenge', async (t) => {
  const server = await gitServer(t);
  await createRepo(server, 'hello');
  const path = `/git/${server.test.organizationId}/hello.git/info/refs?service=git-upload-pack`;
  const none = await server.test.app.inject({ method: 'GET', url: path });
  t.equal(none.statusCode, 401);
  t.match(none.headers['www-authenticate'], /^Basic realm=/);
  t.equal(none.json().error.code, 'missing_api_key');
  for (const password of ['svc_live_notakeyatall0000000000000', 'hunter2']) {
    const wrong = await server.test.app.inject({
      method: 'GET',
      url: path,
      headers: { authorization: `Basic ${Buffer.from(`x:${password}`).toString('base64')}` },
    });
    t.equal(wrong.statusCode, 401, password);
    t.match(wrong.headers['www-authenticate'], /^Basic realm=/);
    t.equal(wrong.json().error.code, 'invalid_api_key');
  }
});

t.test('a key without apps:read may not fetch (403)', async (t) => {
  const server = await gitServer(t);
  await createRepo(server, 'hello');
  const inferenceKey = (await createKey(server.test, { scopes: ['inference'] })).key;
  const response = await server.test.app.inject({
    method: 'GET',
    url: `/git/${server.test.organizationId}/hello.git/info/refs?service=git-upload-pack`,
    headers: { authorization: `Basic ${Buffer.from(`x:${inferenceKey}`).toString('base64')}` },
  });
  t.equal(response.statusCode, 403);
  t.equal(response.json().error.code, 'missing_scope');
});

t.test("another organisation's repository, and paths that are no repository, answer 404", async (t) => {
  const server = await gitServer(t);
  const elsewhere = randomUUID();
  // A repository of another organisation on the same server.
  await server.test.app.svc.container.resolve(LocalTokens.Repositories).create(elsewhere, 'secret');
  const auth = { authorization: `Basic ${Buffer.from(`x:${server.deployKey}`).toString('base64')}` };
  const paths = [
    `/git/${elsewhere}/secret.git/info/refs?service=git-upload-pack`,
    `/git/${server.test.organizationId}/secret.git/info/refs?service=git-upload-pack`,
    `/git/${server.test.organizationId}/..%2F${elsewhere}%2Fsecret.git/info/refs?service=git-upload-pack`,
    `/git/${server.test.organizationId}/%2E%2E.git/info/refs?service=git-upload-pack`,
    `/git/..%2F..%2Fetc/passwd.git/info/refs?service=git-upload-pack`,
    `/git/${server.test.organizationId}/secret/info/refs?service=git-upload-pack`,
    `/git/${server.test.organizationId}/secret.git/info/refs?service=something-else`,
  ];
  for (const url of paths) {
    const response = await server.test.app.inject({ method: 'GET', url, headers: auth });
    t.equal(response.statusCode, 404, url);
  }
  t.equal((await server.test.call('GET', '/client/githost/branches?repo=secret')).statusCode, 404);
});

t.test('a gzipped upload-pack request is inflated and answered like a plain one', async (t) => {
  const server = await gitServer(t);
  await createRepo(server, 'hello');
  const app = await tinyApp(t);
  await git(t, app.dir, ['push', '--quiet', `${server.orgUrl}/hello.git`, 'main'], server.deployKey);
  const want = `want ${app.commit}\n`;
  const request = Buffer.from(`${(want.length + 4).toString(16).padStart(4, '0')}${want}00000009done\n`);
  for (const gzip of [false, true]) {
    const response = await server.test.app.inject({
      method: 'POST',
      url: `/git/${server.test.organizationId}/hello.git/git-upload-pack`,
      headers: {
        authorization: `Basic ${Buffer.from(`x:${server.readKey}`).toString('base64')}`,
        'content-type': 'application/x-git-upload-pack-request',
        ...(gzip ? { 'content-encoding': 'gzip' } : {}),
      },
      payload: gzip ? gzipSync(request) : request,
    });
    t.equal(response.statusCode, 200, `gzip ${gzip}`);
    t.equal(response.headers['content-type'], 'application/x-git-upload-pack-result');
    t.ok(response.rawPayload.includes(Buffer.from('PACK')), `a pack comes back (gzip ${gzip})`);
  }
});

t.test('a push larger than local.maxPushBytes fails and moves no branch', async (t) => {
  const server = await gitServer(t, { local: { maxPushBytes: 16 * 1024 } });
  await createRepo(server, 'hello');
  const app = await tinyApp(t, { 'noise.bin': randomBytes(256 * 1024) });
  const failed = await git(t, app.dir, ['push', `${server.orgUrl}/hello.git`, 'main'], server.deployKey).then(
    () => false,
    () => true,
  );
  t.ok(failed, 'the push failed');
  t.same((await server.test.call('GET', '/client/githost/branches?repo=hello')).json().data, []);
  t.same(await pushedEvents(server.test), []);
});

t.test('the port checks out a branch or a commit into a directory and answers the commit', async (t) => {
  const server = await gitServer(t);
  await createRepo(server, 'hello');
  const app = await tinyApp(t);
  await git(t, app.dir, ['push', '--quiet', `${server.orgUrl}/hello.git`, 'main'], server.deployKey);
  const host = server.test.app.svc.container.resolve(GitHostTokens.Host);
  for (const ref of ['main', app.commit]) {
    const into = mkdtempSync(join(tmpdir(), 'githost-checkout-'));
    t.teardown(() => rmSync(into, { recursive: true, force: true }));
    const result = await host.checkout(server.test.organizationId, { repo: 'hello', ref, into });
    t.equal(result.commit, app.commit, ref);
    t.equal(readFileSync(join(into, 'index.js'), 'utf8'), 'console.log("hello")\n');
  }
  const nowhere = mkdtempSync(join(tmpdir(), 'githost-checkout-'));
  t.teardown(() => rmSync(nowhere, { recursive: true, force: true }));
  await t.rejects(host.checkout(server.test.organizationId, { repo: 'hello', ref: 'nope', into: nowhere }), { name: 'GitRefNotFoundError' });
  await t.rejects(host.checkout(randomUUID(), { repo: 'hello', ref: 'main', into: nowhere }), { name: 'GitRepositoryNotFoundError' });
  t.same(readdirSync(nowhere), []);
});

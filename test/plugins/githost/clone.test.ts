import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import t, { type Test } from 'tap';
import { cloneRepository } from '../../../plugins/githost/clone.ts';
import { GitHostTokens } from '../../../plugins/githost/git-host.ts';
import { createRepo, git, gitServer, tinyApp } from './git-fixtures.ts';

function emptyDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'githost-cloned-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const basic = (key: string) => `Basic ${Buffer.from(`x:${key}`).toString('base64')}`;
const LIMITS = { maxBytes: 50 * 1024 * 1024, timeoutMs: 60_000 };

t.test('a loopback URL is refused by the outbound URL guard before git runs', async (t) => {
  for (const url of ['http://127.0.0.1:9/x.git', 'http://localhost/x.git', 'https://[::1]/x.git', 'http://169.254.169.254/latest']) {
    const into = emptyDir(t);
    await t.rejects(cloneRepository({ url, into, ...LIMITS }), { name: 'CloneRefusedError', reason: 'url_refused' }, url);
    t.same(readdirSync(into), []);
  }
});

t.test('only http and https URLs are cloned', async (t) => {
  for (const url of ['file:///etc', 'ssh://example.com/x.git', 'git://example.com/x.git', 'ext::sh -c touch% /tmp/pwned']) {
    await t.rejects(cloneRepository({ url, into: emptyDir(t), ...LIMITS }), { name: 'CloneRefusedError', reason: 'url_refused' }, url);
  }
});

t.test('a URL carrying a user name or password is refused, without repeating it', async (t) => {
  const error = await cloneRepository({
    url: 'https://user:hunter2secret@example.com/x.git',
    into: emptyDir(t),
    ...LIMITS,
  }).catch((caught: Error) => caught);
  t.match(error, { name: 'CloneRefusedError', reason: 'credentials_in_url' });
  t.notMatch((error as Error).message, /hunter2secret/);
});

t.test('a clone with a credential takes the branch shallowly and answers its commit', async (t) => {
  const server = await gitServer(t);
  await createRepo(server, 'hello');
  const app = await tinyApp(t);
  await git(t, app.dir, ['push', '--quiet', `${server.orgUrl}/hello.git`, 'main'], server.deployKey);
  const into = emptyDir(t);
  const result = await cloneRepository({
    url: `${server.orgUrl}/hello.git`,
    authorization: basic(server.readKey),
    branch: 'main',
    into,
    ...LIMITS,
    policy: { allowPrivate: true },
  });
  t.equal(result.commit, app.commit);
  t.equal(readFileSync(join(into, 'index.js'), 'utf8'), 'console.log("hello")\n');
  t.equal((await git(t, into, ['rev-list', '--count', 'HEAD'])).stdout.trim(), '1', 'one commit deep');
});

t.test('the credential appears in no error, whatever git says about the failure', async (t) => {
  const server = await gitServer(t);
  await createRepo(server, 'hello');
  const token = 'svc_live_thisisnotarealkeybutlookslikeone1234';
  for (const request of [{ token }, { authorization: basic(token) }]) {
    const into = emptyDir(t);
    const error = (await cloneRepository({ url: `${server.orgUrl}/hello.git`, into, ...LIMITS, ...request, policy: { allowPrivate: true } }).catch((caught: Error) => caught)) as Error & {
      detail?: string;
    };
    t.match(error, { name: 'GitCommandError', reason: 'exit' });
    const said = `${error.message} ${error.detail ?? ''} ${String(error.stack)}`;
    t.notMatch(said, token);
    t.notMatch(said, Buffer.from(`x:${token}`).toString('base64'));
    t.same(readdirSync(into), [], 'nothing left behind');
  }
});

t.test('a clone larger than its cap is killed and leaves nothing', async (t) => {
  const server = await gitServer(t);
  await createRepo(server, 'big');
  const app = await tinyApp(t, { 'noise.bin': randomBytes(2 * 1024 * 1024) });
  await git(t, app.dir, ['push', '--quiet', `${server.orgUrl}/big.git`, 'main'], server.deployKey);
  const into = emptyDir(t);
  const error = await cloneRepository({
    url: `${server.orgUrl}/big.git`,
    authorization: basic(server.readKey),
    into,
    maxBytes: 256 * 1024,
    timeoutMs: 60_000,
    policy: { allowPrivate: true },
  }).catch((caught: Error) => caught);
  t.match(error, { name: 'GitCommandError', reason: 'too_large' });
  t.same(readdirSync(into), []);
});

t.test("the plugin's clone applies outbound.allowPrivateNetwork: off by default, so a loopback URL is refused", async (t) => {
  const server = await gitServer(t);
  const clone = server.test.app.svc.container.resolve(GitHostTokens.Clone);
  await t.rejects(clone({ url: `${server.orgUrl}/hello.git`, into: emptyDir(t) }), { name: 'CloneRefusedError', reason: 'url_refused' });
});

import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { AppsTokens } from '../../../plugins/apps/index.ts';
import { createKey } from '../../helpers/app.ts';
import { appsServer, call, commitFiles, git, serverSource, settledDeployment, storedApp, tinyApp } from './apps-fixtures.ts';

/**
 * The deploy breadth (plugins/apps/README.md): POST /apps from a git URL, the two templates, a
 * service's redeploy, branch, branches, deploy-on-push, deploy/cancel and fresh build decision, the
 * git host's app-roots, app-analysis, app-insight, estimate and reachable, and an app's preview and
 * referenced-by.
 */
t.setTimeout(600_000);

/** A process's command line, NUL-separated; empty when it is gone. */
function cmdline(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'latin1');
  } catch {
    return '';
  }
}

t.test('deploy breadth', async (t) => {
  // Loopback URLs are allowed here (outbound.allowPrivateNetwork): the "remote" is a public mirror on 127.0.0.1.
  const server = await appsServer(t, { config: { outbound: { allowPrivateNetwork: true } } });
  const { test } = server;
  const outer = t;
  const proxyPort = () => test.app.svc.container.resolve(AppsTokens.Host).proxy?.port ?? 0;

  /** A git remote anyone may read: forwards to the local git server with a read key, so the URL carries no credential. */
  const readKey = (await createKey(test, { scopes: ['apps:read'] })).key;
  const mirror = http.createServer((req, res) => {
    const upstream = new URL(server.orgUrl);
    const forwarded = http.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: `${upstream.pathname}${req.url}`,
        headers: { ...req.headers, host: upstream.host, authorization: `Basic ${Buffer.from(`x:${readKey}`).toString('base64')}` },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => mirror.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => mirror.close(() => resolve())));
  const mirrorUrl = (name: string) => `http://127.0.0.1:${(mirror.address() as AddressInfo).port}/${name}.git`;

  /** A repository of the git host with a node server answering `text` on main; answers the working copy. */
  async function pushedRepo(t: Test, name: string, text: string): Promise<{ dir: string; commit: string }> {
    t.equal((await test.call('POST', '/client/githost/repos', { body: { name } })).statusCode, 201);
    const work = await tinyApp(t, {});
    const commit = await commitFiles(t, work.dir, serverSource(text), `${name}: ${text}`);
    await git(t, work.dir, ['push', '--quiet', `${server.orgUrl}/${name}.git`, 'main'], server.deployKey);
    return { dir: work.dir, commit };
  }

  const appsCount = async () => (await test.call('GET', '/client/apps')).json().data.length;

  await pushedRepo(t, 'remote', 'from a url v1');
  let urlApp: { appId: string; serviceId: string } = { appId: '', serviceId: '' };

  await t.test('POST /apps deploys a git URL: 202, then the app answers through the proxy', async (t) => {
    const response = await test.call('POST', '/client/apps', { body: { gitUrl: mirrorUrl('remote'), env: { DATABASE_URL: 'postgres://own/db' } } });
    t.equal(response.statusCode, 202, response.body);
    const answer = response.json();
    t.match(answer.app, { name: 'remote', source: { kind: 'url', url: mirrorUrl('remote'), branch: 'main', repo: null }, deployOnPush: false });
    t.equal(answer.deployment.status, 'queued');
    urlApp = { appId: answer.app.id, serviceId: answer.service.id };
    const done = await settledDeployment(test, urlApp.appId);
    t.equal(done.status, 'live', done.failureReason ?? '');
    t.equal((await call(proxyPort(), `${answer.app.slug}.localhost`)).body, 'from a url v1');
  });

  await t.test('POST /apps refuses databaseEnabled by name, and creates nothing', async (t) => {
    const before = await appsCount();
    const response = await test.call('POST', '/client/apps', { body: { gitUrl: mirrorUrl('remote'), name: 'other', databaseEnabled: true } });
    t.equal(response.statusCode, 400);
    t.match(response.json().error.message, /databaseEnabled/);
    t.equal(await appsCount(), before);
  });

  await t.test('POST /apps refuses a URL carrying credentials (400 git_url_refused) and a non-http URL', async (t) => {
    const before = await appsCount();
    const withPassword = mirrorUrl('remote').replace('http://', 'http://user:hunter2@');
    const refused = await test.call('POST', '/client/apps', { body: { gitUrl: withPassword, name: 'creds' } });
    t.equal(refused.statusCode, 400);
    t.match(refused.json().error, { code: 'git_url_refused', param: 'gitUrl' });
    t.notMatch(refused.body, /hunter2/, 'no password in the answer');
    const ssh = await test.call('POST', '/client/apps', { body: { gitUrl: 'ssh://git@example.com/x.git', name: 'ssh' } });
    t.equal(ssh.statusCode, 400);
    t.equal(ssh.json().error.param, 'gitUrl');
    t.equal(await appsCount(), before);
  });

  await t.test('POST /apps refuses a repository that cannot build before anything is created', async (t) => {
    t.equal((await test.call('POST', '/client/githost/repos', { body: { name: 'notes' } })).statusCode, 201);
    const work = await tinyApp(t, {});
    await git(t, work.dir, ['rm', '--quiet', 'package.json', 'index.js']);
    await commitFiles(t, work.dir, { 'README.md': 'notes\n' }, 'notes');
    await git(t, work.dir, ['push', '--quiet', `${server.orgUrl}/notes.git`, 'main'], server.deployKey);
    const before = await appsCount();
    const response = await test.call('POST', '/client/apps', { body: { gitUrl: mirrorUrl('notes') } });
    t.equal(response.statusCode, 400);
    t.equal(response.json().error.code, 'nothing_buildable');
    t.equal(await appsCount(), before);
  });

  await t.test('redeploy clones the URL again and deploys its new head', async (t) => {
    const work = await tinyApp(t, {});
    await git(t, work.dir, ['fetch', '--quiet', `${server.orgUrl}/remote.git`, 'main'], server.deployKey);
    await git(t, work.dir, ['reset', '--quiet', '--hard', 'FETCH_HEAD']);
    const commit = await commitFiles(t, work.dir, serverSource('from a url v2'), 'v2');
    await git(t, work.dir, ['push', '--quiet', `${server.orgUrl}/remote.git`, 'main'], server.deployKey);
    const response = await test.call('POST', `/client/services/${urlApp.serviceId}/redeploy`, { body: {} });
    t.equal(response.statusCode, 200, response.body);
    t.match(response.json(), { reason: 'redeploy', status: 'queued' });
    const done = await settledDeployment(test, urlApp.appId, (deployment) => deployment.id === response.json().id);
    t.equal(done.status, 'live', done.failureReason ?? '');
    t.equal(done.commit, commit, 'the new head was cloned');
    const app = (await test.call('GET', `/client/apps/${urlApp.appId}`)).json();
    t.equal((await call(proxyPort(), `${app.slug}.localhost`)).body, 'from a url v2');
  });

  await t.test('redeploy from: live is refused for a URL app (only a git-host app can rebuild a commit)', async (t) => {
    const response = await test.call('POST', `/client/services/${urlApp.serviceId}/redeploy`, { body: { from: 'live' } });
    t.equal(response.statusCode, 400);
    t.equal(response.json().error.param, 'from');
  });

  await t.test('deploy-on-push cannot be turned on for a URL app', async (t) => {
    const response = await test.call('POST', `/client/services/${urlApp.serviceId}/deploy-on-push`, { body: { enabled: true } });
    t.equal(response.statusCode, 400);
    t.equal(response.json().error.param, 'enabled');
  });

  let hosted = { appId: '', serviceId: '', dir: '' };

  await t.test('a git-host app: branches lists the tracked one; branch switches and deploys the new branch’s head', async (t) => {
    // The working copy outlives this subtest: the later ones commit to it.
    const { dir } = await pushedRepo(outer, 'branchy', 'on main');
    await git(t, dir, ['checkout', '--quiet', '-b', 'next']);
    const nextCommit = await commitFiles(t, dir, serverSource('on next'), 'next');
    await git(t, dir, ['push', '--quiet', `${server.orgUrl}/branchy.git`, 'next'], server.deployKey);
    const created = await test.call('POST', '/client/apps/githost', { body: { repo: 'branchy' } });
    t.equal(created.statusCode, 202, created.body);
    hosted = { appId: created.json().app.id, serviceId: created.json().service.id, dir };
    await settledDeployment(test, hosted.appId);

    const branches = await test.call('GET', `/client/services/${hosted.serviceId}/branches`);
    t.equal(branches.statusCode, 200);
    t.same(
      branches.json().data.map((branch: { name: string; tracked: boolean }) => [branch.name, branch.tracked]),
      [
        ['main', true],
        ['next', false],
      ],
    );

    const switched = await test.call('POST', `/client/services/${hosted.serviceId}/branch`, { body: { branch: 'next' } });
    t.equal(switched.statusCode, 200, switched.body);
    t.equal(switched.json().commit, nextCommit);
    const done = await settledDeployment(test, hosted.appId, (deployment) => deployment.id === switched.json().id);
    t.equal(done.status, 'live', done.failureReason ?? '');
    const app = (await test.call('GET', `/client/apps/${hosted.appId}`)).json();
    t.equal(app.source.branch, 'next');
    t.equal((await call(proxyPort(), `${app.slug}.localhost`)).body, 'on next');
  });

  await t.test('branch to a branch that does not exist: 400 git_branch_not_found, the tracked branch unchanged', async (t) => {
    const response = await test.call('POST', `/client/services/${hosted.serviceId}/branch`, { body: { branch: 'nope' } });
    t.equal(response.statusCode, 400);
    t.match(response.json().error, { code: 'git_branch_not_found', param: 'branch' });
    t.equal((await test.call('GET', `/client/apps/${hosted.appId}`)).json().source.branch, 'next');
  });

  await t.test('redeploy from: live rebuilds the live commit of a git-host app', async (t) => {
    const live = (await test.call('GET', `/client/services/${hosted.serviceId}/deployments`)).json().data.find((d: { status: string }) => d.status === 'live');
    const response = await test.call('POST', `/client/services/${hosted.serviceId}/redeploy`, { body: { from: 'live' } });
    t.equal(response.statusCode, 200, response.body);
    t.equal(response.json().commit, live.commit);
    const done = await settledDeployment(test, hosted.appId, (deployment) => deployment.id === response.json().id);
    t.equal(done.status, 'live', done.failureReason ?? '');
  });

  await t.test('deploy-on-push off is stored on the app', async (t) => {
    const response = await test.call('POST', `/client/services/${hosted.serviceId}/deploy-on-push`, { body: { enabled: false } });
    t.equal(response.statusCode, 200);
    t.same(response.json(), { object: 'service', id: hosted.serviceId, deployOnPush: false });
    t.equal((await test.call('GET', `/client/apps/${hosted.appId}`)).json().deployOnPush, false);
  });

  await t.test('POST /services/{id}/build decides again from the tracked branch’s head, with reasons', async (t) => {
    const response = await test.call('POST', `/client/services/${hosted.serviceId}/build`);
    t.equal(response.statusCode, 200, response.body);
    const head = (await git(t, hosted.dir, ['rev-parse', 'next'])).stdout.trim();
    t.match(response.json(), { object: 'build_decision', serviceId: hosted.serviceId, commit: head, envKeys: [], missingEnv: [] });
    t.match(response.json().decision.start, { value: 'node server.js', rule: 'start_script_node', evidence: Array });
  });

  await t.test('deploy/cancel cancels a queued deployment; with none left, 409 nothing_to_cancel', async (t) => {
    const stored = await storedApp(test, 'queued-one');
    const response = await test.call('POST', `/client/services/${stored.serviceId}/deploy/cancel`);
    t.equal(response.statusCode, 200, response.body);
    t.match(response.json().data, [{ id: stored.deploymentId, status: 'cancelled' }]);
    const again = await test.call('POST', `/client/services/${stored.serviceId}/deploy/cancel`);
    t.equal(again.statusCode, 409);
    t.equal(again.json().error.code, 'nothing_to_cancel');
  });

  await t.test('deploy/cancel kills a running build; the deployment is cancelled and the live version keeps serving', async (t) => {
    // A duration no other process on the machine sleeps for, so the one watched below is this build's.
    const duration = `120.${String(Math.floor(Math.random() * 1e6)).padStart(6, '0')}`;
    const slow = {
      ...serverSource('never served'),
      'package.json': `{"name":"hello","scripts":{"build":"sleep ${duration}","start":"node server.js"}}\n`,
    };
    await git(t, hosted.dir, ['checkout', '--quiet', 'next']);
    await commitFiles(t, hosted.dir, slow, 'slow build');
    await git(t, hosted.dir, ['push', '--quiet', `${server.orgUrl}/branchy.git`, 'next'], server.deployKey);
    const queued = await test.call('POST', `/client/services/${hosted.serviceId}/redeploy`, { body: {} });
    t.equal(queued.statusCode, 200);
    const id = queued.json().id;
    const until = Date.now() + 60_000;
    while ((await test.call('GET', `/client/apps/${hosted.appId}/progress`)).json().deployment.status !== 'building') {
      if (Date.now() > until) throw new Error('the build never started');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    // The build's `sleep` is running before it is cancelled; it is gone when its process group was killed.
    const sleeping = () => readdirSync('/proc').some((pid) => /^\d+$/.test(pid) && cmdline(pid) === `sleep\u0000${duration}\u0000`);
    while (!sleeping()) {
      if (Date.now() > until) throw new Error('the build’s sleep never started');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const started = Date.now();
    const cancelled = await test.call('POST', `/client/services/${hosted.serviceId}/deploy/cancel`);
    t.equal(cancelled.statusCode, 200, cancelled.body);
    t.match(cancelled.json().data, [{ id, status: 'cancelled' }]);
    while (sleeping()) {
      if (Date.now() > until) throw new Error('the build was not stopped');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    t.ok(Date.now() - started < 30_000, 'the 120 s build was killed, not waited for');
    const deployments = (await test.call('GET', `/client/services/${hosted.serviceId}/deployments`)).json().data;
    t.equal(deployments.find((d: { id: string }) => d.id === id).status, 'cancelled');
    const app = (await test.call('GET', `/client/apps/${hosted.appId}`)).json();
    t.equal((await call(proxyPort(), `${app.slug}.localhost`)).body, 'on next', 'the live version serves on');
  });

  await t.test('app-roots lists the folders that are apps; app-analysis answers a refusal as 200 with the candidates', async (t) => {
    t.equal((await test.call('POST', '/client/githost/repos', { body: { name: 'mono' } })).statusCode, 201);
    const work = await tinyApp(t, {});
    await git(t, work.dir, ['rm', '--quiet', 'package.json', 'index.js']);
    const { mkdirSync } = await import('node:fs');
    mkdirSync(`${work.dir}/web`);
    mkdirSync(`${work.dir}/api`);
    await commitFiles(t, work.dir, { 'web/package.json': '{"scripts":{"start":"node a.js"}}\n', 'api/requirements.txt': 'flask\n' }, 'mono');
    await git(t, work.dir, ['push', '--quiet', `${server.orgUrl}/mono.git`, 'main'], server.deployKey);
    const roots = await test.call('GET', '/client/githost/app-roots?repo=mono');
    t.equal(roots.statusCode, 200, roots.body);
    t.match(roots.json(), {
      topIsApp: false,
      data: [
        { path: 'api', providers: ['python'] },
        { path: 'web', providers: ['node'] },
      ],
    });
    const analysis = await test.call('GET', '/client/githost/app-analysis?repo=mono');
    t.equal(analysis.statusCode, 200);
    t.match(analysis.json(), { buildable: false, decision: null, refusal: { code: 'multiple_apps_require_root_dir', candidates: ['api', 'web'] } });
    const web = await test.call('GET', '/client/githost/app-analysis?repo=mono&rootDir=web');
    t.match(web.json(), { buildable: true, refusal: null, decision: { rootDir: { value: 'web' } }, envKeys: [] });
    const both = await test.call('GET', `/client/githost/app-roots?repo=mono&gitUrl=${encodeURIComponent(mirrorUrl('mono'))}`);
    t.equal(both.statusCode, 400, 'repo and gitUrl together');
  });

  await t.test('app-analysis of a git URL reads envKeys from its example env file', async (t) => {
    const { dir } = await pushedRepo(t, 'envy', 'env');
    await commitFiles(t, dir, { '.env.example': 'API_TOKEN=\nPORT=3000\n' }, 'env example');
    await git(t, dir, ['push', '--quiet', `${server.orgUrl}/envy.git`, 'main'], server.deployKey);
    const analysis = await test.call('GET', `/client/githost/app-analysis?gitUrl=${encodeURIComponent(mirrorUrl('envy'))}`);
    t.equal(analysis.statusCode, 200, analysis.body);
    t.match(analysis.json(), { buildable: true, envKeys: ['API_TOKEN', 'PORT'], missingEnv: ['API_TOKEN'] });
  });

  await t.test('app-insight says what the app is', async (t) => {
    const response = await test.call('GET', '/client/githost/app-insight?repo=mono&rootDir=web');
    t.equal(response.statusCode, 200, response.body);
    t.match(response.json(), { object: 'app_insight', provider: 'node', start: 'node a.js', files: 1, dependencies: 0 });
  });

  await t.test('app-insight/estimate: instances × memory tier × hours × price', async (t) => {
    const response = await test.call('GET', '/client/githost/app-insight/estimate?instances=2');
    t.equal(response.statusCode, 200, response.body);
    const estimate = response.json();
    t.equal(estimate.monthlyMicros, Math.round(2 * 730.5 * estimate.microsPerHour));
    t.equal(estimate.monthlyUsd, (estimate.monthlyMicros / 1e6).toFixed(2));
  });

  await t.test('reachable: a readable URL is, with its default branch; a refused or dead one is not, saying why', async (t) => {
    const yes = (await test.call('GET', `/client/githost/reachable?gitUrl=${encodeURIComponent(mirrorUrl('remote'))}`)).json();
    t.match(yes, { reachable: true, defaultBranch: 'main', branches: 1, reason: null });
    const creds = (await test.call('GET', `/client/githost/reachable?gitUrl=${encodeURIComponent('http://a:b@127.0.0.1:1/x.git')}`)).json();
    t.match(creds, { reachable: false, code: 'git_url_refused' });
    const dead = (await test.call('GET', `/client/githost/reachable?gitUrl=${encodeURIComponent(mirrorUrl('nowhere'))}`)).json();
    t.match(dead, { reachable: false, code: 'git_clone_failed', reason: String });
  });

  await t.test('templates: an unknown one is 400 template_not_found, an unknown field 400', async (t) => {
    const unknown = await test.call('POST', '/client/apps/templates/nope', { body: {} });
    t.equal(unknown.statusCode, 400);
    t.match(unknown.json().error, { code: 'template_not_found', param: 'template' });
    const field = await test.call('POST', '/client/apps/templates/chat-ui', { body: { databaseEnabled: true } });
    t.equal(field.statusCode, 400);
    t.match(field.json().error.message, /databaseEnabled/);
  });

  await t.test('the workflow template deploys offline; protection makes it ask for the password', async (t) => {
    const response = await test.call('POST', '/client/apps/templates/workflow-automation', { body: { name: 'flows', protection: { password: 'open sesame' } } });
    t.equal(response.statusCode, 202, response.body);
    t.match(response.json().app.source, { kind: 'template', repo: 'workflow-automation' });
    const done = await settledDeployment(test, response.json().app.id);
    t.equal(done.status, 'live', done.failureReason ?? '');
    const host = `${response.json().app.slug}.localhost`;
    t.equal((await call(proxyPort(), host)).status, 401);
    const auth = { authorization: `Basic ${Buffer.from('any:open sesame').toString('base64')}` };
    const ran = await call(proxyPort(), host, { path: '/hooks/echo', method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{"message":"hi"}' });
    t.equal(ran.status, 200, ran.body);
    t.match(JSON.parse(ran.body), { workflow: 'echo', status: 'succeeded', log: ['echo received hi'] });
  });

  await t.test('the chat template deploys; preview fetches its page title through the proxy', async (t) => {
    const response = await test.call('POST', '/client/apps/templates/chat-ui', { body: {} });
    t.equal(response.statusCode, 202, response.body);
    const appId = response.json().app.id;
    const done = await settledDeployment(test, appId);
    t.equal(done.status, 'live', done.failureReason ?? '');
    const preview = await test.call('GET', `/client/apps/${appId}/preview`);
    t.equal(preview.statusCode, 200);
    t.match(preview.json(), { object: 'app_preview', status: 'live', page: { status: 200, title: 'Chat' }, error: null });
    const managed = (await test.call('GET', `/client/services/${response.json().service.id}/env`)).json().managed;
    const baseUrl = managed.find((variable: { name: string }) => variable.name === 'SVC_BASE_URL').value;
    t.match(baseUrl, /^http:\/\/127\.0\.0\.1:\d+\/v1$/, 'the gateway as this process listens');
    // Its calls to the models and its storage: chat-template.test.ts (this server has no gateway).
  });

  await t.test('referenced-by lists apps sharing the source and apps whose variables hold the address', async (t) => {
    const app = (await test.call('GET', `/client/apps/${urlApp.appId}`)).json();
    const twin = await test.call('POST', '/client/apps', { body: { gitUrl: mirrorUrl('remote'), name: 'twin', env: { UPSTREAM: `${app.url}/api` } } });
    t.equal(twin.statusCode, 202, twin.body);
    const response = await test.call('GET', `/client/apps/${urlApp.appId}/referenced-by`);
    t.equal(response.statusCode, 200);
    t.same(
      response
        .json()
        .data.map((entry: { kind: string; name: string; detail: string }) => [entry.kind, entry.name, entry.detail])
        .sort(),
      [
        ['app_env', 'twin', 'UPSTREAM'],
        ['app_source', 'twin', mirrorUrl('remote')],
      ],
    );
    await settledDeployment(test, twin.json().app.id);
  });
});

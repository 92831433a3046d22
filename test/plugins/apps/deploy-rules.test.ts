import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { AppsStore } from '../../../plugins/apps/apps-store.ts';
import { pushDeploySubscriber } from '../../../plugins/apps/push-deploys.ts';
import { createKey } from '../../helpers/app.ts';
import { appsServer, git, serverSource, tinyApp } from './apps-fixtures.ts';

/**
 * The deploy rules (spec "Deploy rules"): a repository known not to build, or whose start cannot be
 * told, is refused with 400, a code and a param before anything is created; startCommand settles
 * the start; another project's app is a 404.
 */
t.setTimeout(300_000);

t.test('deploy rules', async (t) => {
  const server = await appsServer(t);
  const { test } = server;

  /** A repository of the git host holding exactly these files on main. */
  async function repoWith(name: string, files: Record<string, string>): Promise<void> {
    const created = await test.call('POST', '/client/githost/repos', { body: { name } });
    t.equal(created.statusCode, 201);
    const work = await tinyApp(t, {});
    await git(t, work.dir, ['rm', '--quiet', 'package.json', 'index.js']);
    for (const [file, content] of Object.entries(files)) {
      mkdirSync(dirname(join(work.dir, file)), { recursive: true });
      writeFileSync(join(work.dir, file), content);
    }
    await git(t, work.dir, ['add', '.']);
    await git(t, work.dir, ['commit', '--quiet', '-m', name]);
    await git(t, work.dir, ['push', '--quiet', `${server.orgUrl}/${name}.git`, 'main'], server.deployKey);
  }

  async function refused(body: Record<string, unknown>, code: string, param: string | null) {
    const response = await test.call('POST', '/client/apps/githost', { body });
    t.equal(response.statusCode, 400, `${code}: ${response.body}`);
    t.match(response.json().error, { code, param });
    t.same((await test.call('GET', '/client/apps')).json().data, [], 'nothing created');
    return response.json().error;
  }

  const noStart = { 'package.json': '{"name":"x","scripts":{}}\n', 'index.js': '' };

  await t.test('several apps and no rootDir: 400 multiple_apps_require_root_dir listing the folders', async (t) => {
    const app = '{"name":"x","scripts":{"start":"node server.js"}}\n';
    await repoWith('several', { 'web/package.json': app, 'api/package.json': app });
    const error = await refused({ repo: 'several' }, 'multiple_apps_require_root_dir', 'rootDir');
    t.same([...error.candidates].sort(), ['api', 'web']);
  });

  await t.test('nothing buildable: 400 nothing_buildable', async () => {
    await repoWith('notes', { 'README.md': 'hi\n' });
    await refused({ repo: 'notes' }, 'nothing_buildable', null);
  });

  await t.test('a rootDir naming no folder: 400 root_dir_not_found', async () => {
    await refused({ repo: 'several', rootDir: 'nope' }, 'root_dir_not_found', 'rootDir');
  });

  await t.test('a start that cannot be told: 400 no_start_command; an unfinished startCommand: 400 unfinished_start_command', async () => {
    await repoWith('nostart', noStart);
    await refused({ repo: 'nostart' }, 'no_start_command', 'startCommand');
    await refused({ repo: 'nostart', startCommand: 'node' }, 'unfinished_start_command', 'startCommand');
  });

  await t.test('a provided database is refused: 400 databases_unavailable', async () => {
    await refused({ repo: 'nostart', startCommand: 'node index.js', databaseEnabled: true }, 'databases_unavailable', 'databaseEnabled');
  });

  await t.test('an unknown field, an unknown region, a repository that does not exist', async (t) => {
    const unknown = await test.call('POST', '/client/apps/githost', { body: { repo: 'nostart', colour: 'red' } });
    t.equal(unknown.statusCode, 400);
    await refused({ repo: 'nostart', startCommand: 'node index.js', cell: 'mars' }, 'region_not_found', 'cell');
    const missing = await test.call('POST', '/client/apps/githost', { body: { repo: 'nowhere' } });
    t.equal(missing.statusCode, 404);
    t.match(missing.json().error, { code: 'git_repository_not_found', param: 'repo' });
  });

  await t.test('startCommand settles the start: 202, and the build check answers the same decision', async (t) => {
    const check = await test.call('GET', '/client/githost/build-check?repo=nostart&startCommand=node%20index.js');
    t.equal(check.statusCode, 200, check.body);
    t.match(check.json().decision.start, { value: 'node index.js', rule: 'caller_start_command' });
    const refusedCheck = await test.call('GET', '/client/githost/build-check?repo=nostart');
    t.match(refusedCheck.json().error, { code: 'no_start_command', param: 'startCommand' });
    const accepted = await test.call('POST', '/client/apps/githost', { body: { repo: 'nostart', startCommand: 'node index.js', deployOnPush: false } });
    t.equal(accepted.statusCode, 202, accepted.body);
    t.match(accepted.json(), { app: { startCommand: 'node index.js', deployOnPush: false }, deployment: { status: 'queued' } });
  });

  await t.test('another project’s app, service and deployment are 404', async (t) => {
    await repoWith('mine', serverSource('mine'));
    const created = (await test.call('POST', '/client/apps/githost', { body: { repo: 'mine' } })).json();
    const other = (await test.call('POST', '/client/projects', { body: { name: 'Elsewhere' } })).json();
    const key = (await createKey(test, { projectId: other.id, scopes: ['apps:read', 'apps:deploy'] })).key;
    const asOther = (method: string, url: string, body?: unknown) => test.call(method, url, { token: key, ...(body ? { body } : {}) });
    t.match((await asOther('GET', `/client/apps/${created.app.id}`)).json().error, { code: 'app_not_found' });
    t.match((await asOther('DELETE', `/client/apps/${created.app.id}`)).json().error, { code: 'app_not_found' });
    t.match((await asOther('GET', `/client/services/${created.service.id}/deployments`)).json().error, { code: 'service_not_found' });
    t.match((await asOther('POST', `/client/services/${created.service.id}/stop`)).json().error, { code: 'service_not_found' });
    t.match((await asOther('GET', `/client/deployments/${created.deployment.id}/logs`)).json().error, { code: 'deployment_not_found' });
    t.same((await asOther('GET', '/client/apps')).json().data, [], 'the list shows none of them');
  });

  await t.test('a commit queued twice is one deployment', async (t) => {
    const created = (await test.call('GET', '/client/apps')).json().data.find((app: { name: string }) => app.name === 'mine');
    const serviceId = created.services[0].id;
    const [first] = (await test.call('GET', `/client/services/${serviceId}/deployments`)).json().data;
    const database = test.app.svc.container.resolve(Tokens.Database);
    const subscriber = pushDeploySubscriber({ store: new AppsStore(database), jobs: test.app.svc.container.resolve(Tokens.Jobs), clock: () => new Date() });
    const event = {
      id: randomUUID(),
      type: 'githost.pushed' as const,
      organizationId: test.organizationId,
      subject: 'mine',
      actor: null,
      occurredAt: new Date(),
      data: { provider: 'local' as const, repo: 'mine', branch: 'main', before: null, after: first.commit },
    };
    const job = { complete: (fn: (tx: never) => Promise<unknown>) => database.transaction(fn as never) };
    // The push of the commit the app was created with, delivered twice.
    await subscriber.handle(event as never, job as never);
    await subscriber.handle(event as never, job as never);
    const history = (await test.call('GET', `/client/services/${serviceId}/deployments`)).json().data;
    t.same(
      history.map((deployment: { id: string }) => deployment.id),
      [first.id],
    );
  });

  await t.test('regions: the database query is required, 0 or 1', async (t) => {
    t.equal((await test.call('GET', '/client/apps/regions')).statusCode, 400);
    t.equal((await test.call('GET', '/client/apps/regions?database=2')).statusCode, 400);
    t.match((await test.call('GET', '/client/apps/regions?database=0')).json().data, [{ id: 'local', available: true, databases: false }]);
    t.match((await test.call('GET', '/client/apps/regions?database=1')).json().data, [{ id: 'local', available: false }]);
  });
});

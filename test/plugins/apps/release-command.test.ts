import t from 'tap';
import { SqlMailOutbox } from '../../../adapters/sql/mail-outbox.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { appsServer, call, commitFiles, git, serverSource, settledDeployment, storedApp, tinyApp } from './apps-fixtures.ts';

/**
 * The release command (plugins/apps/README.md "Release command"): run with the runtime's `run`
 * against each new build and its env before it starts, its output in the build log; a failing one
 * fails the deployment, the old version keeps serving, and the failure is mailed as the service's
 * mail settings say.
 */
t.setTimeout(600_000);

/** An app whose migrate.js prints its version and a variable of its env, exiting with `code`. */
function withMigration(version: string, code = 0): Record<string, string> {
  return {
    ...serverSource(version),
    'migrate.js': `console.log('migrating ${version} with NOTE=' + process.env.NOTE + ' PORT=' + (process.env.PORT ?? 'none')); process.exit(${code});\n`,
  };
}

t.test('release command', async (t) => {
  const server = await appsServer(t);
  const { test } = server;
  t.equal((await test.call('POST', '/client/githost/repos', { body: { name: 'release' } })).statusCode, 201);
  const work = await tinyApp(t, withMigration('v1'));
  const pushUrl = `${server.orgUrl}/release.git`;
  await git(t, work.dir, ['push', '--quiet', pushUrl, 'main'], server.deployKey);
  const created = (await test.call('POST', '/client/apps/githost', { body: { repo: 'release', env: { NOTE: 'from-env' } } })).json();
  const appId = created.app.id as string;
  const serviceId = created.service.id as string;
  const proxyPort = Number(new URL(created.app.url).port);
  t.equal((await settledDeployment(test, appId)).status, 'live');
  const answer = async () => call(proxyPort, 'release.localhost').then((reply) => [reply.status, reply.body]);

  await t.test('a service has no release command until one is set; GET /migrate answers what is set', async (t) => {
    t.match((await test.call('GET', `/client/services/${serviceId}/migrate`)).json(), { object: 'release_command', serviceId, command: null });
    const set = await test.call('POST', `/client/services/${serviceId}/migrate`, { body: { command: 'node migrate.js' } });
    t.equal(set.statusCode, 200, set.body);
    t.match((await test.call('GET', `/client/services/${serviceId}/migrate`)).json(), { command: 'node migrate.js', timeoutSeconds: 600 });
  });

  await t.test('the next deploy runs it against the new build and its env before starting, its output in the build log', async (t) => {
    const commit = await commitFiles(t, work.dir, withMigration('v2'), 'v2');
    await git(t, work.dir, ['push', '--quiet', pushUrl, 'main'], server.deployKey);
    const deployment = await settledDeployment(test, appId, (d) => d.commit === commit);
    t.equal(deployment.status, 'live', deployment.failureReason ?? '');
    const lines: string[] = (await test.call('GET', `/client/deployments/${deployment.id}/logs`)).json().lines;
    const ran = lines.findIndex((line) => / release migrating v2 with NOTE=from-env PORT=none$/.test(line));
    t.ok(ran >= 0, 'the new build’s migration ran with the app’s env and no PORT of its own');
    t.ok(lines.some((line) => / release \$ node migrate\.js$/.test(line)));
    t.ok(ran < lines.findIndex((line) => / build live$/.test(line)), 'before the version went live');
    t.same(await answer(), [200, 'v2']);
  });

  await t.test('POST /migrations runs it now beside the live deployment and answers its output', async (t) => {
    const response = await test.call('POST', `/client/services/${serviceId}/migrations`);
    t.equal(response.statusCode, 200, response.body);
    t.match(response.json(), { object: 'release_run', serviceId, command: 'node migrate.js', succeeded: true, exitCode: 0, timedOut: false });
    t.match(response.json().output, /migrating v2 with NOTE=from-env/);
  });

  await t.test('a failing release command fails the deploy, the old version keeps serving and the failure is mailed', async (t) => {
    const mail = await test.call('POST', `/client/services/${serviceId}/email`, { body: { onFailure: true, recipients: ['Ops@Example.com'] } });
    t.match(mail.json(), { object: 'service_mail', onFailure: true, recipients: ['ops@example.com'] });
    const commit = await commitFiles(t, work.dir, withMigration('v3', 3), 'v3 with a failing migration');
    await git(t, work.dir, ['push', '--quiet', pushUrl, 'main'], server.deployKey);
    const deployment = await settledDeployment(test, appId, (d) => d.commit === commit);
    t.equal(deployment.status, 'failed');
    t.equal(deployment.failureReason, 'release command (node migrate.js) failed with exit code 3');
    t.same(await answer(), [200, 'v2']);
    const lines: string[] = (await test.call('GET', `/client/deployments/${deployment.id}/logs`)).json().lines;
    t.ok(
      lines.some((line) => / release migrating v3 with NOTE=from-env/.test(line)),
      'its output is in the log',
    );
    const outbox = new SqlMailOutbox(test.app.svc.container.resolve(Tokens.Database), test.config.mail.from);
    const [sent] = await outbox.read({ to: 'ops@example.com', limit: 1 });
    t.equal(sent?.subject, 'Deploy of release failed');
    t.match(sent?.text, /release command \(node migrate\.js\) failed with exit code 3/);
  });

  await t.test('POST /email with {} reads the settings unchanged', async (t) => {
    t.match((await test.call('POST', `/client/services/${serviceId}/email`, { body: {} })).json(), { onFailure: true, recipients: ['ops@example.com'] });
  });

  await t.test('a release command of several lines is a 400 naming command; null clears it', async (t) => {
    const refused = await test.call('POST', `/client/services/${serviceId}/migrate`, { body: { command: 'npm run a\nnpm run b' } });
    t.equal(refused.statusCode, 400);
    t.match(refused.json(), { error: { code: 'invalid_parameter', param: 'command' } });
    t.match((await test.call('POST', `/client/services/${serviceId}/migrate`, { body: { command: null } })).json(), { command: null });
    const none = await test.call('POST', `/client/services/${serviceId}/migrations`);
    t.equal(none.statusCode, 409);
    t.equal(none.json().error.code, 'no_release_command');
  });

  await t.test('POST /migrations on a service that never went live is 409 nothing_to_start', async (t) => {
    const { serviceId: idle } = await storedApp(test, 'never-live');
    await test.call('POST', `/client/services/${idle}/migrate`, { body: { command: 'true' } });
    const response = await test.call('POST', `/client/services/${idle}/migrations`);
    t.equal(response.statusCode, 409, response.body);
    t.equal(response.json().error.code, 'nothing_to_start');
  });
});

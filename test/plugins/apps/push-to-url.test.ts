import t from 'tap';
import { appsServer, call, commitFiles, git, serverSource, settledDeployment, tinyApp } from './apps-fixtures.ts';

/**
 * The product end to end: a repository made through the API, a tiny Node app pushed with the
 * system's git over HTTP, the app deployed and answering through the apps proxy at
 * `<slug>.localhost`; each later push deploys again, swapping with no request lost; a version
 * that fails its health check leaves the old one serving; rollback, stop and start.
 */
t.setTimeout(600_000);

t.test('git push to a URL that answers', async (t) => {
  const server = await appsServer(t);
  const { test } = server;
  const created = await test.call('POST', '/client/githost/repos', { body: { name: 'hello' } });
  t.equal(created.statusCode, 201);
  const work = await tinyApp(t, serverSource('v1'));
  const pushUrl = `${server.orgUrl}/hello.git`;
  await git(t, work.dir, ['push', '--quiet', pushUrl, 'main'], server.deployKey);

  let appId = '';
  let serviceId = '';
  let proxyPort = 0;
  let firstDeployment = '';

  const answer = async () => call(proxyPort, 'hello.localhost');

  await t.test('deploying the pushed repository answers 202, then the app answers at <slug>.localhost through the proxy', async (t) => {
    const response = await test.call('POST', '/client/apps/githost', { body: { repo: 'hello' } });
    t.equal(response.statusCode, 202, response.body);
    const body = response.json();
    t.match(body, { object: 'app_deploy', app: { name: 'hello', slug: 'hello' }, deployment: { status: 'queued', commit: work.commit } });
    appId = body.app.id;
    serviceId = body.service.id;
    proxyPort = Number(new URL(body.app.url).port);
    t.match(body.app.url, /^http:\/\/hello\.localhost:\d+$/);

    const deployment = await settledDeployment(test, appId);
    t.equal(deployment.status, 'live', deployment.failureReason ?? '');
    t.ok(deployment.timings && deployment.timings['clone'] !== null && deployment.timings['build'] !== null && deployment.timings['deploy'] !== null, 'every phase timed');
    t.ok((deployment.imageSizeBytes ?? 0) > 0, 'artifact size recorded');
    firstDeployment = deployment.id;
    t.same(await answer().then((a) => [a.status, a.body]), [200, 'v1']);

    const app = (await test.call('GET', `/client/apps/${appId}`)).json();
    t.match(app, { status: 'live', services: [{ id: serviceId, state: 'running', liveDeploymentId: deployment.id }] });
    const log = (await test.call('GET', `/client/deployments/${deployment.id}/logs`)).json();
    t.ok(log.complete);
    t.ok(
      log.lines.some((line: string) => /^\d{4}-\d\d-\d\dT.* build node app in \.: install -, build -, start node server\.js$/.test(line)),
      'the decision is logged with its time (nothing to install, a plain node start)',
    );
  });

  await t.test('a second push deploys the new commit; a client polling every 5 ms sees no error across the swap', async (t) => {
    const second = await commitFiles(t, work.dir, serverSource('v2'), 'v2');
    const seen: string[] = [];
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const reply = await answer().catch((error: Error) => ({ status: 0, body: error.message }));
        seen.push(`${reply.status} ${reply.body}`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    await git(t, work.dir, ['push', '--quiet', pushUrl, 'main'], server.deployKey);
    const deployment = await settledDeployment(test, appId, (d) => d.commit === second);
    t.equal(deployment.status, 'live', deployment.failureReason ?? '');
    await new Promise((resolve) => setTimeout(resolve, 200));
    polling = false;
    await poller;
    t.same(
      [...new Set(seen)].filter((entry) => entry !== '200 v1' && entry !== '200 v2'),
      [],
      'only v1 then v2 answered',
    );
    t.equal(seen.at(-1), '200 v2');
    const history = (await test.call('GET', `/client/services/${serviceId}/deployments`)).json().data;
    t.same(
      history.map((d: { status: string }) => d.status),
      ['live', 'retired'],
      'newest first, the old one retired',
    );
  });

  await t.test('a push whose app fails its health check is failed with the reason, and the old version keeps serving', async (t) => {
    const broken = await commitFiles(t, work.dir, { 'server.js': 'console.error("cannot start"); process.exit(3);\n' }, 'broken');
    await git(t, work.dir, ['push', '--quiet', pushUrl, 'main'], server.deployKey);
    const deployment = await settledDeployment(test, appId, (d) => d.commit === broken);
    t.equal(deployment.status, 'failed');
    t.match(deployment.failureReason, /health check failed: process/);
    t.same(await answer().then((a) => [a.status, a.body]), [200, 'v2']);
  });

  await t.test('rollback deploys an earlier build again without rebuilding', async (t) => {
    const response = await test.call('POST', `/client/services/${serviceId}/rollback`, { body: { deploymentId: firstDeployment } });
    t.equal(response.statusCode, 200, response.body);
    t.match(response.json(), { object: 'deployment', reason: 'rollback', rollbackOf: firstDeployment, status: 'queued' });
    const deployment = await settledDeployment(test, appId, (d) => d.id === response.json().id);
    t.equal(deployment.status, 'live', deployment.failureReason ?? '');
    t.equal(deployment.timings?.['build'], null, 'nothing built');
    t.same(await answer().then((a) => [a.status, a.body]), [200, 'v1']);

    const unknown = await test.call('POST', `/client/services/${serviceId}/rollback`, { body: { deploymentId: '00000000-0000-4000-8000-000000000000' } });
    t.equal(unknown.statusCode, 404);
    t.match(unknown.json().error, { code: 'rollback_target_not_found', param: 'deploymentId' });
  });

  await t.test('stop answers 503 at the address until start brings the live build back', async (t) => {
    const stopped = await test.call('POST', `/client/services/${serviceId}/stop`);
    t.equal(stopped.statusCode, 200, stopped.body);
    t.equal((await answer()).status, 503);
    t.match((await test.call('GET', `/client/apps/${appId}`)).json().services[0], { state: 'stopped' });
    const started = await test.call('POST', `/client/services/${serviceId}/start`);
    t.equal(started.statusCode, 200, started.body);
    t.same(await answer().then((a) => [a.status, a.body]), [200, 'v1']);
  });

  await t.test('the running app’s output is served by /services/{id}/logs', async (t) => {
    const logs = (await test.call('GET', `/client/services/${serviceId}/logs`)).json();
    t.ok(
      logs.data.some((line: { stream: string; line: string }) => line.line.includes('cannot start')),
      'the failed version’s stderr is kept',
    );
  });

  await t.test('deleting the app stops it and its address answers 404', async (t) => {
    const deleted = await test.call('DELETE', `/client/apps/${appId}`);
    t.equal(deleted.statusCode, 200, deleted.body);
    t.equal((await test.call('GET', `/client/apps/${appId}`)).statusCode, 404);
    let status = 0;
    for (let i = 0; i < 50 && status !== 404; i++) {
      status = (await answer()).status;
      if (status !== 404) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    t.equal(status, 404);
  });
});

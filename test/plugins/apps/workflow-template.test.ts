import t from 'tap';
import { appsServer, call, liveTemplateApp, settledDeployment } from './apps-fixtures.ts';

/**
 * The workflow template end to end (plugins/apps/README.md, templates): a workflow added through its
 * API is saved in the app's own storage on the service, through the app's own key, and is there again
 * after a redeploy starts a fresh instance; one removed is gone from both.
 */
t.setTimeout(300_000);

const JSON_HEADERS = { 'content-type': 'application/json' };

t.test('the workflow template keeps the workflows added through its API', async (t) => {
  const { test } = await appsServer(t, { plugins: { account: {} } });
  const { app, service, host, deployment: first, proxyPort } = await liveTemplateApp(t, test, 'workflow-automation', 'flows');

  /** The app's workflows once its stored ones are in (a fresh instance reads them just after it starts). */
  const loadedWorkflows = async (): Promise<Array<{ id: string; builtIn: boolean }>> => {
    // Generous: a first read that fails is tried again after 5 s, and CI machines are slow.
    for (const until = Date.now() + 30_000; Date.now() < until; ) {
      const listed = await call(proxyPort(), host, { path: '/api/workflows' });
      const body = JSON.parse(listed.body);
      if (body.stored === 'loaded') return body.data;
      if (body.stored !== 'loading') throw new Error(`stored workflows: ${listed.body}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error('the stored workflows were never loaded');
  };

  await t.test('a fresh app has the built-in workflow and nothing stored', async (t) => {
    t.same(
      (await loadedWorkflows()).map(({ id, builtIn }) => ({ id, builtIn })),
      [{ id: 'echo', builtIn: true }],
    );
    t.same((await test.call('GET', `/client/apps/${app.id}/storage`)).json().data, []);
  });

  const greet = { id: 'greet', steps: [{ type: 'log', message: 'hello {{input.name}}' }] };

  await t.test('a workflow added through the API is saved in the app’s storage', async (t) => {
    const added = await call(proxyPort(), host, { path: '/api/workflows', method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(greet) });
    t.equal(added.status, 201, added.body);
    const files = await test.call('GET', `/client/apps/${app.id}/storage`);
    t.same(
      files.json().data.map((file: { name: string }) => file.name),
      ['workflows/greet.json'],
    );
  });

  await t.test('after a redeploy the fresh instance has it again and runs it', async (t) => {
    const redeploy = await test.call('POST', `/client/services/${service.id}/redeploy`, { body: {} });
    t.equal(redeploy.statusCode, 200, redeploy.body);
    t.match(redeploy.json(), { reason: 'redeploy', status: 'queued' });
    const second = await settledDeployment(test, app.id, (deployment) => deployment.id !== first.id);
    t.equal(second.status, 'live', second.failureReason ?? '');
    t.same((await loadedWorkflows()).map((workflow) => workflow.id).sort(), ['echo', 'greet']);
    const ran = await call(proxyPort(), host, { path: '/hooks/greet', method: 'POST', headers: JSON_HEADERS, body: '{"name":"Ada"}' });
    t.equal(ran.status, 200, ran.body);
    t.match(JSON.parse(ran.body), { workflow: 'greet', status: 'succeeded', log: ['hello Ada'] });
  });

  await t.test('a built-in workflow is neither replaced nor removed through the API', async (t) => {
    const replaced = await call(proxyPort(), host, { path: '/api/workflows', method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ ...greet, id: 'echo' }) });
    t.equal(replaced.status, 409, replaced.body);
    const removed = await call(proxyPort(), host, { path: '/api/workflows/echo', method: 'DELETE' });
    t.equal(removed.status, 409, removed.body);
  });

  await t.test('a removed workflow is gone from the app and from its storage', async (t) => {
    const removed = await call(proxyPort(), host, { path: '/api/workflows/greet', method: 'DELETE' });
    t.equal(removed.status, 200, removed.body);
    t.same(
      (await loadedWorkflows()).map((workflow) => workflow.id),
      ['echo'],
    );
    const files = await test.call('GET', `/client/apps/${app.id}/storage`);
    t.same(files.json().data, []);
    const ran = await call(proxyPort(), host, { path: '/hooks/greet', method: 'POST', headers: JSON_HEADERS, body: '{}' });
    t.equal(ran.status, 404, ran.body);
  });
});

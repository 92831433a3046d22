import t from 'tap';
import { createKey } from '../../helpers/app.ts';
import { appsServer, call, git, settledDeployment, tinyApp } from './apps-fixtures.ts';

/**
 * Env changes on a running app (spec: Apps and services, Limits "Env change"): one counted process
 * start per request and none for a no-op; a stopped service takes the change at its next start; the
 * managed SVC_* variables reach the app at every start; the app's own key is made with it, replaced
 * with one restart (the old key revoked once the new instance is healthy), moves only with its app,
 * and is revoked when the app is deleted.
 */
t.setTimeout(600_000);

/** An app answering, as JSON, the variables it was started with (a test app: it shows its own key). */
const ECHO_SERVER = [
  "const http = require('node:http');",
  'const pick = () => ({ greeting: process.env.GREETING ?? null, key: process.env.SVC_API_KEY ?? null,',
  '  base: process.env.SVC_BASE_URL ?? null, mcp: process.env.SVC_MCP_URL ?? null, port: process.env.PORT });',
  'const server = http.createServer((req, res) => res.end(JSON.stringify(pick())));',
  'server.listen(Number(process.env.PORT), "127.0.0.1");',
  "process.on('SIGTERM', () => server.close());",
  '',
].join('\n');

t.test('env changes restart a running app once', async (t) => {
  const server = await appsServer(t, { config: { server: { publicUrl: 'https://gateway.example.test' } } });
  const { test } = server;
  t.equal((await test.call('POST', '/client/githost/repos', { body: { name: 'echo' } })).statusCode, 201);
  const work = await tinyApp(t, { 'package.json': '{"name":"echo","scripts":{"start":"node server.js"}}\n', 'server.js': ECHO_SERVER });
  await git(t, work.dir, ['push', '--quiet', `${server.orgUrl}/echo.git`, 'main'], server.deployKey);

  const created = await test.call('POST', '/client/apps/githost', { body: { repo: 'echo', env: { GREETING: 'first' } } });
  t.equal(created.statusCode, 202, created.body);
  const appId: string = created.json().app.id;
  const serviceId: string = created.json().service.id;
  const proxyPort = Number(new URL(created.json().app.url).port);
  const deployment = await settledDeployment(test, appId);
  t.equal(deployment.status, 'live', deployment.failureReason ?? '');

  const seen = async () => JSON.parse((await call(proxyPort, 'echo.localhost')).body) as Record<string, string | null>;
  /** Processes the runtime started for the service so far (its log says `started pid …` once per start). */
  const starts = async () => {
    const lines = (await test.call('GET', `/client/services/${serviceId}/logs`)).json().data as Array<{ stream: string; line: string }>;
    return lines.filter((line) => line.stream === 'runtime' && line.line.startsWith('started pid')).length;
  };
  const envChange = (body: unknown) => test.call('POST', `/client/services/${serviceId}/env`, { body });
  const keyStatus = async (token: string) => (await test.call('GET', '/client/apps/regions?database=0', { token })).statusCode;

  let appKey = '';
  await t.test('the app starts with its variables and the managed ones: its own key, the gateway’s /v1 and tool URLs', async (t) => {
    const vars = await seen();
    t.match(vars, { greeting: 'first', base: 'https://gateway.example.test/v1', mcp: 'https://gateway.example.test/mcp/gateway' });
    t.match(vars['key'], /^svc_live_/);
    appKey = vars['key']!;
    t.equal(await keyStatus(appKey), 200, 'the app’s key authenticates');
    const view = (await test.call('GET', `/client/services/${serviceId}/env`)).json();
    const managedKey = view.managed.find((entry: { name: string }) => entry.name === 'SVC_API_KEY');
    t.match(managedKey, { value: null, keyId: String });
    const key = (await test.call('GET', `/client/keys/${managedKey.keyId}`)).json();
    t.match(key, { appId, projectId: test.defaultProjectId, scopes: ['inference'] });
    t.ok(appKey.endsWith(key.hint.slice(-4)), 'the key the app holds is the one listed');
  });

  await t.test('the app’s own key may not list variables: 403 env_listing_forbidden', async (t) => {
    const response = await test.call('GET', `/client/services/${serviceId}/env`, { token: appKey });
    t.equal(response.statusCode, 403, response.body);
    t.match(response.json().error, { code: 'env_listing_forbidden', type: 'permission_error' });
  });

  await t.test('a change restarts the app once: one counted process start, and it serves the new value', async (t) => {
    const before = await starts();
    const response = await envChange({ vars: { GREETING: 'second' } });
    t.equal(response.statusCode, 200, response.body);
    t.match(response.json(), { set: ['GREETING'], restart: 'done', restartFailure: null });
    t.equal(await starts(), before + 1, 'one start');
    t.match(await seen(), { greeting: 'second', key: appKey });
    const history = (await test.call('GET', `/client/services/${serviceId}/deployments`)).json().data;
    t.equal(history.length, 1, 'nothing rebuilt or redeployed');
  });

  await t.test('a no-op change starts nothing', async (t) => {
    const before = await starts();
    const response = await envChange({ vars: { GREETING: 'second' } });
    t.match(response.json(), { restart: 'none' });
    t.equal(await starts(), before);
  });

  await t.test('DELETE of a variable restarts the app once', async (t) => {
    const before = await starts();
    const response = await test.call('DELETE', `/client/services/${serviceId}/env/GREETING`);
    t.equal(response.statusCode, 200, response.body);
    t.match(response.json(), { removed: ['GREETING'], restart: 'done' });
    t.equal(await starts(), before + 1);
    t.match(await seen(), { greeting: null });
  });

  await t.test('a stopped service starts nothing on a change and takes it at its next start', async (t) => {
    t.equal((await test.call('POST', `/client/services/${serviceId}/stop`)).statusCode, 200);
    const before = await starts();
    const response = await envChange({ vars: { GREETING: 'while stopped' } });
    t.match(response.json(), { restart: 'next_start' });
    t.equal(await starts(), before, 'nothing started');
    const started = await test.call('POST', `/client/services/${serviceId}/start`);
    t.equal(started.statusCode, 200, started.body);
    t.equal(await starts(), before + 1);
    t.match(await seen(), { greeting: 'while stopped', key: appKey });
  });

  let newKey = '';
  await t.test('gateway-key/replace: a new key, one restart, the old key revoked once the app runs with the new one', async (t) => {
    const before = await starts();
    const response = await test.call('POST', `/client/services/${serviceId}/gateway-key/replace`);
    t.equal(response.statusCode, 200, response.body);
    t.match(response.json(), { object: 'gateway_key_replacement', replaced: true, restart: 'done' });
    t.equal(await starts(), before + 1);
    newKey = (await seen())['key']!;
    t.not(newKey, appKey);
    t.equal(await keyStatus(newKey), 200, 'the new key works');
    t.equal(await keyStatus(appKey), 401, 'the old key is revoked');
    const view = (await test.call('GET', `/client/services/${serviceId}/env`)).json();
    t.equal(view.managed[0].keyId, response.json().keyId);
  });

  await t.test('the app’s key moves only with its app: PATCH of the key is 409, POST /apps/{id}/group moves both', async (t) => {
    const keyId: string = (await test.call('GET', `/client/services/${serviceId}/env`)).json().managed[0].keyId;
    const project = await test.call('POST', '/client/projects', { body: { name: 'Elsewhere' } });
    t.equal(project.statusCode, 201, project.body);
    const projectId: string = project.json().id;
    const patched = await test.call('PATCH', `/client/keys/${keyId}`, { body: { projectId } });
    t.equal(patched.statusCode, 409);
    t.match(patched.json().error, { code: 'app_owned_key' });
    const moved = await test.call('POST', `/client/apps/${appId}/group`, { body: { projectId } });
    t.equal(moved.statusCode, 200, moved.body);
    t.same(moved.json(), { object: 'app_group', appId, projectId, keyIds: [keyId] });
    t.match((await test.call('GET', `/client/apps/${appId}`)).json(), { projectId });
    t.match((await test.call('GET', `/client/keys/${keyId}`)).json(), { projectId, appId });
    const back = await test.call('PATCH', `/client/keys/${keyId}`, { body: { projectId: test.defaultProjectId } });
    t.equal(back.statusCode, 409, 'still refused after the move');
    const keyOfProject = (await createKey(test, { scopes: ['apps:read'], projectId: test.defaultProjectId })).key;
    t.equal((await test.call('GET', `/client/apps/${appId}`, { token: keyOfProject })).statusCode, 404, 'gone from the old project');
  });

  await t.test('deleting the app revokes its key', async (t) => {
    t.equal((await test.call('DELETE', `/client/apps/${appId}`)).statusCode, 200);
    t.equal(await keyStatus(newKey), 401);
  });
});

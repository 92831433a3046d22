import t from 'tap';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { AppEnv } from '../../../plugins/apps/app-env.ts';
import { MeteringTokens } from '../../../plugins/metering/index.ts';
import type { TestApp } from '../../helpers/app.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';
import { appsServer, call, liveTemplateApp, settledDeployment } from './apps-fixtures.ts';

/**
 * The chat template end to end (plugins/apps/README.md, templates): deployed from the repo, it calls
 * the service's models with its own key (`SVC_API_KEY` at `SVC_BASE_URL`, from inside the sandbox)
 * and saves each conversation as a file in its own storage, which that key may write although it
 * holds no management scope (an operation declared `ownAppKey`); any other app stays out of its reach.
 */
t.setTimeout(300_000);

/** A multipart body as `fetch` would send it, for app.inject. */
async function multipart(fields: Record<string, string | Blob>): Promise<{ payload: Buffer; headers: Record<string, string> }> {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.set(name, value);
  const encoded = new Response(form);
  return { payload: Buffer.from(await encoded.arrayBuffer()), headers: { 'content-type': encoded.headers.get('content-type')! } };
}

/** The app's own key, as its process is given it (`SVC_API_KEY`). */
async function appKeyOf(test: TestApp, serviceId: string): Promise<{ keyId: string; token: string }> {
  const key = await new AppEnv(test.app.svc.container.resolve(Tokens.Secrets)).gatewayKey(serviceId);
  if (!key) throw new Error(`service ${serviceId} has no key`);
  return key;
}

t.test('the chat template', async (t) => {
  const { test } = await appsServer(t, {
    plugins: {
      inference: {
        providers: { mock: { type: 'mock' } },
        models: { 'mock-small': { routes: [{ provider: 'mock', model: 'mock-small' }], prices: TEST_PRICES } },
      },
      metering: { initialCreditUsd: 100 },
      usage: {},
      account: {},
    },
  });
  const { app, service, host, proxyPort } = await liveTemplateApp(t, test, 'chat-ui', 'chat');
  const appKey = await appKeyOf(test, service.id);

  await t.test('it lists the models through the gateway, from inside its sandbox', async (t) => {
    const models = await call(proxyPort(), host, { path: '/api/models' });
    t.equal(models.status, 200, models.body);
    t.ok(
      JSON.parse(models.body).data.some((model: { id: string }) => model.id === 'mock-small'),
      models.body,
    );
  });

  await t.test('a message is answered by a model, billed to the app’s own key, and saved in its storage', async (t) => {
    const sent = await call(proxyPort(), host, {
      path: '/api/chat',
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'mock-small', id: 'first', messages: [{ role: 'user', content: 'Say hello.' }] }),
    });
    t.equal(sent.status, 200, sent.body);
    const answer = JSON.parse(sent.body);
    t.match(answer, { message: { role: 'assistant', content: String }, saved: true, saved_error: null });

    // The request log is written in batches: what is queued is written before it is read.
    await test.app.svc.container.resolve(MeteringTokens.Writer).flush();
    const requests = await test.call('GET', `/client/requests?keyId=${appKey.keyId}`);
    t.equal(requests.statusCode, 200, requests.body);
    t.match(requests.json().data, [{ model: 'mock-small', status: 200 }], 'the call is logged under the app’s key');

    const files = await test.call('GET', `/client/apps/${app.id}/storage`);
    t.same(
      files.json().data.map((file: { name: string }) => file.name),
      ['chats/first.json'],
    );
    const saved = await call(proxyPort(), host, { path: '/api/chats/first' });
    t.equal(saved.status, 200, saved.body);
    t.same(
      JSON.parse(saved.body).messages.map((message: { role: string }) => message.role),
      ['user', 'assistant'],
    );
    const listed = await call(proxyPort(), host, { path: '/api/chats' });
    t.same(
      JSON.parse(listed.body).data.map((chat: { id: string }) => chat.id),
      ['first'],
    );
  });

  await t.test('whoami tells an app’s key which app it is', async (t) => {
    const whoami = await test.call('GET', '/client/whoami', { token: appKey.token });
    t.equal(whoami.statusCode, 200, whoami.body);
    t.match(whoami.json(), { credential: { type: 'api_key', id: appKey.keyId, appId: app.id }, scopes: ['inference'] });
  });

  await t.test('the app’s key writes its own storage but no other app’s, and nothing else of its app', async (t) => {
    const other = await test.call('POST', '/client/apps/templates/workflow-automation', { body: { name: 'other' } });
    t.equal(other.statusCode, 202, other.body);
    const otherApp = other.json().app;
    await settledDeployment(test, otherApp.id);

    const file = { name: 'notes/a.txt', file: new Blob(['hello'], { type: 'text/plain' }) };
    const upload = async (appId: string) => {
      const { payload, headers } = await multipart(file);
      return test.app.inject({
        method: 'POST',
        url: `/client/apps/${appId}/storage`,
        payload,
        headers: { ...headers, authorization: `Bearer ${appKey.token}` },
      });
    };
    const own = await upload(app.id);
    t.equal(own.statusCode, 200, own.body);
    t.match(own.json(), { name: 'notes/a.txt', appId: app.id });

    const foreign = await upload(otherApp.id);
    t.equal(foreign.statusCode, 404, foreign.body);
    t.match(foreign.json(), { error: { code: 'app_not_found', param: 'id' } });
    const listedForeign = await test.call('GET', `/client/apps/${otherApp.id}/storage`);
    t.same(listedForeign.json().data, [], 'nothing was stored in the other app');

    const publish = await test.call('POST', `/client/apps/${otherApp.id}/storage/public`, {
      token: appKey.token,
      body: { name: 'notes/a.txt', public: true },
    });
    t.equal(publish.statusCode, 404, publish.body);

    const envWrite = await test.call('POST', `/client/services/${service.id}/env`, { token: appKey.token, body: { vars: { A: 'b' } } });
    t.equal(envWrite.statusCode, 403, envWrite.body);
    t.match(envWrite.json(), { error: { code: 'missing_scope' } });
    const redeploy = await test.call('POST', `/client/services/${service.id}/redeploy`, { token: appKey.token, body: {} });
    t.equal(redeploy.statusCode, 403, redeploy.body);

    const removed = await test.call('DELETE', `/client/apps/${app.id}/storage?name=notes/a.txt`, { token: appKey.token });
    t.equal(removed.statusCode, 200, removed.body);
    t.match(removed.json(), { name: 'notes/a.txt', deleted: true });
  });
});

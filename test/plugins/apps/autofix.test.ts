import { Readable } from 'node:stream';
import t from 'tap';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { AppsStore } from '../../../plugins/apps/apps-store.ts';
import { fixPrompt } from '../../../plugins/apps/upkeep/autofix-operations.ts';
import { MeteringTokens } from '../../../plugins/metering/index.ts';
import { buildTestApp, createKey } from '../../helpers/app.ts';
import { storedApp } from './apps-fixtures.ts';

/**
 * Fixes proposed by a model (plugins/apps/README.md "Fixes proposed by a model"): one chat
 * completion through the in-process gateway (the offline mock here, which echoes the start of the
 * last user message: providers/mock/README.md), reading the failed deployment; billed as a /v1 call.
 */
t.setTimeout(180_000);
const test = await buildTestApp(t, {
  plugins: {
    keys: {},
    projects: {},
    githost: {},
    apps: { proxy: { port: 0 } },
    inference: {
      providers: { mock: { type: 'mock' } },
      models: { 'mock-small': { routes: [{ provider: 'mock', model: 'mock-small' }], prices: { inputPerMTokUsd: 1, outputPerMTokUsd: 2 } } },
    },
    metering: { initialCreditUsd: 100 },
  },
});
const container = test.app.svc.container;
const db = container.resolve(Tokens.Database);
const store = new AppsStore(db);
const flush = async () => {
  await container.resolve(MeteringTokens.Admission).idle();
  const writer = container.resolve(MeteringTokens.Writer);
  for (let round = 0; round < 50 && writer.snapshot().queued > 0; round += 1) await writer.flush();
};

/** A stored app whose deployment failed with a reason and a build log, as the pipeline leaves one. */
async function failedApp(name: string) {
  const ids = await storedApp(test, name);
  const blob = await container.resolve(Tokens.Blobs).put(Readable.from(['2026-01-01T00:00:00.000Z build $ npm install\n2026-01-01T00:00:01.000Z stderr npm ERR! missing script: start\n']), {
    prefix: 'apps-build-logs/',
  });
  await store.update(ids.deploymentId, { status: 'failed', failureReason: 'health check failed: nothing listening on PORT=20001 after 30s', logBlob: blob.key });
  return ids;
}

t.test('autofix reads the failed deployment and stores the model’s proposal on the service', async (t) => {
  const { serviceId, deploymentId } = await failedApp('fix-me');
  const key = await createKey(test, { scopes: ['apps:deploy', 'inference'] });
  const response = await test.call('POST', `/client/services/${serviceId}/autofix`, { token: key.key, body: {} });
  t.equal(response.statusCode, 200, response.body);
  const fix = response.json();
  t.match(fix, { object: 'ai_fix', serviceId, deploymentId, model: 'mock-small', requestId: /./ });
  t.match(fix.proposal, /App: fix-me Commit:/, 'the model read what the service sent it (the mock echoes its start)');
  const listed = (await test.call('GET', `/client/services/${serviceId}/ai-fixes`)).json();
  t.same(
    listed.data.map((entry: { id: string }) => entry.id),
    [fix.id],
  );
});

t.test('the model call is billed to the calling key in the request log', async (t) => {
  const { serviceId } = await failedApp('fix-billed');
  const key = await createKey(test, { scopes: ['apps:deploy', 'inference'] });
  const fix = (await test.call('POST', `/client/services/${serviceId}/autofix`, { token: key.key })).json();
  await flush();
  const { rows } = await db.query<{ key_id: string; endpoint: string; cost_micros: string }>('SELECT key_id, endpoint, cost_micros::text FROM request_logs WHERE id = $1', [fix.requestId]);
  t.equal(rows.length, 1);
  t.equal(rows[0]!.key_id, key.id);
  t.equal(rows[0]!.endpoint, '/v1/chat/completions');
  t.ok(BigInt(rows[0]!.cost_micros) > 0n, 'it cost something');
});

t.test('a service without a failed deployment is 409 nothing_to_fix, and nothing is called or stored', async (t) => {
  const { serviceId, deploymentId } = await storedApp(test, 'fix-nothing');
  const response = await test.call('POST', `/client/services/${serviceId}/autofix`, { body: {} });
  t.equal(response.statusCode, 409);
  t.equal(response.json().error.code, 'nothing_to_fix');
  const named = await test.call('POST', `/client/services/${serviceId}/autofix`, { body: { deploymentId } });
  t.match(named.json(), { error: { code: 'nothing_to_fix', param: 'deploymentId' } });
  t.same((await test.call('GET', `/client/services/${serviceId}/ai-fixes`)).json().data, []);
});

t.test('apps:deploy alone may ask for a fix (the prompt is the service’s own); the call is billed to that key', async (t) => {
  const { serviceId } = await failedApp('fix-no-inference');
  const key = await createKey(test, { scopes: ['apps:deploy'] });
  const direct = await test.call('POST', '/v1/chat/completions', { token: key.key, body: { model: 'mock-small', messages: [{ role: 'user', content: 'hi' }] } });
  t.equal(direct.statusCode, 403, 'the key cannot call /v1 itself');
  const response = await test.call('POST', `/client/services/${serviceId}/autofix`, { token: key.key });
  t.equal(response.statusCode, 200, response.body);
  await flush();
  const { rows } = await db.query<{ key_id: string }>('SELECT key_id FROM request_logs WHERE id = $1', [response.json().requestId]);
  t.same(rows, [{ key_id: key.id }]);
});

t.test('a key that may not use the model is refused by the gateway, and nothing is stored', async (t) => {
  const { serviceId } = await failedApp('fix-model-refused');
  const key = await createKey(test, { scopes: ['apps:deploy'], models: ['some-other-model'] });
  const response = await test.call('POST', `/client/services/${serviceId}/autofix`, { token: key.key });
  t.equal(response.statusCode, 404, response.body);
  t.equal(response.json().error.code, 'model_not_found');
  t.same((await test.call('GET', `/client/services/${serviceId}/ai-fixes`)).json().data, []);
});

t.test('a model the caller cannot use is the gateway’s own refusal, naming the field', async (t) => {
  const { serviceId } = await failedApp('fix-unknown-model');
  const response = await test.call('POST', `/client/services/${serviceId}/autofix`, { body: { model: 'no-such-model' } });
  t.equal(response.statusCode, 404, response.body);
  t.match(response.json(), { error: { code: 'model_not_found', param: 'model' } });
});

t.test('DELETE /services/{id}/ai-fixes forgets the service’s fixes', async (t) => {
  const { serviceId } = await failedApp('fix-forget');
  await test.call('POST', `/client/services/${serviceId}/autofix`);
  await test.call('POST', `/client/services/${serviceId}/autofix`);
  const deleted = await test.call('DELETE', `/client/services/${serviceId}/ai-fixes`);
  t.same(deleted.json(), { object: 'ai_fixes_deleted', serviceId, deleted: 2 });
  t.same((await test.call('GET', `/client/services/${serviceId}/ai-fixes`)).json().data, []);
});

t.test('what the model reads: the build decision with its rules, the failure reason and the log’s last lines', async (t) => {
  const { deploymentId } = await failedApp('fix-prompt');
  await store.update(deploymentId, {
    decision: { provider: 'node', rootDir: { value: '.', rule: 'top' }, install: { value: 'npm install', rule: 'package.json' }, start: { value: null, rule: 'none' } },
  });
  const deployment = (await store.deploymentById(deploymentId))!;
  const prompt = fixPrompt({ name: 'fix-prompt' }, deployment, ['line one', 'line two']);
  t.match(prompt, /provider node; root dir "\." \(top\); install "npm install" \(package\.json\); build unknown; start null \(none\)/);
  t.match(prompt, /Failure: health check failed: nothing listening on PORT=20001 after 30s/);
  t.match(prompt, /line one\nline two$/);
});

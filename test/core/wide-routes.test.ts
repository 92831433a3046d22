import t from 'tap';
import { z } from 'zod';
import { defineOperation } from '../../core/operations/operations.ts';
import { definePlugin } from '../../core/kernel/plugin.ts';
import { manifest as defaultManifest } from '../../plugins/index.ts';
import { allPlugins, buildTestApp, createKey, type TestApp } from '../helpers/app.ts';
import { TEST_PRICES } from '../helpers/gateway.ts';
import { listeningBase, mcpClient } from '../helpers/mcp-client.ts';

t.setTimeout(120_000);

/** One operation every host serves and one only the host with the wider route set serves. */
const regionalPlugin = definePlugin({
  name: 'regional-test',
  description: 'Test plugin: a wide and a narrow operation',
  operations: () => [
    defineOperation({
      name: 'regional.everywhere',
      method: 'GET',
      path: '/regional/everywhere',
      summary: 'Served on every host',
      scope: null,
      readOnly: true,
      output: z.object({ ok: z.literal(true) }).meta({ id: 'RegionalEverywhere' }),
      handler: async () => ({ ok: true as const }),
    }),
    defineOperation({
      name: 'regional.wideOnly',
      method: 'GET',
      path: '/regional/wide-only',
      summary: 'Served only on the wider host',
      scope: null,
      readOnly: true,
      wide: true,
      output: z.object({ ok: z.literal(true) }).meta({ id: 'RegionalWideOnly' }),
      handler: async () => ({ ok: true as const }),
    }),
  ],
});

const manifest = [...defaultManifest, regionalPlugin];
const plugins = {
  ...allPlugins(manifest),
  inference: { providers: { mock: { type: 'mock' } }, models: { 'mock-small': { routes: [{ provider: 'mock', model: 'mock-small' }], prices: TEST_PRICES } } },
};

function hostWith(routeSet: 'wide' | 'narrow'): Promise<TestApp> {
  return buildTestApp(t, { manifest, plugins, config: { server: { routeSet } } });
}

async function openApiPaths(test: TestApp): Promise<Record<string, Record<string, { 'x-svc-wide'?: boolean }>>> {
  const response = await test.call('GET', '/client/openapi.json', { token: null });
  if (response.statusCode !== 200) throw new Error(`openapi.json answered ${response.statusCode}: ${response.body}`);
  return response.json().paths;
}

t.test('the wider host (the default) serves a wide operation and marks it in the OpenAPI document', async (t) => {
  const test = await buildTestApp(t, { manifest, plugins });
  t.equal(test.config.server.routeSet, 'wide');
  t.equal((await test.call('GET', '/client/regional/wide-only')).statusCode, 200);
  t.equal((await test.call('GET', '/platform/v1/regional/wide-only')).statusCode, 200);
  const paths = await openApiPaths(test);
  t.equal(paths['/regional/wide-only']?.get?.['x-svc-wide'], true);
  t.equal(paths['/regional/everywhere']?.get?.['x-svc-wide'], undefined);
});

t.test('the narrower host answers 404 for a wide operation and still serves the others', async (t) => {
  const test = await hostWith('narrow');
  const refused = await test.call('GET', '/client/regional/wide-only');
  t.equal(refused.statusCode, 404);
  t.equal(refused.json().error.code, 'route_not_found');
  t.equal((await test.call('GET', '/client/regional/everywhere')).statusCode, 200);
});

t.test('the narrower host leaves wide operations out of the OpenAPI document and the MCP tools', async (t) => {
  const test = await hostWith('narrow');
  const paths = await openApiPaths(test);
  t.notOk(paths['/regional/wide-only'], 'not documented');
  t.ok(paths['/regional/everywhere'], 'the rest is documented');
  const client = await mcpClient(t, await listeningBase(test), test.ownerToken);
  const names = (await client.listTools()).tools.map((tool) => tool.name);
  t.notOk(names.includes('regional_wideOnly'));
  t.ok(names.includes('regional_everywhere'));
});

t.test('the narrower host lacks GET /v1/models/{model} and keeps the model list', async (t) => {
  const narrow = await hostWith('narrow');
  const narrowKey = (await createKey(narrow)).key;
  const models = await narrow.call('GET', '/v1/models', { token: narrowKey });
  t.equal(models.statusCode, 200);
  t.same(
    models.json().data.map((model: { id: string }) => model.id),
    ['mock-small'],
  );
  const model = 'mock-small';
  const refused = await narrow.call('GET', `/v1/models/${model}`, { token: narrowKey });
  t.equal(refused.statusCode, 404);
  t.equal(refused.json().error.code, 'route_not_found');
  const wide = await hostWith('wide');
  t.equal((await wide.call('GET', `/v1/models/${model}`, { token: (await createKey(wide)).key })).statusCode, 200);
});

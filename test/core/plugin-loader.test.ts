import t from 'tap';
import { assertConfigError } from '../helpers/config-errors.ts';
import { z } from 'zod';
import { definePlugin, type AnyPlugin } from '../../core/kernel/plugin.ts';
import { resolvePlugins } from '../../core/kernel/plugin-loader.ts';
import { buildTestApp } from '../helpers/app.ts';

const plain = (name: string, dependsOn: string[] = []): AnyPlugin => definePlugin({ name, description: `fixture ${name}`, dependsOn });

const withSettings = definePlugin({
  name: 'limits',
  description: 'fixture with settings',
  configSchema: z.strictObject({
    maxItems: z.number().int().min(1).default(10),
    mode: z.enum(['fast', 'safe']).default('safe'),
    upstream: z.strictObject({ url: z.string().url() }).optional(),
  }),
});

const names = (resolved: ReturnType<typeof resolvePlugins>) => resolved.map((r) => r.plugin.name);

t.test('plugins are ordered after their dependencies regardless of manifest order', async (t) => {
  const manifest = [plain('gateway', ['keys', 'usage']), plain('usage', ['keys']), plain('keys', ['account']), plain('account')];
  const resolved = resolvePlugins(manifest, { gateway: {}, usage: {}, keys: {}, account: {} });
  t.same(names(resolved), ['account', 'keys', 'usage', 'gateway']);
});

t.test('the order of the config section does not change the dependency order', async (t) => {
  const manifest = [plain('c', ['b']), plain('b', ['a']), plain('a')];
  t.same(names(resolvePlugins(manifest, { a: {}, b: {}, c: {} })), ['a', 'b', 'c']);
  t.same(names(resolvePlugins(manifest, { c: {}, a: {}, b: {} })), ['a', 'b', 'c']);
});

t.test('plugins without dependencies between them keep manifest order', async (t) => {
  const manifest = [plain('zeta'), plain('alpha'), plain('mid')];
  t.same(names(resolvePlugins(manifest, { alpha: {}, mid: {}, zeta: {} })), ['zeta', 'alpha', 'mid']);
});

t.test('only enabled plugins are resolved', async (t) => {
  const manifest = [plain('a'), plain('b'), plain('c')];
  t.same(names(resolvePlugins(manifest, { b: {} })), ['b']);
});

t.test('a dependency cycle is reported naming the plugins in it', async (t) => {
  const manifest = [plain('a', ['b']), plain('b', ['c']), plain('c', ['a'])];
  assertConfigError(t, () => resolvePlugins(manifest, { a: {}, b: {}, c: {} }), 'plugins.', /cycle/);
  try {
    resolvePlugins(manifest, { a: {}, b: {}, c: {} });
  } catch (error) {
    const message = (error as Error).message;
    for (const name of ['a', 'b', 'c']) t.match(message, new RegExp(`\\b${name}\\b`), `the cycle names ${name}`);
  }
});

t.test('a plugin that depends on itself is reported as a cycle', async (t) => {
  assertConfigError(t, () => resolvePlugins([plain('loop', ['loop'])], { loop: {} }), 'plugins.loop', /cycle/);
});

t.test('a plugin whose dependency is not enabled fails naming plugins.<name> and the dependency', async (t) => {
  const manifest = [plain('base'), plain('child', ['base'])];
  assertConfigError(t, () => resolvePlugins(manifest, { child: {} }), 'plugins.child', /base/);
});

t.test('a plugin whose dependency is not in the manifest fails naming it', async (t) => {
  assertConfigError(t, () => resolvePlugins([plain('child', ['ghost'])], { child: {} }), 'plugins.child', /ghost/);
});

t.test('an unknown plugin fails naming plugins.<name>', async (t) => {
  assertConfigError(t, () => resolvePlugins([plain('a')], { a: {}, nope: {} }), 'plugins.nope');
});

t.test('plugin config is validated with its schema and defaults are applied', async (t) => {
  const [resolved] = resolvePlugins([withSettings], { limits: { maxItems: 3 } });
  t.same(resolved?.config, { maxItems: 3, mode: 'safe' });
});

t.test('an empty, true or null plugin section means the plugin defaults', async (t) => {
  for (const section of [{}, true, null]) {
    const [resolved] = resolvePlugins([withSettings], { limits: section });
    t.same(resolved?.config, { maxItems: 10, mode: 'safe' }, `section ${JSON.stringify(section)}`);
  }
});

t.test('a plugin setting of the wrong type fails naming plugins.<name>.<field>', async (t) => {
  assertConfigError(t, () => resolvePlugins([withSettings], { limits: { maxItems: 'lots' } }), 'plugins.limits.maxItems');
});

t.test('a plugin setting out of range fails naming plugins.<name>.<field>', async (t) => {
  assertConfigError(t, () => resolvePlugins([withSettings], { limits: { maxItems: 0 } }), 'plugins.limits.maxItems');
});

t.test('a nested plugin setting fails naming its full path', async (t) => {
  assertConfigError(t, () => resolvePlugins([withSettings], { limits: { upstream: { url: 'not a url' } } }), 'plugins.limits.upstream.url');
});

t.test('an unknown plugin setting fails naming plugins.<name>.<field>', async (t) => {
  assertConfigError(t, () => resolvePlugins([withSettings], { limits: { maxItem: 3 } }), 'plugins.limits.maxItem');
});

t.test('a plugin section that is not a mapping fails naming plugins.<name>', async (t) => {
  assertConfigError(t, () => resolvePlugins([withSettings], { limits: 5 }), 'plugins.limits');
});

t.test('a plugin without settings refuses settings', async (t) => {
  assertConfigError(t, () => resolvePlugins([plain('bare')], { bare: { anything: 1 } }), 'plugins.bare');
});

t.test('a plugin without settings refuses a scalar or list section', async (t) => {
  for (const section of [5, 'on', ['x']]) {
    assertConfigError(t, () => resolvePlugins([plain('bare')], { bare: section }), 'plugins.bare');
  }
});

t.test('a plugin without settings accepts an empty, true or null section', async (t) => {
  for (const section of [{}, true, null]) {
    t.same(names(resolvePlugins([plain('bare')], { bare: section })), ['bare'], `section ${JSON.stringify(section)}`);
  }
});

t.test('false disables a plugin', async (t) => {
  t.same(names(resolvePlugins([plain('a'), plain('b')], { a: {}, b: false })), ['a']);
});

t.test('a plugin depending on a plugin disabled with false fails naming both', async (t) => {
  assertConfigError(t, () => resolvePlugins([plain('base'), plain('child', ['base'])], { base: false, child: {} }), 'plugins.child', /base/);
});

t.test('a disabled plugin is not validated', async (t) => {
  t.same(names(resolvePlugins([withSettings, plain('a')], { limits: false, a: {} })), ['a']);
});

t.test('plugins register and start in dependency order and stop in reverse', async (t) => {
  const events: string[] = [];
  const tracing = (name: string, dependsOn: string[] = []): AnyPlugin =>
    definePlugin({
      name,
      description: `tracing fixture ${name}`,
      dependsOn,
      register: () => void events.push(`register ${name}`),
      start: async () => void events.push(`start ${name}`),
      stop: async () => void events.push(`stop ${name}`),
    });
  const manifest = [tracing('third', ['second']), tracing('second', ['first']), tracing('first')];
  // Closed here rather than at teardown: stopping is part of what is asserted.
  const test = await buildTestApp({ teardown: () => undefined }, { manifest, plugins: { third: {}, second: {}, first: {} } });
  try {
    t.same(events.slice(0, 6), ['register first', 'register second', 'register third', 'start first', 'start second', 'start third']);
  } finally {
    await test.app.close();
  }
  t.same(events, ['register first', 'register second', 'register third', 'start first', 'start second', 'start third', 'stop third', 'stop second', 'stop first']);
});

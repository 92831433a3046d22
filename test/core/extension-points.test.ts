import t from 'tap';
import { ConfigError } from '../../config/load.ts';
import { defineExtensionPoint } from '../../core/kernel/extension-points.ts';
import { definePlugin, type AnyPlugin } from '../../core/kernel/plugin.ts';
import { buildTestApp } from '../helpers/app.ts';

/** Extension points through a real build: a provider and a consumer plugin, as an operator enables them. */
interface Greeter {
  greet(name: string): string;
}

const GreeterPoint = defineExtensionPoint<Greeter>('Greeter', { default: { greet: (name) => `hello ${name}` } });
const OptionalPoint = defineExtensionPoint<Greeter>('OptionalGreeter');

const provider = (name: string, word: string): AnyPlugin =>
  definePlugin({
    name,
    description: `provides Greeter with ${word}`,
    register: ({ extensions }) => extensions.provide(GreeterPoint, { greet: (who) => `${word} ${who}` }),
  });

/** Reads both points once, at start, the way a consumer should. */
function consumer(seen: { greeting?: string; optional?: Greeter | undefined }): AnyPlugin {
  return definePlugin({
    name: 'consumer',
    description: 'reads Greeter at start',
    async start({ extensions }) {
      seen.greeting = extensions.get(GreeterPoint).greet('ada');
      seen.optional = extensions.get(OptionalPoint);
    },
  });
}

t.test('a plugin providing a point is what its consumer reads', async (t) => {
  const seen: { greeting?: string } = {};
  await buildTestApp(t, { manifest: [consumer(seen), provider('welcome', 'welcome')], plugins: { consumer: {}, welcome: {} } });
  t.equal(seen.greeting, 'welcome ada', 'whatever the order plugins register in, every one has before any reads');
});

t.test('with no plugin providing it, a point reads as its default, or undefined without one', async (t) => {
  const seen: { greeting?: string; optional?: Greeter | undefined } = { optional: { greet: () => 'not read' } };
  await buildTestApp(t, { manifest: [consumer(seen)], plugins: { consumer: {} } });
  t.equal(seen.greeting, 'hello ada');
  t.equal(seen.optional, undefined);
});

t.test('two plugins providing one point stop the start, naming both', async (t) => {
  const seen = {};
  const manifest = [provider('welcome', 'welcome'), provider('howdy', 'howdy'), consumer(seen)];
  const error = await buildTestApp(t, { manifest, plugins: { welcome: {}, howdy: {}, consumer: {} } }).then(
    () => null,
    (caught: unknown) => caught,
  );
  t.ok(error instanceof ConfigError, 'an operator error: the config enables both');
  t.match(String((error as Error | null)?.message), /^config: plugins\.howdy: provides extension point Greeter, which plugin welcome provides already/);
});

t.test('a point is provided in register() and read after it, never the other way round', async (t) => {
  const early = definePlugin({
    name: 'early',
    description: 'reads a point while plugins are still registering',
    register: ({ extensions }) => void extensions.get(GreeterPoint),
  });
  await t.rejects(buildTestApp(t, { manifest: [early], plugins: { early: {} } }), /plugin early reads extension point Greeter in register\(\)/);

  const late = definePlugin({
    name: 'late',
    description: 'provides a point once reading has begun',
    async start({ extensions }) {
      extensions.provide(GreeterPoint, { greet: () => 'too late' });
    },
  });
  await t.rejects(buildTestApp(t, { manifest: [late], plugins: { late: {} } }), /plugin late provides extension point Greeter after register\(\)/);
});

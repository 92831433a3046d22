import t from 'tap';
import { ConfigError } from '../../config/load.ts';
import { defineContributionPoint, defineExtensionPoint } from '../../core/kernel/extension-points.ts';
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

const GreetingsPoint = defineContributionPoint<string>('Greetings');

t.test('a contribution point gives its consumer every item contributed, in plugin order', async (t) => {
  const contributor = (name: string, words: string[]) =>
    definePlugin({
      name,
      description: `contributes ${words.join(', ')}`,
      register: ({ extensions }) => {
        for (const word of words) extensions.contribute(GreetingsPoint, word);
      },
    });
  const seen: { all?: readonly string[]; none?: readonly string[] } = {};
  const reader = definePlugin({
    name: 'reader',
    description: 'reads every greeting at start',
    async start({ extensions }) {
      seen.all = extensions.all(GreetingsPoint);
      seen.none = extensions.all(defineContributionPoint<string>('Nobody'));
    },
  });
  await buildTestApp(t, { manifest: [contributor('first', ['hi', 'hey']), reader, contributor('second', ['yo'])], plugins: { first: {}, reader: {}, second: {} } });
  t.same(seen.all, ['hi', 'hey', 'yo']);
  t.ok(Object.isFrozen(seen.all), 'a consumer cannot add to what others read');
  t.same(seen.none, [], 'a point nobody contributed to reads as empty');
});

t.test('items are contributed in register() and read after it', async (t) => {
  const early = definePlugin({ name: 'early', description: 'reads while registering', register: ({ extensions }) => void extensions.all(GreetingsPoint) });
  await t.rejects(buildTestApp(t, { manifest: [early], plugins: { early: {} } }), /plugin early reads contribution point Greetings in register\(\)/);
  const late = definePlugin({
    name: 'late',
    description: 'contributes at start',
    async start({ extensions }) {
      extensions.contribute(GreetingsPoint, 'too late');
    },
  });
  await t.rejects(buildTestApp(t, { manifest: [late], plugins: { late: {} } }), /plugin late contributes to Greetings after register\(\)/);
});

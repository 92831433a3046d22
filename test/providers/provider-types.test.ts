import t from 'tap';
import { builtInProviderTypes, createProviderContext, developmentProviderTypes, resolveProviderType } from '../../providers/index.ts';

t.test('the built-in types are openai, anthropic and mock', async (t) => {
  t.same([...builtInProviderTypes.keys()].sort(), ['anthropic', 'mock', 'openai']);
  t.ok(developmentProviderTypes.has('mock'));
  t.notOk(developmentProviderTypes.has('openai'));
});

t.test('resolves a built-in type by name', async (t) => {
  const type = await resolveProviderType({ type: 'anthropic' });
  t.equal(type.type, 'anthropic');
});

t.test('an unknown type names the built-in ones', async (t) => {
  await t.rejects(resolveProviderType({ type: 'bedrock' }), { message: /Unknown provider type "bedrock".*openai, anthropic, mock/ });
});

t.test('neither type nor package is an error', async (t) => {
  await t.rejects(resolveProviderType({}), { message: /needs a `type` or a `package`/ });
});

t.test('a provider package is loaded by its npm name and works', async (t) => {
  const type = await resolveProviderType({ package: 'svc-provider-echo' });
  t.equal(type.type, 'echo');
  const provider = type.create('echo-1', type.configSchema.parse({ prefix: '> ' }), createProviderContext());
  t.equal(provider.name, 'echo-1');
  const result = await provider.language!.chat({ model: 'echo', messages: [{ role: 'user', content: 'ping' }] }, { signal: new AbortController().signal, requestId: 'r' });
  t.equal(result.completion.choices[0]?.message.content, '> ping');
  t.equal(result.usage.estimated, false);
});

t.test('a package whose type disagrees with the config is refused', async (t) => {
  await t.rejects(resolveProviderType({ package: 'svc-provider-echo', type: 'openai' }), { message: /provides type "echo", but the config says type "openai"/ });
});

t.test('a package that is not installed names the package', async (t) => {
  await t.rejects(resolveProviderType({ package: 'svc-provider-not-installed' }), { message: /Provider package "svc-provider-not-installed" could not be loaded/ });
});

t.test('a module whose default export is not a provider type names what is missing', async (t) => {
  const module = `data:text/javascript,${encodeURIComponent('export default { type: "half", create() {} };')}`;
  await t.rejects(resolveProviderType({ package: module }), { message: /is not a provider: its default export lacks `configSchema`/ });
  const noDefault = `data:text/javascript,${encodeURIComponent('export const x = 1;')}`;
  await t.rejects(resolveProviderType({ package: noDefault }), { message: /has no default export/ });
});

import t from 'tap';
import * as encodingsOfModels from 'gpt-tokenizer/modelsMap';
import { resolvePlugins } from '../../../core/kernel/plugin-loader.ts';
import { manifest } from '../../../plugins/index.ts';
import { UNKNOWN_MODEL_IMAGE_TOKENS } from '../../../providers/input-token-bound.ts';
import { OPENAI_MAX_IMAGE_TOKENS, openAIInputFacts } from '../../../providers/openai/openai-model-names.ts';
import { inferenceConfigSchema } from '../../../plugins/inference/inference-config.ts';
import { modelInputProfile } from '../../../plugins/inference/input-token-profile.ts';
import { assertConfigError } from '../../helpers/config-errors.ts';

const PROVIDERS = {
  openai: { type: 'openai', baseUrl: 'https://api.openai.com/v1', apiKey: 'sk-x' },
  azure: { type: 'openai', baseUrl: 'https://acme.openai.azure.com', apiKey: 'x', azure: { apiVersion: '2024-10-21' } },
  groq: { type: 'openai', baseUrl: 'https://api.groq.com/openai/v1', apiKey: 'x' },
  anthropic: { type: 'anthropic', apiKey: 'x' },
  mine: { package: 'svc-provider-echo' },
  mock: { type: 'mock' },
};

function profileOf(model: Record<string, unknown>) {
  const config = inferenceConfigSchema.parse({ providers: PROVIDERS, models: { m: model } });
  return modelInputProfile(config.models['m']!, config.providers);
}

const modelsOfEncoding = { ...encodingsOfModels };

t.test('OpenAI model names map to the encoding gpt-tokenizer gives them, or to none', async (t) => {
  for (const encoding of ['o200k_base', 'cl100k_base', 'p50k_base', 'r50k_base', 'o200k_harmony', 'gpt2'] as const) {
    for (const name of modelsOfEncoding[encoding]) {
      const facts = openAIInputFacts(name);
      if (facts) t.equal(facts.tokenizer, encoding, name);
    }
  }
});

t.test('the chat models in use are recognised, with their snapshots and fine-tunes', async (t) => {
  const expected: Record<string, string> = {
    'gpt-4o': 'o200k_base',
    'gpt-4o-2024-08-06': 'o200k_base',
    'chatgpt-4o-latest': 'o200k_base',
    'gpt-4.1-nano': 'o200k_base',
    'gpt-4.5-preview': 'o200k_base',
    'gpt-5': 'o200k_base',
    'gpt-5.1': 'o200k_base',
    'gpt-5-mini-2025-08-07': 'o200k_base',
    o1: 'o200k_base',
    'o3-mini': 'o200k_base',
    'o4-mini': 'o200k_base',
    'ft:gpt-4o-mini-2024-07-18:acme::abc123': 'o200k_base',
    'gpt-4': 'cl100k_base',
    'gpt-4-turbo': 'cl100k_base',
    'gpt-4-0613': 'cl100k_base',
    'gpt-3.5-turbo': 'cl100k_base',
    'ft:gpt-3.5-turbo-0125:acme::xyz': 'cl100k_base',
  };
  for (const [name, tokenizer] of Object.entries(expected)) t.equal(openAIInputFacts(name)?.tokenizer, tokenizer, name);
});

t.test('other names say nothing', async (t) => {
  for (const name of ['llama-3.1-8b-instant', 'claude-sonnet-4-5', 'gpt-oss-120b', 'openai/gpt-4o', 'my-gpt-4o-deployment', 'gpt-4omni', 'o1x', 'mock-small']) {
    t.equal(openAIInputFacts(name), undefined, name);
  }
});

t.test('gpt-4o-mini counts its images in tokens 33 times smaller, so its image maximum is the largest', async (t) => {
  t.equal(openAIInputFacts('gpt-4o-mini')?.maxImageTokens, 48_169);
  t.equal(openAIInputFacts('gpt-4o')?.maxImageTokens, 3_779);
  t.equal(OPENAI_MAX_IMAGE_TOKENS, 48_169);
});

t.test('on OpenAI’s own API a route’s tokenizer comes from its model name', async (t) => {
  t.same(profileOf({ routes: [{ provider: 'openai', model: 'gpt-4o-mini' }] }).tokenizers, ['o200k_base']);
  t.same(profileOf({ routes: [{ provider: 'openai', model: 'gpt-4' }] }).tokenizers, ['cl100k_base']);
  t.same(
    profileOf({
      routes: [
        { provider: 'openai', model: 'gpt-4o' },
        { provider: 'openai', model: 'gpt-4' },
      ],
    }).tokenizers,
    ['o200k_base', 'cl100k_base'],
  );
});

t.test('elsewhere, or for an unknown name, the tokenizer is unknown and the bound is by bytes', async (t) => {
  for (const route of [
    { provider: 'azure', model: 'gpt-4o' },
    { provider: 'groq', model: 'gpt-4o' },
    { provider: 'anthropic', model: 'claude-sonnet-4-5' },
    { provider: 'mine', model: 'gpt-4o' },
    { provider: 'openai', model: 'some-new-model' },
  ]) {
    const profile = profileOf({ routes: [route] });
    t.same(profile.tokenizers, ['bytes'], `${route.provider}/${route.model}`);
    t.equal(profile.imageTokens, UNKNOWN_MODEL_IMAGE_TOKENS, 'images: the unknown-model maximum');
  }
});

t.test('a route with an unknown tokenizer makes the model’s bound the byte bound, failover may land there', async (t) => {
  const profile = profileOf({
    routes: [
      { provider: 'openai', model: 'gpt-4o' },
      { provider: 'groq', model: 'llama-3.3-70b' },
    ],
  });
  t.same(profile.tokenizers, ['bytes']);
});

t.test('the mock provider type declares its own count, which a route to an unknown upstream outweighs', async (t) => {
  t.same(profileOf({ routes: [{ provider: 'mock', model: 'mock-small' }] }).tokenizers, ['mock']);
  t.same(
    profileOf({
      routes: [
        { provider: 'mock', model: 'mock-small' },
        { provider: 'openai', model: 'gpt-4o' },
      ],
    }).tokenizers,
    ['mock', 'o200k_base'],
    'with an OpenAI route: both counted, the larger reserved',
  );
  t.same(
    profileOf({
      routes: [
        { provider: 'mock', model: 'mock-small' },
        { provider: 'groq', model: 'llama-3.3-70b' },
      ],
    }).tokenizers,
    ['bytes'],
  );
});

t.test('a declared tokenizer overrides the inference, on every route', async (t) => {
  const azure = profileOf({ tokenizer: 'o200k_base', routes: [{ provider: 'azure', model: 'prod-deployment' }] });
  t.same(azure.tokenizers, ['o200k_base']);
  t.equal(azure.imageTokens, OPENAI_MAX_IMAGE_TOKENS, 'any OpenAI model may be behind a deployment name: the largest image maximum');
  t.same(profileOf({ tokenizer: 'bytes', routes: [{ provider: 'openai', model: 'gpt-4o' }] }).tokenizers, ['bytes']);
});

t.test('an unknown tokenizer in config stops the boot naming the field', async (t) => {
  const inference = { providers: { mock: { type: 'mock' } }, models: { fast: { routes: [{ provider: 'mock', model: 'mock-small' }], tokenizer: 'o200k' } } };
  assertConfigError(t, () => resolvePlugins(manifest, { inference }), 'plugins.inference.models.fast.tokenizer', /o200k_base, cl100k_base, bytes/);
});

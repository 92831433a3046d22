import t from 'tap';
import { DEFAULT_CONFIG_PATH, loadConfig } from '../../config/load.ts';
import { offers, type Modality } from '../../core/gateway/provider.ts';
import { inferenceConfigSchema, type ModelConfig } from '../../plugins/inference/inference-config.ts';
import { mockProviderType } from '../../providers/mock/index.ts';
import { createProviderContext } from '../../providers/provider-context.ts';

/** What `npm start` serves: config/default.yaml offers one mock model per capability, each priced. */

const inference = inferenceConfigSchema.parse(loadConfig({ path: DEFAULT_CONFIG_PATH, env: {} }).plugins['inference']);
const models = inference.models;

/** The modality a model is for, read from its config as the routes read it. */
function modalityOf(model: ModelConfig): Modality {
  if (model.evaluation) return 'evaluation';
  if (model.images) return 'images';
  if (model.speech) return 'speech';
  if (model.transcription) return 'transcription';
  if (model.modalities.output.includes('embedding')) return 'embeddings';
  return 'language';
}

t.test('every capability has a mock model, served by a provider offering it', async (t) => {
  const served = new Set<Modality>();
  for (const [id, model] of Object.entries(models)) {
    const modality = modalityOf(model);
    served.add(modality);
    for (const route of model.routes) {
      const entry = inference.providers[route.provider]!;
      t.equal(entry.type, 'mock', `${id} runs offline`);
      const provider = mockProviderType.create(route.provider, mockProviderType.configSchema.parse(entry), createProviderContext());
      t.ok(offers(provider, modality), `${id} is served for ${modality}`);
    }
  }
  t.same([...served].sort(), ['embeddings', 'evaluation', 'images', 'language', 'speech', 'transcription']);
});

t.test('the chat models serve responses with web search priced per search', async (t) => {
  for (const id of ['mock-small', 'mock-large']) {
    t.ok(models[id]?.builtinTools.webSearch, `${id} offers web search`);
    t.ok((models[id]?.prices?.perWebSearchUsd ?? 0) > 0, `${id} prices it`);
  }
});

t.test('each capability is priced in its own unit', async (t) => {
  t.ok(models['mock-embed']!.prices!.inputPerMTokUsd > 0);
  t.same(models['mock-embed']!.modalities, { input: ['text'], output: ['embedding'] });
  const image = models['mock-image']!;
  t.same(image.modalities.output, ['image']);
  for (const size of image.images!.sizes) {
    for (const quality of image.images!.qualities) {
      t.ok((image.prices!.images?.[size]?.[quality] ?? image.prices!.perImageUsd ?? 0) > 0, `${size} ${quality} has a price`);
    }
  }
  t.ok(models['mock-tts']!.prices!.perCharacterUsd! > 0);
  t.same(models['mock-tts']!.speech!.formats, ['wav', 'pcm'], 'only what the mock speaks, wav the default');
  t.ok(models['mock-transcribe']!.prices!.perAudioSecondUsd! > 0);
  t.same(models['mock-transcribe']!.modalities, { input: ['audio'], output: ['text'] });
});

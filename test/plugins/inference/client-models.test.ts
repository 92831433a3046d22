import t from 'tap';
import { allPlugins, buildTestApp, createKey } from '../../helpers/app.ts';

const tokenPrices = { inputPerMTokUsd: 2.5, cachedInputPerMTokUsd: 1.25, outputPerMTokUsd: 10 };

const test = await buildTestApp(t, {
  plugins: {
    ...allPlugins(),
    inference: {
      providers: { mock: { type: 'mock' } },
      models: {
        'chat-searching': {
          routes: [{ provider: 'mock', model: 'mock-small' }],
          builtinTools: { webSearch: {} },
          batch: true,
          prices: { ...tokenPrices, perWebSearchUsd: 0.01 },
        },
        'chat-plain': { routes: [{ provider: 'mock', model: 'mock-small' }], prices: { ...tokenPrices, perWebSearchUsd: 0.01 } },
        painter: {
          routes: [{ provider: 'mock', model: 'mock-image' }],
          modalities: { input: ['text'], output: ['image'] },
          images: { sizes: ['1024x1024', '512x512'], qualities: ['standard', 'hd'], maxImages: 4 },
          prices: { inputPerMTokUsd: 0, outputPerMTokUsd: 0, perImageUsd: 0.02, images: { '1024x1024': { standard: 0.04, hd: 0.08 } } },
        },
        speaker: {
          routes: [{ provider: 'mock', model: 'mock-tts' }],
          modalities: { input: ['text'], output: ['audio'] },
          speech: { voices: ['alloy', 'verse'], formats: ['wav', 'mp3'] },
          prices: { inputPerMTokUsd: 0, outputPerMTokUsd: 0, perCharacterUsd: 0.000015 },
        },
        listener: {
          routes: [{ provider: 'mock', model: 'mock-stt' }],
          modalities: { input: ['audio'], output: ['text'] },
          transcription: { formats: ['json', 'text'] },
          prices: { inputPerMTokUsd: 0, outputPerMTokUsd: 0, perAudioSecondUsd: 0.0001 },
        },
      },
    },
  },
});

interface ModelView {
  id: string;
  prices: Record<string, unknown> | null;
  builtinTools: Record<string, unknown>;
  capabilities: Record<string, unknown>;
  [field: string]: unknown;
}
const models = async (path: string, token?: string) => {
  const response = await test.call('GET', path, token === undefined ? {} : { token });
  t.equal(response.statusCode, 200, response.body);
  const body = response.json() as { object: string; data: ModelView[] };
  return new Map(body.data.map((model) => [model.id, model]));
};

t.test('GET /client/models lists every model of the catalogue for a person, in catalogue order', async (t) => {
  const listed = await models('/client/models');
  t.same([...listed.keys()], ['chat-searching', 'chat-plain', 'painter', 'speaker', 'listener']);
});

t.test('a model shows the /v1 model fields with its token prices; an unpriced unit is null', async (t) => {
  const model = (await models('/client/models')).get('chat-searching')!;
  t.match(model, { object: 'model', owned_by: 'svc', svc_batch: true, svc_modalities: { input: ['text'], output: ['text'] }, context_window: 128_000 });
  t.same(model.prices, {
    inputPerMTokUsd: 2.5,
    cachedInputPerMTokUsd: 1.25,
    cacheWritePerMTokUsd: null,
    outputPerMTokUsd: 10,
    perImageUsd: null,
    images: null,
    perCharacterUsd: null,
    perAudioSecondUsd: null,
    perWebSearchUsd: 0.01,
  });
});

t.test('builtinTools names web_search with its per-search rate only where the model offers it', async (t) => {
  const listed = await models('/client/models');
  t.same(listed.get('chat-searching')!.builtinTools, { web_search: { perSearchUsd: 0.01 } });
  t.same(listed.get('chat-plain')!.builtinTools, {}, 'priced, but the model does not offer the tool');
});

t.test('image, speech and transcription models show their per-unit prices and the settings they accept', async (t) => {
  const listed = await models('/client/models');
  const painter = listed.get('painter')!;
  t.match(painter.prices, { perImageUsd: 0.02, images: { '1024x1024': { standard: 0.04, hd: 0.08 } } });
  t.same(painter.capabilities, { images: { sizes: ['1024x1024', '512x512'], qualities: ['standard', 'hd'], maxImages: 4 }, speech: null, transcription: null, evaluation: null });
  const speaker = listed.get('speaker')!;
  t.match(speaker.prices, { perCharacterUsd: 0.000015 });
  t.same(speaker.capabilities.speech, { voices: ['alloy', 'verse'], formats: ['wav', 'mp3'], maxInputCharacters: 4096 });
  const listener = listed.get('listener')!;
  t.match(listener.prices, { perAudioSecondUsd: 0.0001 });
  t.same(listener.capabilities.transcription, { formats: ['json', 'text'] });
});

t.test('an API key sees only the models its allow-list lets it use, with no scope needed', async (t) => {
  const { key } = await createKey(test, { name: 'painter only', scopes: ['inference'], models: ['painter'] });
  t.same([...(await models('/client/models', key)).keys()], ['painter']);
  t.same([...(await models('/platform/v1/models', key)).keys()], ['painter'], 'the regional surface answers the same');
});

t.test('the OpenAPI document describes the response: prices, builtinTools and capabilities', async (t) => {
  const document = (await test.call('GET', '/client/openapi.json', { token: null })).json() as {
    paths: Record<string, Record<string, unknown>>;
    components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
  };
  t.ok(document.paths['/models']?.get, 'GET /models is documented, relative to the /client server');
  t.ok(document.components.schemas.ManagementModel?.properties?.prices);
  t.ok(document.components.schemas.ManagementModel?.properties?.builtinTools);
  t.ok(document.components.schemas.ModelPrices?.properties?.perWebSearchUsd);
  t.ok(document.components.schemas.ModelCapabilities?.properties?.speech);
});

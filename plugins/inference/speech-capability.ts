import { emptyUsage, type SpeechRequestBody, type SpeechResult } from '../../core/gateway/provider.ts';
import { compileBodySchema } from '../../core/kernel/compiled-schema.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { speechCharacters } from '../../providers/audio-units.ts';
import type { GatewayCapability } from './capability.ts';
import type { CatalogueModel, ModelCatalogue } from './model-catalogue.ts';
import { unsupportedModel } from './unsupported-model.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './inference-errors.ts';

/** OpenAI's speech request as far as the gateway reads it; other fields (`instructions`…) pass through. */
export const speechRequestSchema = {
  type: 'object',
  required: ['model', 'input', 'voice'],
  properties: {
    model: { type: 'string' },
    input: { type: 'string', minLength: 1 },
    voice: { type: 'string', minLength: 1 },
    response_format: { type: 'string' },
    speed: { type: 'number', minimum: 0.25, maximum: 4 },
    // Audio bytes only: OpenAI's `sse` stream of base64 deltas is not offered.
    stream_format: { enum: ['audio'] },
  },
};

const parseSpeechRequest = compileBodySchema<SpeechRequestBody>(speechRequestSchema);

type SpeechModel = CatalogueModel & { speech: NonNullable<CatalogueModel['speech']> };

const speaks = (model: CatalogueModel): model is SpeechModel => model.speech !== undefined;

/**
 * `POST /v1/audio/speech`: the audio bytes with the provider's content type, sent as the upstream
 * makes them; billed per input character (code points, as providers count). The browser rule
 * covers it (the spec names it).
 */
export function speechCapability(catalogue: ModelCatalogue): GatewayCapability<'speech', SpeechRequestBody, SpeechResult> {
  // The first of a model's formats is its default: the upstream is asked for a format the model offers.
  const defaultFormat = new Map(
    catalogue
      .all()
      .filter(speaks)
      .map((model) => [model.id, model.speech.formats[0]]),
  );
  return {
    endpoint: '/v1/audio/speech',
    modality: 'speech',
    browserRule: true,
    parse: parseSpeechRequest,
    modelOf: (body) => body.model,
    check(body, model, credential) {
      if (!speaks(model)) throw unsupportedModel(model, { catalogue, credential, serves: speaks, does: 'synthesize speech' });
      const { voices, formats, maxInputCharacters } = model.speech;
      const characters = speechCharacters(body.input);
      if (characters > maxInputCharacters) {
        throw new ApiError('invalid_parameter', `'input' is ${characters} characters; ${model.id} takes at most ${maxInputCharacters}`, { param: 'input' });
      }
      if (!voices.includes(body.voice)) {
        throw new ApiError('invalid_parameter', `${model.id} has no voice ${JSON.stringify(body.voice)}; its voices: ${voices.join(', ')}`, { param: 'voice' });
      }
      if (body.response_format !== undefined && !(formats as string[]).includes(body.response_format)) {
        throw new ApiError('invalid_parameter', `${model.id} does not make ${JSON.stringify(body.response_format)}; its formats: ${formats.join(', ')}`, {
          param: 'response_format',
        });
      }
    },
    mapInputTexts(body, map) {
      const input = map(body.input);
      return input === body.input ? body : { ...body, input };
    },
    estimate: (body) => ({ inputTokens: 0, maxOutputTokens: 0, units: { characters: speechCharacters(body.input) }, countedInputTokens: 0 }),
    attempt: (candidate, body, options) =>
      candidate.api.synthesize({ ...body, model: candidate.upstreamModel, response_format: body.response_format ?? defaultFormat.get(body.model) }, options),
    answer(result, body) {
      const characters = speechCharacters(body.input);
      return {
        usage: emptyUsage(),
        units: { characters },
        contentType: result.contentType,
        body: result.audio,
        logged: { request: body, response: { contentType: result.contentType, characters } },
      };
    },
  };
}

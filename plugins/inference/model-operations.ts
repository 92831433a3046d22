import { z } from 'zod';
import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import type { CatalogueModel, ModelCatalogue } from './model-catalogue.ts';
import { toModelObject } from './models-routes.ts';

const usd = z.number().describe('USD');
const optionalUsd = z.number().nullable();

const modelPricesView = z
  .object({
    inputPerMTokUsd: usd.describe('USD per million input tokens'),
    cachedInputPerMTokUsd: optionalUsd.describe('USD per million input tokens read from the cache; null: billed as ordinary input'),
    cacheWritePerMTokUsd: optionalUsd.describe('USD per million input tokens written to the cache; null: billed as ordinary input'),
    outputPerMTokUsd: usd.describe('USD per million output tokens'),
    perImageUsd: optionalUsd.describe('USD per generated image of a size and quality `images` does not list'),
    images: z.record(z.string(), z.record(z.string(), z.number())).nullable().describe('USD per generated image by size, then quality'),
    perCharacterUsd: optionalUsd.describe('USD per input character of speech synthesis'),
    perAudioSecondUsd: optionalUsd.describe('USD per second of transcribed audio'),
    perWebSearchUsd: optionalUsd.describe('USD per web search a Responses call runs, on top of tokens'),
  })
  .meta({ id: 'ModelPrices', description: 'What a call is billed, per unit; null: the unit is not priced for this model' });

const capabilitiesView = z
  .object({
    images: z
      .object({ sizes: z.array(z.string()), qualities: z.array(z.string()), maxImages: z.number().int() })
      .nullable()
      .describe('What /v1/images/generations accepts (the first size and quality are the defaults); null: no image output'),
    speech: z
      .object({ voices: z.array(z.string()), formats: z.array(z.string()), maxInputCharacters: z.number().int() })
      .nullable()
      .describe('What /v1/audio/speech accepts (the first format is the default); null: no speech'),
    transcription: z
      .object({ formats: z.array(z.string()) })
      .nullable()
      .describe('`response_format` values /v1/audio/transcriptions accepts; null: no transcription'),
    evaluation: z
      .object({
        calibration: z
          .object({
            method: z.enum(['none', 'temperature', 'platt']),
            temperature: z.number().optional().describe('temperature: log probabilities are divided by it'),
            a: z.number().optional().describe('platt: the slope on log probabilities'),
            b: z.number().optional().describe('platt: the offset added to yes on yes/no questions'),
          })
          .describe("How the model's label probabilities are calibrated"),
      })
      .nullable()
      .describe('Set on evaluation models, which /v1/evaluate takes; null: not an evaluation model'),
  })
  .meta({ id: 'ModelCapabilities', description: "Settings a model's capability routes accept" });

const managementModelView = z
  .object({
    id: z.string().describe('The model id /v1 takes'),
    object: z.literal('model'),
    created: z.number().int(),
    owned_by: z.string(),
    svc_modalities: z.object({ input: z.array(z.string()), output: z.array(z.string()) }),
    svc_batch: z.boolean().describe('Whether /v1/batches accepts the model'),
    context_window: z.number().int(),
    max_output_tokens: z.number().int(),
    svc_development: z.literal(true).optional().describe('Present on development models (the offline mock)'),
    prices: modelPricesView.nullable().describe('null when the deployment meters no money'),
    builtinTools: z
      .object({ web_search: z.object({ perSearchUsd: z.number() }).optional() })
      .describe('Hosted tools a /v1/responses call may use on this model, each with its rate; empty when none is offered and priced'),
    capabilities: capabilitiesView,
  })
  .meta({ id: 'ManagementModel', description: 'A model of the catalogue as GET /v1/models shows it, with its prices, built-in tools and capability settings' });

const managementModelList = z
  .object({ object: z.literal('list'), data: z.array(managementModelView).describe('In catalogue order') })
  .meta({ id: 'ManagementModelList', description: 'Every model the caller can use' });

function toPricesView(prices: NonNullable<CatalogueModel['prices']>): z.input<typeof modelPricesView> {
  return {
    inputPerMTokUsd: prices.inputPerMTokUsd,
    cachedInputPerMTokUsd: prices.cachedInputPerMTokUsd ?? null,
    cacheWritePerMTokUsd: prices.cacheWritePerMTokUsd ?? null,
    outputPerMTokUsd: prices.outputPerMTokUsd,
    perImageUsd: prices.perImageUsd ?? null,
    images: prices.images ?? null,
    perCharacterUsd: prices.perCharacterUsd ?? null,
    perAudioSecondUsd: prices.perAudioSecondUsd ?? null,
    perWebSearchUsd: prices.perWebSearchUsd ?? null,
  };
}

export function toManagementModel(model: CatalogueModel): z.input<typeof managementModelView> {
  const perSearchUsd = model.builtinTools.webSearch ? model.prices?.perWebSearchUsd : undefined;
  return {
    ...toModelObject(model),
    prices: model.prices ? toPricesView(model.prices) : null,
    builtinTools: perSearchUsd === undefined ? {} : { web_search: { perSearchUsd } },
    capabilities: {
      images: model.images ? { sizes: model.images.sizes, qualities: model.images.qualities, maxImages: model.images.maxImages } : null,
      speech: model.speech ? { voices: model.speech.voices, formats: model.speech.formats, maxInputCharacters: model.speech.maxInputCharacters } : null,
      transcription: model.transcription ? { formats: model.transcription.formats } : null,
      evaluation: model.evaluation ? { calibration: model.evaluation.calibration } : null,
    },
  };
}

/** The management view of the catalogue (`GET /client/models`, `/platform/v1/models`). */
export function modelOperations(catalogue: ModelCatalogue): AnyOperation[] {
  const list = defineOperation({
    name: 'models.list',
    method: 'GET',
    path: '/models',
    summary: 'List the models the caller can use, with prices per unit, built-in tools and capability settings',
    description:
      'Any credential of the account may call it (no scope): what a call costs is what its caller is billed. ' +
      'A person sees every model of the catalogue; an API key sees the models its allow-list lets it use, as on GET /v1/models.',
    scope: null,
    readOnly: true,
    output: managementModelList,
    async handler(_input, { credential }) {
      return { object: 'list' as const, data: catalogue.visibleTo(credential).map(toManagementModel) };
    },
  });
  return [list];
}

import { z } from 'zod';
import { usdAmount } from '../../core/vocabulary/money.ts';
import { TOKENIZERS } from '../../providers/input-token-bound.ts';

/** One set of prices in USD; token prices per million tokens. */
const livePriceSchema = z.strictObject({
  inputPerMTokUsd: usdAmount,
  cachedInputPerMTokUsd: usdAmount.optional(),
  cacheWritePerMTokUsd: usdAmount.optional(),
  outputPerMTokUsd: usdAmount,
  perImageUsd: usdAmount.optional(),
  perAudioSecondUsd: usdAmount.optional(),
  perCharacterUsd: usdAmount.optional(),
  perWebSearchUsd: usdAmount.optional(),
  /**
   * Per generated image by size, then quality (`{ '1024x1024': { standard: 0.04, hd: 0.08 } }`); a
   * size or quality not listed falls back to perImageUsd, and a model with neither cannot generate.
   */
  images: z.record(z.string().min(1), z.record(z.string().min(1), usdAmount)).optional(),
});

/** Prices in USD; token prices per million tokens. Metering bills with these. */
export const priceSchema = livePriceSchema.extend({
  /**
   * What a batch line (a call run against a spend hold) pays instead, field by field: a field set
   * here replaces the live one (`images` as a whole), a field left out keeps it. Absent: live prices.
   */
  batch: livePriceSchema.partial().optional(),
});

/** What /v1/images/generations accepts for a model with `image` output. */
const imageCapabilitySchema = z.strictObject({
  /** `WIDTHxHEIGHT` strings; the first is the default. */
  sizes: z.array(z.string().regex(/^(\d+x\d+|auto)$/, 'a size is WIDTHxHEIGHT or auto')).min(1),
  /** The first is the default. */
  qualities: z.array(z.string().min(1)).min(1).default(['standard']),
  /** Largest `n` of one request. */
  maxImages: z.number().int().min(1).max(10).default(10),
});

/** What /v1/audio/speech accepts for a model with text input and `audio` output. */
const speechCapabilitySchema = z.strictObject({
  voices: z.array(z.string().min(1)).min(1),
  /** `response_format` values; the first is the default. */
  formats: z
    .array(z.enum(['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm']))
    .min(1)
    .default(['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm']),
  maxInputCharacters: z.number().int().positive().default(4096),
});

/** What /v1/audio/transcriptions accepts for a model with `audio` input and text output. */
const transcriptionCapabilitySchema = z.strictObject({
  formats: z
    .array(z.enum(['json', 'text', 'srt', 'vtt', 'verbose_json']))
    .min(1)
    .default(['json', 'text', 'srt', 'vtt', 'verbose_json']),
});

/** Hosted tools a Responses call may use on this model, each billed per use on top of tokens. */
const builtinToolsSchema = z.strictObject({
  webSearch: z
    .strictObject({
      /** Searches reserved for by a call before it runs; a call that runs more is billed for all of them. */
      reservePerCall: z.number().int().min(0).max(100).default(5),
    })
    .optional(),
});

/**
 * How an evaluation model's label probabilities are calibrated (plugins/inference/README.md,
 * "Evaluate"): `temperature` divides the log probabilities by T (T > 1 softens an overconfident
 * model); `platt` multiplies them by `a` and, on yes/no questions, adds `b` to yes
 * (σ(a·logit p + b)); `none` keeps them as the model gave them. `npm run calibrate` fits both.
 */
export const calibrationSchema = z.discriminatedUnion('method', [
  z.strictObject({ method: z.literal('none') }),
  z.strictObject({ method: z.literal('temperature'), temperature: z.number().positive().max(100) }),
  z.strictObject({ method: z.literal('platt'), a: z.number().positive().max(100), b: z.number().min(-50).max(50) }),
]);

/** What makes a model an evaluation model (`POST /v1/evaluate` takes no other). */
const evaluationCapabilitySchema = z.strictObject({
  calibration: calibrationSchema.default({ method: 'none' }),
});

const routeSchema = z.strictObject({
  /** A provider instance named under `providers`. */
  provider: z.string().min(1),
  /** The model name the upstream knows (for Azure: the deployment name). */
  model: z.string().min(1),
  /** Routes of equal priority share traffic by weight; lower priority numbers are tried first. */
  weight: z.number().positive().default(1),
  priority: z.number().int().optional(),
});

const modality = z.enum(['text', 'image', 'audio', 'embedding']);

export const modelSchema = z.strictObject({
  routes: z.array(routeSchema).min(1),
  modalities: z.strictObject({ input: z.array(modality).min(1).default(['text']), output: z.array(modality).min(1).default(['text']) }).prefault({}),
  /** Set for models with `image` output. */
  images: imageCapabilitySchema.optional(),
  /** Set for speech synthesis models. */
  speech: speechCapabilitySchema.optional(),
  /** Set for transcription models. */
  transcription: transcriptionCapabilitySchema.optional(),
  /** Set for evaluation models (`/v1/evaluate`), with their calibration. */
  evaluation: evaluationCapabilitySchema.optional(),
  builtinTools: builtinToolsSchema.prefault({}),
  /** Whether /v1/batches accepts this model (`svc_batch`). */
  batch: z.boolean().default(false),
  contextWindow: z.number().int().positive().default(128_000),
  maxOutputTokens: z.number().int().positive().default(16_384),
  prices: priceSchema.optional(),
  /**
   * How the model's upstreams count input tokens, for reservations: `o200k_base` or `cl100k_base`
   * (OpenAI's models, wherever they are served), or `bytes` (unknown: bounded by UTF-8 size).
   * Unset: inferred from the upstream model names on OpenAI's own API, `bytes` elsewhere.
   */
  tokenizer: z.enum(TOKENIZERS, { error: `must be one of ${TOKENIZERS.join(', ')}` }).optional(),
  /** Streams whose first content takes longer than this fail over to the next route. */
  ttftTimeoutMs: z.number().int().positive().optional(),
  ownedBy: z.string().default('svc'),
  /** Marked so lists and logs can say it is a development model (the mock). */
  development: z.boolean().default(false),
});

const timeoutsSchema = z.strictObject({
  connectMs: z.number().int().positive().optional(),
  firstByteMs: z.number().int().positive().optional(),
  totalMs: z.number().int().positive().optional(),
});

/** `type` names a built-in provider, `package` an npm package; the rest is the type's own config. */
export const providerEntrySchema = z
  .looseObject({
    type: z.string().min(1).optional(),
    package: z.string().min(1).optional(),
    timeouts: timeoutsSchema.optional(),
  })
  .refine((entry) => Boolean(entry.type) || Boolean(entry.package), 'a provider needs `type` (built in) or `package` (npm)');

export const inferenceConfigSchema = z
  .strictObject({
    providers: z.record(z.string().regex(/^[a-z0-9][a-z0-9_-]*$/i, 'provider names are letters, digits, - and _'), providerEntrySchema).default({}),
    models: z.record(z.string().min(1).max(200), modelSchema).default({}),
    timeouts: timeoutsSchema.prefault({}),
    failover: z
      .strictObject({
        /** Upstream attempts per request, across every route. */
        maxAttempts: z.number().int().min(1).max(10).default(4),
        /** Extra tries on the same route before moving on (connect errors, 5xx, timeouts). */
        retriesPerRoute: z.number().int().min(0).max(5).default(1),
        initialBackoffMs: z.number().int().min(0).default(100),
        maxBackoffMs: z.number().int().min(0).default(2_000),
        /** An upstream retry-after longer than this moves to the next route instead of waiting. */
        maxRetryAfterMs: z.number().int().min(0).default(5_000),
        /** No new attempt starts after this long; the client then gets 502. */
        deadlineMs: z.number().int().positive().default(30_000),
        /** Time to first streamed content before failing over (per model: ttftTimeoutMs). */
        ttftTimeoutMs: z.number().int().positive().default(60_000),
      })
      .prefault({}),
    circuitBreaker: z
      .strictObject({
        /** Failures of one route within the window that open its circuit. */
        failureThreshold: z.number().int().min(1).default(5),
        windowMs: z.number().int().positive().default(30_000),
        /** How long an open route is skipped (while others remain). */
        cooldownMs: z.number().int().positive().default(30_000),
      })
      .prefault({}),
  })
  .superRefine((config, ctx) => {
    for (const [modelId, model] of Object.entries(config.models)) {
      model.routes.forEach((route, index) => {
        if (!Object.hasOwn(config.providers, route.provider)) {
          ctx.addIssue({
            code: 'custom',
            path: ['models', modelId, 'routes', index, 'provider'],
            message: `no provider named '${route.provider}' under providers`,
          });
        }
      });
    }
  });

export type InferenceConfig = z.output<typeof inferenceConfigSchema>;
export type ModelConfig = z.output<typeof modelSchema>;
export type Calibration = z.output<typeof calibrationSchema>;

import { emptyUsage, type ImageRequestBody, type ImageResult, type JsonObject } from '../../core/gateway/provider.ts';
import type { Credential } from '../../core/identity/credential.ts';
import { compileBodySchema } from '../../core/kernel/compiled-schema.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { GatewayCapability } from './capability.ts';
import type { CatalogueModel, ModelCatalogue } from './model-catalogue.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './inference-errors.ts';

/**
 * The longest prompt accepted, in characters: OpenAI's largest (gpt-image-1's 32,000; DALL·E 3
 * takes 4,000, DALL·E 2 1,000, and their upstreams refuse longer ones themselves).
 */
export const MAX_IMAGE_PROMPT_CHARACTERS = 32_000;
/** OpenAI's bound on `n`; a model's `images.maxImages` may lower it. */
const MAX_IMAGES_PER_REQUEST = 10;

/** The request once completed with the model's defaults: what is reserved, sent and billed. */
export interface ParsedImageRequest extends ImageRequestBody {
  n?: number;
  size?: string;
  quality?: string;
}

const nullable = (schema: Record<string, unknown>) => ({ anyOf: [schema, { type: 'null' }] });

/**
 * OpenAI's images request as far as the gateway reads it. Other fields (`style`, `user`,
 * `background`, `output_format`, `moderation`…) pass through: OpenAI adds image options often and
 * the upstream refuses those it does not know, so the route is not strict.
 */
export const imageRequestSchema = {
  type: 'object',
  required: ['model', 'prompt'],
  properties: {
    model: { type: 'string' },
    prompt: { type: 'string', minLength: 1, maxLength: MAX_IMAGE_PROMPT_CHARACTERS },
    n: nullable({ type: 'integer', minimum: 1, maximum: MAX_IMAGES_PER_REQUEST }),
    size: nullable({ type: 'string' }),
    quality: nullable({ type: 'string' }),
    response_format: nullable({ enum: ['b64_json', 'url'] }),
    stream: nullable({ type: 'boolean' }),
  },
};

const checkImageRequest = compileBodySchema<ParsedImageRequest>(imageRequestSchema);

const invalid = (param: string, message: string) => new ApiError('invalid_parameter', message, { param });

export function parseImageRequest(raw: unknown): ParsedImageRequest {
  const body = checkImageRequest(raw);
  if (body.prompt.trim() === '') throw invalid('prompt', "'prompt' must describe the image; it holds only whitespace");
  // The SDK then reads an event stream: answering JSON would break it, so say so up front.
  if (body['stream'] === true) throw invalid('stream', 'Images are answered as JSON once drawn; streamed partial images are not offered. Leave stream unset');
  return body;
}

/** `POST /v1/images/generations`: billed per image by size and quality; the request log keeps no image bytes. */
export function imagesCapability(catalogue: ModelCatalogue): GatewayCapability<'images', ParsedImageRequest, ImageResult> {
  return {
    endpoint: '/v1/images/generations',
    modality: 'images',
    parse: parseImageRequest,
    modelOf: (body) => body.model,
    check(body, model, credential) {
      const images = model.images;
      if (!images || !drawsImages(model)) throw notAnImageModel(model, catalogue, credential);
      const allowed = (values: string[]) => values.map((value) => JSON.stringify(value)).join(', ');
      if (body.size != null && !images.sizes.includes(body.size)) {
        throw invalid('size', `The size ${JSON.stringify(body.size)} is not offered by ${model.id}; allowed: ${allowed(images.sizes)}`);
      }
      if (body.quality != null && !images.qualities.includes(body.quality)) {
        throw invalid('quality', `The quality ${JSON.stringify(body.quality)} is not offered by ${model.id}; allowed: ${allowed(images.qualities)}`);
      }
      if (body.n != null && body.n > images.maxImages) throw invalid('n', `${model.id} draws at most ${images.maxImages} images per request; 'n' was ${body.n}`);
    },
    withModelDefaults(body, model) {
      const images = model.images!;
      // Nulls mean "the default" in OpenAI's API; they are replaced or dropped, never sent on.
      const { n, size, quality, response_format, ...rest } = body;
      return {
        ...rest,
        n: n ?? 1,
        size: size ?? images.sizes[0],
        quality: quality ?? images.qualities[0],
        ...(response_format == null ? {} : { response_format }),
      };
    },
    mapInputTexts(body, map) {
      const prompt = map(body.prompt);
      return prompt === body.prompt ? body : { ...body, prompt };
    },
    estimate: (body) => ({
      inputTokens: 0,
      maxOutputTokens: 0,
      countedInputTokens: 0,
      units: { images: { count: body.n ?? 1, size: body.size!, quality: body.quality ?? null } },
    }),
    attempt: (candidate, body, options) => candidate.api.generate({ ...body, model: candidate.upstreamModel }, options),
    answer(result, request) {
      const body = imagesResponse(result.body);
      const { size, quality, images } = result.usage;
      return { usage: emptyUsage(), units: { images: { count: images, size, quality } }, body, logged: { request: request, response: withoutImageBytes(body) } };
    },
  };
}

function drawsImages(model: CatalogueModel): boolean {
  return model.modalities.output.includes('image') && model.images !== undefined;
}

function notAnImageModel(model: CatalogueModel, catalogue: ModelCatalogue, credential: Credential): ApiError {
  const able = catalogue
    .visibleTo(credential)
    .filter(drawsImages)
    .map((m) => m.id);
  const which = able.length > 0 ? `models that can: ${able.join(', ')}` : 'no model this key can use generates images';
  return new ApiError('unsupported_model', `The model ${JSON.stringify(model.id)} does not generate images; ${which}`, { param: 'model' });
}

const IMAGE_FIELDS = ['b64_json', 'url', 'revised_prompt'] as const;
const RESPONSE_FIELDS = ['background', 'output_format', 'quality', 'size', 'usage'] as const;

/** OpenAI's images response: `created` and `data`, then what the upstream said of the images, as it said it. */
function imagesResponse(upstream: JsonObject): JsonObject {
  const data = Array.isArray(upstream['data']) ? (upstream['data'] as JsonObject[]) : [];
  const response: JsonObject = {
    created: typeof upstream['created'] === 'number' ? upstream['created'] : Math.floor(Date.now() / 1000),
    data: data.map((item) => (item !== null && typeof item === 'object' ? pick(item, IMAGE_FIELDS) : {})),
  };
  return { ...response, ...pick(upstream, RESPONSE_FIELDS) };
}

function pick(from: JsonObject, fields: readonly string[]): JsonObject {
  const out: JsonObject = {};
  for (const field of fields) if (from[field] !== undefined) out[field] = from[field];
  return out;
}

/** The response as the request log keeps it: each image's bytes (base64, or a `data:` URL) replaced by a note of their size. */
export function withoutImageBytes(response: JsonObject): JsonObject {
  const data = response['data'] as JsonObject[];
  return {
    ...response,
    data: data.map((image) => {
      const kept = { ...image };
      if (typeof image['b64_json'] === 'string') kept['b64_json'] = omittedNote(image['b64_json']);
      if (typeof image['url'] === 'string' && image['url'].startsWith('data:')) kept['url'] = omittedNote(image['url'].slice(image['url'].indexOf(',') + 1));
      return kept;
    }),
  };
}

function omittedNote(base64: string): string {
  const bytes = Buffer.byteLength(base64, 'base64');
  return `[image omitted: ${bytes} bytes]`;
}

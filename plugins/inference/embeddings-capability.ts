import type { EmbeddingsRequestBody, EmbeddingsResult, JsonObject } from '../../core/gateway/provider.ts';
import { compileBodySchema } from '../../core/kernel/compiled-schema.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { embeddingInputTokenBound } from '../../providers/input-token-bound.ts';
import { estimateEmbeddingInputTokens } from '../../providers/token-estimate.ts';
import type { GatewayCapability } from './capability.ts';
import type { CatalogueModel, ModelCatalogue } from './model-catalogue.ts';
import { unsupportedModel } from './unsupported-model.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './inference-errors.ts';

/** OpenAI's limit on inputs per request. */
export const MAX_EMBEDDING_INPUTS = 2048;

export interface ParsedEmbeddingsRequest extends EmbeddingsRequestBody {
  encoding_format?: 'float' | 'base64';
  dimensions?: number;
  user?: string;
}

const tokenIds = { type: 'array', minItems: 1, items: { type: 'integer', minimum: 0 } };

/** OpenAI's embeddings request as far as the gateway reads it; other fields pass through to the upstream. */
export const embeddingsRequestSchema = {
  type: 'object',
  required: ['model', 'input'],
  properties: {
    model: { type: 'string' },
    input: {
      anyOf: [
        { type: 'string', minLength: 1 },
        { type: 'array', minItems: 1, maxItems: MAX_EMBEDDING_INPUTS, items: { type: 'string', minLength: 1 } },
        tokenIds,
        { type: 'array', minItems: 1, maxItems: MAX_EMBEDDING_INPUTS, items: tokenIds },
      ],
    },
    encoding_format: { enum: ['float', 'base64'] },
    dimensions: { type: 'integer', minimum: 1 },
    user: { type: 'string' },
  },
};

const checkEmbeddingsRequest = compileBodySchema<ParsedEmbeddingsRequest>(embeddingsRequestSchema);

const inputError = (message: string, param = 'input') => new ApiError('invalid_parameter', message, { param });

/**
 * OpenAI's embeddings request: a string, strings, a token array or token arrays. The input is
 * looked at first, so its 400 names the item at fault and says what is allowed (the schema's
 * anyOf could only say which alternative failed first).
 */
export function parseEmbeddingsRequest(raw: unknown): ParsedEmbeddingsRequest {
  const input = raw !== null && typeof raw === 'object' ? (raw as Record<string, unknown>)['input'] : undefined;
  if (typeof input === 'string' && input === '') throw inputError("'input' must not be empty");
  if (Array.isArray(input)) checkInputItems(input);
  return checkEmbeddingsRequest(raw);
}

function checkInputItems(items: unknown[]): void {
  if (items.length === 0) throw inputError("'input' must hold at least one item");
  if (typeof items[0] === 'number') {
    items.forEach((item, index) => {
      if (!Number.isInteger(item) || (item as number) < 0) throw inputError(`'input[${index}]' must be a token id (a non-negative integer)`, `input[${index}]`);
    });
    return;
  }
  if (items.length > MAX_EMBEDDING_INPUTS) throw inputError(`'input' holds ${items.length} items; at most ${MAX_EMBEDDING_INPUTS} are allowed per request`);
  const strings = typeof items[0] === 'string';
  items.forEach((item, index) => {
    const param = `input[${index}]`;
    if (strings) {
      if (typeof item !== 'string') throw inputError(`'${param}' must be a string like the other items`, param);
      if (item === '') throw inputError(`'${param}' must not be empty`, param);
    } else if (!Array.isArray(item) || item.length === 0 || !item.every((token) => Number.isInteger(token) && token >= 0)) {
      throw inputError(`'${param}' must be a non-empty array of token ids, or every item a string`, param);
    }
  });
}

/** `POST /v1/embeddings`: billed on input tokens; vectors encoded as the client asked, whatever the upstream sent. */
export function embeddingsCapability(catalogue: ModelCatalogue): GatewayCapability<'embeddings', ParsedEmbeddingsRequest, EmbeddingsResult> {
  return {
    endpoint: '/v1/embeddings',
    modality: 'embeddings',
    parse: parseEmbeddingsRequest,
    modelOf: (body) => body.model,
    check(_body, model, credential) {
      if (!servesEmbeddings(model)) throw unsupportedModel(model, { catalogue, credential, serves: servesEmbeddings, does: 'make embeddings' });
    },
    mapInputTexts(body, map) {
      const input = body.input;
      if (typeof input === 'string') {
        const mapped = map(input);
        return mapped === input ? body : { ...body, input: mapped };
      }
      if (typeof input[0] !== 'string') return body;
      let out: string[] | null = null;
      (input as string[]).forEach((text, index) => {
        const mapped = map(text);
        if (mapped !== text) (out ??= [...(input as string[])])[index] = mapped;
      });
      return out ? { ...body, input: out } : body;
    },
    estimate(body, model) {
      const inputTokens = embeddingInputTokenBound(body.input, model.inputProfile);
      const countedInputTokens = model.inputProfile.tokenizers.includes('bytes') ? estimateEmbeddingInputTokens(body.input) : inputTokens;
      return { inputTokens, maxOutputTokens: 0, countedInputTokens };
    },
    attempt: (candidate, body, options) => candidate.api.embed({ ...body, model: candidate.upstreamModel }, options),
    answer(result, body, model) {
      const base64 = body.encoding_format === 'base64';
      const data = Array.isArray(result.body['data']) ? (result.body['data'] as JsonObject[]) : [];
      return {
        usage: result.usage,
        body: {
          object: 'list',
          data: data.map((item, index) => ({ object: 'embedding', index: typeof item['index'] === 'number' ? item['index'] : index, embedding: encoded(item['embedding'], base64) })),
          model: model.id,
          usage: { prompt_tokens: result.usage.inputTokens, total_tokens: result.usage.inputTokens },
        },
      };
    },
  };
}

function servesEmbeddings(model: CatalogueModel): boolean {
  return model.modalities.output.includes('embedding');
}

/** A vector as the client asked: floats, or base64 of little-endian float32 (what OpenAI's SDKs ask for by default). */
function encoded(embedding: unknown, base64: boolean): unknown {
  if (base64 && Array.isArray(embedding)) {
    const floats = Float32Array.from(embedding as number[]);
    return Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength).toString('base64');
  }
  if (!base64 && typeof embedding === 'string') {
    const bytes = Buffer.from(embedding, 'base64');
    return Array.from(new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)));
  }
  return embedding;
}

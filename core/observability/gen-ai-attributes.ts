import type { Modality } from '../gateway/provider.ts';

/**
 * The OpenTelemetry GenAI semantic conventions' span attributes (development status), spelled
 * here because @opentelemetry/semantic-conventions marks its copies as moved to the GenAI
 * conventions' own repository (and only in the incubating entry point, a large module to load
 * for a dozen strings). Stable attributes (`error.type`, `http.response.status_code`,
 * `service.name`) come from the package.
 */
export const GEN_AI = {
  OPERATION_NAME: 'gen_ai.operation.name',
  PROVIDER_NAME: 'gen_ai.provider.name',
  REQUEST_MODEL: 'gen_ai.request.model',
  REQUEST_STREAM: 'gen_ai.request.stream',
  RESPONSE_MODEL: 'gen_ai.response.model',
  /** Seconds from the request to the first chunk of a streamed answer. */
  RESPONSE_TIME_TO_FIRST_CHUNK: 'gen_ai.response.time_to_first_chunk',
  USAGE_INPUT_TOKENS: 'gen_ai.usage.input_tokens',
  USAGE_OUTPUT_TOKENS: 'gen_ai.usage.output_tokens',
  USAGE_CACHE_READ_INPUT_TOKENS: 'gen_ai.usage.cache_read.input_tokens',
} as const;

/**
 * `gen_ai.operation.name` by modality: the conventions' `chat` for chat completions, Anthropic's
 * messages and the Responses API (a model turn from messages), `embeddings`, and for images,
 * speech and transcriptions their value for multimodal generation, `generate_content`.
 */
export const GEN_AI_OPERATION: Readonly<Record<Modality, string>> = {
  language: 'chat',
  responses: 'chat',
  embeddings: 'embeddings',
  images: 'generate_content',
  speech: 'generate_content',
  transcription: 'generate_content',
};

import type { Modality } from '../gateway/provider.ts';

/**
 * The OpenTelemetry semantic conventions' attribute names the gateway's spans use, spelled here
 * rather than imported: @opentelemetry/semantic-conventions is a large module for a dozen strings,
 * loaded at start by whatever imports it, and the process must not pay for tracing it does not do.
 * A test holds each name to the package's constant where the package has one (the stable entry
 * point; the GenAI ones only in its incubating entry, marked as moved to the GenAI conventions'
 * own repository, development status).
 */
export const ATTR = {
  ERROR_TYPE: 'error.type',
  HTTP_RESPONSE_STATUS_CODE: 'http.response.status_code',
} as const;

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
 * messages, the Responses API and evaluations (a model turn from messages), `embeddings`, and for images,
 * speech and transcriptions their value for multimodal generation, `generate_content`.
 */
export const GEN_AI_OPERATION: Readonly<Record<Modality, string>> = {
  language: 'chat',
  responses: 'chat',
  embeddings: 'embeddings',
  images: 'generate_content',
  speech: 'generate_content',
  transcription: 'generate_content',
  // One chat turn per question, each of one token.
  evaluation: 'chat',
};

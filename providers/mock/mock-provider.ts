import { setTimeout as delay } from 'node:timers/promises';
import {
  UpstreamError,
  type CallOptions,
  type ChatRequestBody,
  type ChatResult,
  type ChatStreamEvent,
  type EmbeddingProvider,
  type EvaluationProvider,
  type EmbeddingsRequestBody,
  type EmbeddingsResult,
  type ImageProvider,
  type ImageRequestBody,
  type ImageResult,
  type JsonObject,
  type LabelLogprobsRequest,
  type LabelLogprobsResult,
  type LanguageModelProvider,
  type Provider,
  type ResponsesPassthrough,
  type ResponsesRequestBody,
  type ResponsesResult,
  type ResponsesStreamEvent,
  type SpeechProvider,
  type SpeechRequestBody,
  type SpeechResult,
  type TranscriptionProvider,
  type TranscriptionRequest,
  type TranscriptionResult,
} from '../../core/gateway/provider.ts';
import { estimateEmbeddingInputTokens } from '../token-estimate.ts';
import type { MockConfig } from './config.ts';
import { chatChunks, chatCompletion, chatIdentity, chatUsage } from './mock-chat.ts';
import { embeddingInputs, embeddingItem, mockEmbedding } from './mock-embeddings.ts';
import { mockLabelLogprobs } from './mock-evaluation.ts';
import { DEFAULT_IMAGE_SIZE, parseImageSize, renderMockImage, revisedPrompt } from './mock-image.ts';
import { planMockReplies } from './mock-reply.ts';
import { planMockResponse, responseBody, responseEvents } from './mock-responses.ts';
import { speechCharacters } from '../audio-units.ts';
import { speechSamples, speechWav } from './mock-speech.ts';
import { mockTranscription } from './mock-transcription.ts';

/** Stream events that carry output; the pause between chunks goes before each of them. */
const OUTPUT_DELTA = /\.delta$|^response\.output_item\.added$/;

/**
 * A development provider: in-process, no network, deterministic. It offers every modality and
 * behaves like a small model (echoes part of the last user message, calls tools when told to,
 * answers structured output valid against the schema, honours max_tokens, stop, n, seed and
 * logprobs, streams token by token, simulates web search, draws PNGs, speaks WAVs and reads them
 * back, weighs answer labels for evaluations) so the whole gateway can run and be tested offline.
 * Not for production traffic.
 */
export class MockProvider implements Provider, LanguageModelProvider, EmbeddingProvider, ImageProvider, SpeechProvider, TranscriptionProvider, ResponsesPassthrough, EvaluationProvider {
  readonly language: LanguageModelProvider = this;
  readonly embeddings: EmbeddingProvider = this;
  readonly images: ImageProvider = this;
  readonly speech: SpeechProvider = this;
  readonly transcription: TranscriptionProvider = this;
  readonly responses: ResponsesPassthrough = this;
  readonly evaluation: EvaluationProvider = this;

  constructor(
    readonly name: string,
    private readonly config: MockConfig,
  ) {}

  async chat(body: ChatRequestBody, options: CallOptions): Promise<ChatResult> {
    await this.wait(this.config.latencyMs, options.signal);
    const replies = planMockReplies(body);
    const usage = chatUsage(body, replies);
    return { completion: chatCompletion(body, replies, usage, chatIdentity(body, this.now())), usage };
  }

  async *chatStream(body: ChatRequestBody, options: CallOptions): AsyncIterable<ChatStreamEvent> {
    await this.wait(this.config.latencyMs, options.signal);
    const replies = planMockReplies(body);
    const chunks = chatChunks(body, replies, chatIdentity(body, this.now()));
    for (const [position, chunk] of chunks.entries()) {
      // The opening role chunks go at once, as a model's first bytes do; a cancel stops any chunk.
      await this.wait(position >= replies.length ? this.config.chunkDelayMs : 0, options.signal);
      yield { type: 'chunk', chunk };
    }
    yield { type: 'usage', usage: chatUsage(body, replies) };
  }

  async create(body: ResponsesRequestBody, options: CallOptions): Promise<ResponsesResult> {
    await this.wait(this.config.latencyMs, options.signal);
    const response = planMockResponse(body, this.now());
    return { body: responseBody(body, response), usage: response.usage };
  }

  async *stream(body: ResponsesRequestBody, options: CallOptions): AsyncIterable<ResponsesStreamEvent> {
    await this.wait(this.config.latencyMs, options.signal);
    const response = planMockResponse(body, this.now());
    for (const data of responseEvents(body, response)) {
      await this.wait(OUTPUT_DELTA.test(String(data['type'])) ? this.config.chunkDelayMs : 0, options.signal);
      yield { type: 'event', event: String(data['type']), data };
    }
    yield { type: 'usage', usage: response.usage };
  }

  async embed(body: EmbeddingsRequestBody, options: CallOptions): Promise<EmbeddingsResult> {
    await this.wait(this.config.latencyMs, options.signal);
    const requested = body['dimensions'];
    const dimensions = typeof requested === 'number' && Number.isInteger(requested) && requested > 0 && requested <= 8192 ? requested : this.config.embeddingDimensions;
    const inputTokens = estimateEmbeddingInputTokens(body.input);
    const data = embeddingInputs(body.input).map((text, index) => embeddingItem(mockEmbedding(text, dimensions), index, body['encoding_format']));
    return {
      body: { object: 'list', data, model: body.model, usage: { prompt_tokens: inputTokens, total_tokens: inputTokens } },
      usage: { inputTokens, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0, estimated: false },
    };
  }

  /**
   * PNGs at the requested size; `url` is a `data:image/png;base64,...` URL, since an offline
   * provider has nowhere to host files (every client that fetches or displays URLs reads it).
   */
  async generate(body: ImageRequestBody, options: CallOptions): Promise<ImageResult> {
    await this.wait(this.config.latencyMs, options.signal);
    const size = body.size ?? DEFAULT_IMAGE_SIZE;
    const dimensions = parseImageSize(size);
    if (!dimensions) throw new UpstreamError('client', `${this.name}: cannot draw an image of size ${size}`, { status: 400 });
    const n = typeof body.n === 'number' && Number.isInteger(body.n) && body.n >= 1 ? Math.min(body.n, 10) : 1;
    const data: JsonObject[] = [];
    for (let index = 0; index < n; index++) {
      if (options.signal.aborted) throw this.aborted();
      const png = (await renderMockImage(body.prompt, index, dimensions.width, dimensions.height)).toString('base64');
      const image = body.response_format === 'b64_json' ? { b64_json: png } : { url: `data:image/png;base64,${png}` };
      data.push({ ...image, revised_prompt: revisedPrompt(body.prompt) });
    }
    const quality = typeof body.quality === 'string' ? body.quality : null;
    return {
      body: { created: this.now(), data, output_format: 'png', size: `${dimensions.width}x${dimensions.height}`, ...(quality === null ? {} : { quality }) },
      usage: { images: n, size, quality },
    };
  }

  /** WAV natively and its raw samples as `pcm`; compressed formats would need an encoder, so they are refused. */
  async synthesize(body: SpeechRequestBody, options: CallOptions): Promise<SpeechResult> {
    await this.wait(this.config.latencyMs, options.signal);
    const format = body.response_format ?? 'wav';
    const usage = { characters: speechCharacters(body.input) };
    if (format === 'wav') return { contentType: 'audio/wav', audio: speechWav(body.input, body.speed ?? 1), usage };
    if (format === 'pcm') return { contentType: 'audio/pcm', audio: speechSamples(body.input, body.speed ?? 1), usage };
    throw new UpstreamError('client', `${this.name}: speaks wav and pcm only, not ${format}`, { status: 400 });
  }

  async transcribe(request: TranscriptionRequest, options: CallOptions): Promise<TranscriptionResult> {
    await this.wait(this.config.latencyMs, options.signal);
    return mockTranscription(request);
  }

  /** Deterministic label log probabilities from a hash of the prompt and each label (mock-evaluation.ts). */
  async labelLogprobs(request: LabelLogprobsRequest, options: CallOptions): Promise<LabelLogprobsResult> {
    await this.wait(this.config.latencyMs, options.signal);
    return mockLabelLogprobs(request);
  }

  async close(): Promise<void> {}

  private now(): number {
    return Math.floor(Date.now() / 1000);
  }

  /** A pause the caller can cut short, as it could cut a real upstream call. */
  private async wait(ms: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted) throw this.aborted();
    if (ms <= 0) return;
    try {
      await delay(ms, undefined, { signal });
    } catch {
      throw this.aborted();
    }
  }

  private aborted(): UpstreamError {
    return new UpstreamError('aborted', `${this.name}: the call was cancelled by the gateway`);
  }
}

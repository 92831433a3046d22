import {
  estimatedUsage,
  type CallOptions,
  type ChatCompletion,
  type ChatRequestBody,
  type ChatResult,
  type ChatStreamEvent,
  type EmbeddingsRequestBody,
  type EmbeddingsResult,
  type EmbeddingProvider,
  type EvaluationProvider,
  type ImageProvider,
  type ImageRequestBody,
  type ImageResult,
  type JsonObject,
  type LabelLogprobsRequest,
  type LabelLogprobsResult,
  type LanguageModelProvider,
  type Modality,
  type ModalityProviders,
  type Provider,
  type ProviderContext,
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
import { UpstreamHttpClient } from '../http/upstream-client.ts';
import { errorFromInBand, kindForErrorType, protocolError, type ErrorContext } from '../http/upstream-errors.ts';
import { estimateChatInputTokens, estimateEmbeddingInputTokens, estimateOutputTokens } from '../token-estimate.ts';
import type { OpenAIConfig } from './config.ts';
import { openAIChatEvents } from './chat-stream.ts';
import { usageFromOpenAI, usageFromOpenAIEmbeddings } from './usage.ts';
import { speechCharacters } from '../audio-units.ts';
import { speechContentType, transcriptionForm, transcriptionIsJson, transcriptionUsage } from './audio.ts';
import { failedResponseError, openAIResponsesEvents, responsesUsage } from './responses.ts';
import { labelLogprobsBody, labelLogprobsOf } from './evaluation.ts';

/** The upstream paths, one per operation (Azure puts each under its deployment). */
type Operation = 'chat/completions' | 'embeddings' | 'images/generations' | 'audio/speech' | 'audio/transcriptions' | 'responses';

const isObject = (value: unknown): value is JsonObject => value !== null && typeof value === 'object' && !Array.isArray(value);

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/**
 * OpenAI's reference marks a choice's `logprobs` and its message's `refusal` required (null when
 * unused); OpenAI-compatible servers (vLLM, Ollama…) often leave them out, and typed clients
 * read them. Filled in as null where absent, never changed where present.
 */
function withRequiredNulls(completion: ChatCompletion): ChatCompletion {
  for (const choice of completion.choices) {
    if (choice === null || typeof choice !== 'object') continue;
    if (choice.logprobs === undefined) choice.logprobs = null;
    const message = choice.message as ChatCompletion['choices'][number]['message'] | undefined;
    if (message !== null && typeof message === 'object' && message['refusal'] === undefined) message['refusal'] = null;
  }
  return completion;
}

/** What a completion produced, for estimating usage when the upstream reports none. */
function completionOutput(completion: ChatCompletion) {
  let text = '';
  let reasoning = '';
  const toolCalls: Array<{ name: string; arguments: string }> = [];
  for (const choice of completion.choices) {
    const message = choice.message;
    if (typeof message.content === 'string') text += message.content;
    if (typeof message['reasoning_content'] === 'string') reasoning += message['reasoning_content'];
    for (const call of message.tool_calls ?? []) toolCalls.push({ name: call.function.name, arguments: call.function.arguments });
  }
  return { text, reasoning, toolCalls };
}

function withoutStreamFields(body: ChatRequestBody): ChatRequestBody {
  const { stream: _stream, stream_options: _options, ...rest } = body;
  return rest as ChatRequestBody;
}

function withoutResponsesStreamFields(body: ResponsesRequestBody): ResponsesRequestBody {
  const { stream: _stream, stream_options: _options, ...rest } = body;
  return rest as ResponsesRequestBody;
}

/**
 * Any OpenAI-compatible API, Azure OpenAI included: chat, embeddings, images, speech,
 * transcription, the Responses API and evaluation's label log probabilities (chat with `logprobs`),
 * each offered unless the config's `offers` leaves it out.
 */
export class OpenAIProvider implements Provider, LanguageModelProvider, EmbeddingProvider, ImageProvider, SpeechProvider, TranscriptionProvider, ResponsesPassthrough, EvaluationProvider {
  readonly language: LanguageModelProvider | undefined;
  readonly embeddings: EmbeddingProvider | undefined;
  readonly images: ImageProvider | undefined;
  readonly speech: SpeechProvider | undefined;
  readonly transcription: TranscriptionProvider | undefined;
  readonly responses: ResponsesPassthrough | undefined;
  readonly evaluation: EvaluationProvider | undefined;
  private readonly http: UpstreamHttpClient;
  private readonly errors: ErrorContext;

  constructor(
    readonly name: string,
    private readonly config: OpenAIConfig,
    context: ProviderContext,
  ) {
    if (!config.allowPrivateNetwork) context.checkOutboundUrl(config.baseUrl);
    const secrets = config.apiKey ? [config.apiKey] : [];
    this.errors = { label: name, secrets };
    this.http = new UpstreamHttpClient({
      baseUrl: config.baseUrl,
      timeouts: context.timeouts,
      label: name,
      secrets,
      allowPrivateNetwork: config.allowPrivateNetwork,
    });
    const offered = new Set<Modality>(config.offers);
    const ifOffered = <M extends Modality>(modality: M): ModalityProviders[M] | undefined => (offered.has(modality) ? this : undefined);
    this.language = ifOffered('language');
    this.embeddings = ifOffered('embeddings');
    this.images = ifOffered('images');
    this.speech = ifOffered('speech');
    this.transcription = ifOffered('transcription');
    this.responses = ifOffered('responses');
    this.evaluation = ifOffered('evaluation');
  }

  async chat(body: ChatRequestBody, options: CallOptions): Promise<ChatResult> {
    const response = await this.http.postJson<ChatCompletion & { error?: unknown }>({
      path: this.pathFor('chat/completions', body.model),
      body: withoutStreamFields(body),
      headers: this.headers(options),
      call: options,
    });
    const completion = response.body;
    if (completion !== null && typeof completion === 'object' && completion.error !== undefined && completion.error !== null) {
      const detail = completion.error as { type?: unknown; code?: unknown };
      throw errorFromInBand(this.errors, kindForErrorType(detail.code ?? detail.type), completion, response.status);
    }
    if (completion === null || typeof completion !== 'object' || !Array.isArray(completion.choices)) {
      throw protocolError(this.errors, 'upstream answered without choices', completion);
    }
    const usage = usageFromOpenAI(completion.usage) ?? estimatedUsage(estimateChatInputTokens(body), estimateOutputTokens(completionOutput(completion)));
    return { completion: withRequiredNulls(completion), usage };
  }

  /** A chat call of one output token asking for `logprobs` and `top_logprobs` (evaluation.ts). */
  async labelLogprobs(request: LabelLogprobsRequest, options: CallOptions): Promise<LabelLogprobsResult> {
    const { completion, usage } = await this.chat(labelLogprobsBody(request), options);
    return { logprobs: labelLogprobsOf(completion, request.labels, this.errors), usage };
  }

  /** The request goes out when the first event is asked for. */
  chatStream(body: ChatRequestBody, options: CallOptions): AsyncIterable<ChatStreamEvent> {
    const upstreamBody: ChatRequestBody = { ...body, stream: true };
    if (this.config.includeStreamUsage) {
      upstreamBody.stream_options = { ...(body.stream_options ?? {}), include_usage: true };
    }
    const open = () =>
      this.http.postStream({
        path: this.pathFor('chat/completions', body.model),
        body: upstreamBody,
        headers: this.headers(options),
        call: options,
      });
    return openAIChatEvents(open, body, this.errors);
  }

  async embed(body: EmbeddingsRequestBody, options: CallOptions): Promise<EmbeddingsResult> {
    const response = await this.http.postJson<JsonObject>({
      path: this.pathFor('embeddings', body.model),
      body,
      headers: this.headers(options),
      call: options,
    });
    const result = response.body;
    if (result === null || typeof result !== 'object' || !Array.isArray(result['data'])) {
      throw protocolError(this.errors, 'upstream answered embeddings without data', result);
    }
    const usage = usageFromOpenAIEmbeddings(result['usage']) ?? estimatedUsage(estimateEmbeddingInputTokens(body.input), 0);
    return { body: result, usage };
  }

  async generate(body: ImageRequestBody, options: CallOptions): Promise<ImageResult> {
    const response = await this.http.postJson<JsonObject>({
      path: this.pathFor('images/generations', body.model),
      body,
      headers: this.headers(options),
      call: options,
    });
    const result = response.body;
    if (!isObject(result) || !Array.isArray(result['data'])) throw protocolError(this.errors, 'upstream answered images without data', result);
    // Billed as asked; where the request left size or quality to the model, as the upstream says it made them.
    const size = body.size ?? (typeof result['size'] === 'string' ? result['size'] : 'auto');
    const quality = body.quality ?? (typeof result['quality'] === 'string' ? result['quality'] : null);
    return { body: result, usage: { images: result['data'].length, size, quality } };
  }

  async synthesize(body: SpeechRequestBody, options: CallOptions): Promise<SpeechResult> {
    const response = await this.http.postStream({
      path: this.pathFor('audio/speech', body.model),
      body,
      headers: this.headers(options),
      call: options,
      accept: '*/*',
    });
    const contentType = speechContentType(headerText(response.headers['content-type']), body.response_format);
    return { contentType, audio: response.body, usage: { characters: speechCharacters(body.input) } };
  }

  async transcribe(request: TranscriptionRequest, options: CallOptions): Promise<TranscriptionResult> {
    const json = transcriptionIsJson(request.response_format);
    const response = await this.http.postForm({
      path: this.pathFor('audio/transcriptions', request.model),
      form: transcriptionForm(request),
      headers: this.headers(options),
      call: options,
      accept: json ? 'application/json' : 'text/plain',
    });
    if (!json) {
      const contentType = headerText(response.headers['content-type']) ?? 'text/plain; charset=utf-8';
      return { contentType, body: response.text, usage: transcriptionUsage(request, response.text) };
    }
    let body: unknown;
    try {
      body = JSON.parse(response.text);
    } catch {
      throw protocolError(this.errors, 'upstream answered a transcription with a body that is not JSON', response.text.slice(0, 2000));
    }
    if (!isObject(body) || typeof body['text'] !== 'string') throw protocolError(this.errors, 'upstream answered a transcription without text', body);
    return { contentType: 'application/json', body, usage: transcriptionUsage(request, body) };
  }

  async create(body: ResponsesRequestBody, options: CallOptions): Promise<ResponsesResult> {
    const response = await this.http.postJson<JsonObject>({
      path: this.pathFor('responses', body.model),
      body: withoutResponsesStreamFields(body),
      headers: this.headers(options),
      call: options,
    });
    const result = response.body;
    if (!isObject(result) || !Array.isArray(result['output'])) throw protocolError(this.errors, 'upstream answered a response without output', result);
    const failed = failedResponseError(this.errors, result);
    if (failed) throw failed;
    return { body: result, usage: responsesUsage(result, body) };
  }

  async *stream(body: ResponsesRequestBody, options: CallOptions): AsyncIterable<ResponsesStreamEvent> {
    const response = await this.http.postStream({
      path: this.pathFor('responses', body.model),
      body: { ...body, stream: true },
      headers: this.headers(options),
      call: options,
    });
    yield* openAIResponsesEvents(response.body, body, this.errors);
  }

  async close(): Promise<void> {
    await this.http.close();
  }

  private pathFor(operation: Operation, model: string): string {
    const azure = this.config.azure;
    if (!azure) return `/${operation}`;
    const version = `api-version=${encodeURIComponent(azure.apiVersion)}`;
    // Azure's Responses API is not per deployment: the deployment is named in the body's `model`.
    if (operation === 'responses') return `/openai/responses?${version}`;
    return `/openai/deployments/${encodeURIComponent(model)}/${operation}?${version}`;
  }

  private headers(options: CallOptions): Record<string, string> {
    const headers: Record<string, string> = { ...this.config.headers, 'x-client-request-id': options.requestId };
    const key = this.config.apiKey;
    if (key) {
      if (this.config.azure) headers['api-key'] = key;
      else headers['authorization'] = `Bearer ${key}`;
    }
    return headers;
  }
}

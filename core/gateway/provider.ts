import type { z } from 'zod';
import type { TraceHeaders } from '../observability/trace-context.ts';

/**
 * The provider contract, by modality. A provider offers any subset of the modalities below, each
 * its own interface against one normalised shape (OpenAI's wire formats, which are also what the
 * gateway speaks to its clients); what a provider offers is read from which members it has, so
 * the type checker keeps the offer and the code in step. Fields a provider does not understand
 * are passed through untouched where the upstream can take them.
 */
/** Normalised token usage. `inputTokens` INCLUDES cached tokens (OpenAI's convention). */
export interface Usage {
  inputTokens: number;
  /** Part of inputTokens read from the provider's prompt cache. */
  cachedInputTokens: number;
  /** Part of inputTokens written to the provider's prompt cache (Anthropic cache creation). */
  cacheWriteTokens: number;
  /** INCLUDES reasoning tokens. */
  outputTokens: number;
  reasoningTokens: number;
  /** True when counted locally because the upstream reported nothing. */
  estimated: boolean;
}

export type JsonObject = Record<string, unknown>;

export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  content?: string | Array<JsonObject> | null;
  name?: string;
  tool_calls?: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }>;
  tool_call_id?: string;
  [extra: string]: unknown;
}

/** An OpenAI chat-completions request body. `model` is already the UPSTREAM model name. */
export interface ChatRequestBody {
  model: string;
  messages: ChatMessage[];
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  stop?: string | string[] | null;
  tools?: Array<JsonObject>;
  tool_choice?: unknown;
  stream?: boolean;
  stream_options?: JsonObject | null;
  [extra: string]: unknown;
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    message: ChatMessage & { role: 'assistant' };
    finish_reason: string | null;
    logprobs?: unknown;
  }>;
  usage?: JsonObject;
  [extra: string]: unknown;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    delta: Partial<ChatMessage> & JsonObject;
    finish_reason: string | null;
    logprobs?: unknown;
  }>;
  usage?: JsonObject | null;
  [extra: string]: unknown;
}

/**
 * What a stream yields: OpenAI-shaped chunks, and once, near the end, the usage.
 *
 * `raw` is optional, for providers that read OpenAI's own chunks: the JSON text the chunk was
 * parsed from, exactly as the upstream sent it, offered only when the chunk had no usage (or
 * `"usage": null`). The gateway may then send that text on, with its own model id put in, rather
 * than serialise the chunk again (about 6 % of a paced stream's CPU, measured 2026-11-28). Whatever
 * it cannot rewrite exactly it serialises from `chunk`, so `raw` must say what `chunk` says, and
 * whatever changes a chunk on its way to the writer must drop its `raw`.
 */
export type ChatStreamEvent = { type: 'chunk'; chunk: ChatCompletionChunk; raw?: string } | { type: 'usage'; usage: Usage };

/**
 * What every call of every modality gets besides its body. Deliberately only standard things:
 * the kernel's cheaper cancellation travels beside it, out of sight (core/gateway/call-signal.ts).
 */
export interface CallOptions {
  /** Aborted when the client goes away or a deadline passes; providers must stop the upstream call. */
  readonly signal: AbortSignal;
  /** The gateway's request id, forwarded upstream where the provider has a header for it. */
  readonly requestId: string;
  /**
   * W3C trace context for this attempt's upstream request (`traceparent`, and `tracestate` when
   * there is one): the attempt's span when tracing is on, the caller's own headers passed through
   * when it is off, absent when there is neither. Built-in providers send them through their HTTP
   * client (providers/http/upstream-client.ts); a provider making its own requests adds them.
   */
  readonly traceHeaders?: TraceHeaders | undefined;
}

export interface ChatResult {
  completion: ChatCompletion;
  usage: Usage;
}

export interface EmbeddingsRequestBody {
  model: string;
  input: string | string[] | number[] | number[][];
  [extra: string]: unknown;
}

/** OpenAI's embeddings response body; usage in tokens (input only). */
export interface EmbeddingsResult {
  body: JsonObject;
  usage: Usage;
}

export interface ImageRequestBody {
  model: string;
  prompt: string;
  n?: number;
  size?: string;
  quality?: string;
  response_format?: 'b64_json' | 'url';
  [extra: string]: unknown;
}

/** Images are billed per image, by size and quality. */
export interface ImageUsage {
  images: number;
  size: string;
  quality: string | null;
}

/** OpenAI's images response body. */
export interface ImageResult {
  body: JsonObject;
  usage: ImageUsage;
}

export interface SpeechRequestBody {
  model: string;
  input: string;
  voice: string;
  response_format?: string;
  speed?: number;
  [extra: string]: unknown;
}

/** Speech is billed per input character. */
export interface SpeechUsage {
  characters: number;
}

/** Audio bytes, never JSON: the route answers them as they are, with the provider's content type. */
export interface SpeechResult {
  contentType: string;
  audio: Uint8Array | AsyncIterable<Uint8Array>;
  usage: SpeechUsage;
}

export interface TranscriptionRequest {
  model: string;
  file: { data: Uint8Array; filename: string; contentType: string };
  language?: string;
  prompt?: string;
  response_format?: 'json' | 'text' | 'srt' | 'vtt' | 'verbose_json';
  temperature?: number;
  /**
   * The audio's length in seconds, read by the gateway from the file itself: what the call is
   * billed on, so the bill does not depend on what the upstream reports. Not sent upstream; a
   * provider falls back to the upstream's own figure only when it is absent.
   */
  durationSeconds?: number;
  [extra: string]: unknown;
}

/** Transcription is billed per second of audio. */
export interface TranscriptionUsage {
  seconds: number;
}

/** A JSON body for json/verbose_json, text otherwise; the content type says which. */
export interface TranscriptionResult {
  contentType: string;
  body: JsonObject | string;
  usage: TranscriptionUsage;
}

/** An OpenAI Responses API request body, passed through; `model` is already the upstream name. */
export interface ResponsesRequestBody {
  model: string;
  stream?: boolean;
  [extra: string]: unknown;
}

/** Tokens, plus the hosted web searches the upstream ran (billed per search). */
export interface ResponsesUsage {
  tokens: Usage;
  webSearches: number;
}

export interface ResponsesResult {
  body: JsonObject;
  usage: ResponsesUsage;
}

/** Every upstream event, in order, as it came (`event` is the SSE event name); once, at the end, the usage. */
export type ResponsesStreamEvent = { type: 'event'; event: string; data: JsonObject } | { type: 'usage'; usage: ResponsesUsage };

/**
 * One short question put to a chat model, answered by one token out of a closed set (`/v1/evaluate`):
 * the conversation's reply must begin with one of `labels`, and what is wanted is how likely each is.
 */
export interface LabelLogprobsRequest {
  /** The upstream model name. */
  model: string;
  /**
   * The prompt. The calls of one evaluation share their leading messages (instructions, then the
   * state) and differ only in the last (the question), so an upstream's prompt cache applies.
   */
  messages: ChatMessage[];
  /** What the reply may be, each one token on the usual tokenizers: `yes`/`no`, or letters `A`, `B`, `C`… */
  labels: readonly string[];
}

export interface LabelLogprobsResult {
  /**
   * Per label, in `labels` order: the natural log of the probability that the reply's first token is
   * that label (spellings that differ only by case or surrounding spaces counted in). A label the
   * upstream did not list gets an upper bound of its own choosing (the built-in providers: the least
   * likely token listed). Need not sum to one: the gateway renormalises over the labels.
   */
  logprobs: number[];
  /** What the upstream reported; the gateway bills the input of it only. */
  usage: Usage;
}

/** Label probabilities for evaluations: in practice a chat call asking for `logprobs` and one token of output. */
export interface EvaluationProvider {
  /** Throws UpstreamError (`protocol`) when the reply began with none of the labels, or carried no log probabilities. */
  labelLogprobs(request: LabelLogprobsRequest, options: CallOptions): Promise<LabelLogprobsResult>;
}

/** Chat completions, JSON and streamed. */
export interface LanguageModelProvider {
  chat(body: ChatRequestBody, options: CallOptions): Promise<ChatResult>;
  /** Throws UpstreamError before the first event when the call fails up front. */
  chatStream(body: ChatRequestBody, options: CallOptions): AsyncIterable<ChatStreamEvent>;
}

export interface EmbeddingProvider {
  embed(body: EmbeddingsRequestBody, options: CallOptions): Promise<EmbeddingsResult>;
}

export interface ImageProvider {
  generate(body: ImageRequestBody, options: CallOptions): Promise<ImageResult>;
}

export interface SpeechProvider {
  synthesize(body: SpeechRequestBody, options: CallOptions): Promise<SpeechResult>;
}

export interface TranscriptionProvider {
  transcribe(request: TranscriptionRequest, options: CallOptions): Promise<TranscriptionResult>;
}

/** The upstream's own Responses API, served directly (no translation from another format). */
export interface ResponsesPassthrough {
  create(body: ResponsesRequestBody, options: CallOptions): Promise<ResponsesResult>;
  /** Throws UpstreamError before the first event when the call fails up front. */
  stream(body: ResponsesRequestBody, options: CallOptions): AsyncIterable<ResponsesStreamEvent>;
}

/** Each modality's interface, by the member of Provider that offers it. */
export interface ModalityProviders {
  language: LanguageModelProvider;
  embeddings: EmbeddingProvider;
  images: ImageProvider;
  speech: SpeechProvider;
  transcription: TranscriptionProvider;
  responses: ResponsesPassthrough;
  evaluation: EvaluationProvider;
}

export type Modality = keyof ModalityProviders;

/** What one call of each modality is billed on. */
export interface ModalityUsage {
  language: Usage;
  embeddings: Usage;
  images: ImageUsage;
  speech: SpeechUsage;
  transcription: TranscriptionUsage;
  responses: ResponsesUsage;
  evaluation: Usage;
}

/** A Record, so adding a modality to ModalityProviders without listing it here fails to compile. */
const modalityOrder: Record<Modality, number> = { language: 0, embeddings: 1, images: 2, speech: 3, transcription: 4, responses: 5, evaluation: 6 };
export const MODALITIES: readonly Modality[] = Object.keys(modalityOrder) as Modality[];

/**
 * An upstream instance. It offers exactly the modalities whose member it has; members are plain
 * objects (often the provider itself: `readonly language = this`).
 */
export type Provider = {
  /** The instance name from config (e.g. `openai`, `groq`, `azure-east`). */
  readonly name: string;
  /** Release pooled connections. */
  close?(): Promise<void>;
} & { readonly [M in Modality]?: ModalityProviders[M] };

/** A provider known to offer modality M. */
export type ProviderOffering<M extends Modality> = Provider & { readonly [K in M]: ModalityProviders[K] };

export function offers<M extends Modality>(provider: Provider, modality: M): provider is ProviderOffering<M> {
  return provider[modality] !== undefined;
}

/** The modalities a provider offers, in MODALITIES order. */
export function modalitiesOf(provider: Provider): Modality[] {
  return MODALITIES.filter((modality) => offers(provider, modality));
}

/** How long an upstream call may take, in milliseconds. */
export interface UpstreamTimeouts {
  connectMs: number;
  /** Until response headers arrive. */
  firstByteMs: number;
  /** The whole call, body included (streams: the whole stream). */
  totalMs: number;
}

export interface ProviderContext {
  timeouts: UpstreamTimeouts;
  /** Refuses outbound URLs that point into private networks unless the operator allowed them. */
  checkOutboundUrl(url: string): void;
}

/**
 * How an upstream counts a prompt's tokens, which admission reserves before the call
 * (providers/input-token-bound.ts): a published BPE encoding, the mock's own exact count, or
 * unknown (`bytes`: the prompt's UTF-8 size bounds it).
 */
export type InputTokenizer = 'o200k_base' | 'cl100k_base' | 'mock' | 'bytes';

/** What a route's upstream model says about counting its input. */
export interface RouteInputFacts {
  tokenizer: InputTokenizer;
  /** The largest input-token count of one image part on this route. */
  maxImageTokens: number;
}

/**
 * A provider type: what `type:` in a provider's config names. Built-in types live in providers/;
 * a third party's package default-exports one of these (see README, "Writing a provider").
 */
export interface ProviderType<C = unknown> {
  readonly type: string;
  readonly configSchema: z.ZodType<C>;
  create(name: string, config: C, context: ProviderContext): Provider;
  /**
   * How this type's upstream counts the input of `upstreamModel`, read from config before any
   * provider is created (so from the raw settings); undefined when it cannot tell. A model's
   * `tokenizer` in config overrides it. Read of built-in types only: a package's type is loaded
   * after the model catalogue is built, so its models declare a `tokenizer` or count as unknown.
   */
  inputFacts?(upstreamModel: string, settings: Readonly<Record<string, unknown>>): RouteInputFacts | undefined;
}

export function defineProviderType<S extends z.ZodType>(def: {
  type: string;
  configSchema: S;
  create(name: string, config: z.output<S>, context: ProviderContext): Provider;
  inputFacts?(upstreamModel: string, settings: Readonly<Record<string, unknown>>): RouteInputFacts | undefined;
}): ProviderType<z.output<S>> {
  return def as ProviderType<z.output<S>>;
}

export type UpstreamErrorKind =
  | 'connect' // never reached the upstream: safe to retry anywhere
  | 'timeout' // connect, first-byte or total deadline passed
  | 'rate_limited' // upstream 429
  | 'server' // upstream 5xx
  | 'client' // upstream 4xx other than 429: the request itself is wrong
  | 'auth' // upstream 401/403: our credentials for it are wrong
  | 'protocol' // the upstream answered something we cannot read
  | 'aborted'; // our side cancelled (client went away)

/** The one error a provider throws. */
export class UpstreamError extends Error {
  readonly kind: UpstreamErrorKind;
  readonly status: number | null;
  /** Whether retrying (this or another route) may help. */
  readonly retryable: boolean;
  /** From the upstream's retry-after / retry-after-ms headers. */
  readonly retryAfterMs: number | null;
  /** The upstream's own error body, for logs; never shown to clients as is. */
  readonly upstreamBody: unknown;

  constructor(kind: UpstreamErrorKind, message: string, options: { status?: number | null; retryAfterMs?: number | null; upstreamBody?: unknown; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'UpstreamError';
    this.kind = kind;
    this.status = options.status ?? null;
    this.retryAfterMs = options.retryAfterMs ?? null;
    this.upstreamBody = options.upstreamBody;
    this.retryable = kind === 'connect' || kind === 'timeout' || kind === 'rate_limited' || kind === 'server' || kind === 'protocol';
  }
}

export function emptyUsage(): Usage {
  return { inputTokens: 0, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0, estimated: false };
}

/** Usage counted locally because the upstream reported none: marked estimated. */
export function estimatedUsage(inputTokens: number, outputTokens: number): Usage {
  return { inputTokens, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens, reasoningTokens: 0, estimated: true };
}

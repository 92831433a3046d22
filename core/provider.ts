import type { z } from 'zod';
import type { CallSignal } from './call-signal.ts';

/**
 * The provider contract. Every upstream (OpenAI-compatible APIs, Anthropic, the offline mock, a
 * third party's npm package) implements this against one normalised shape: OpenAI's chat
 * completions wire format, which is also what the gateway speaks to its clients. Fields a provider
 * does not understand are passed through untouched where the upstream can take them.
 */

export type Capability =
  | 'chat'
  | 'stream'
  | 'embeddings'
  | 'images'
  | 'speech'
  | 'transcription'
  | 'responses'
  | 'batches';

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

/** What a stream yields: OpenAI-shaped chunks, and once, near the end, the usage. */
export type ChatStreamEvent =
  | { type: 'chunk'; chunk: ChatCompletionChunk }
  | { type: 'usage'; usage: Usage };

export interface CallOptions {
  /** Aborted when the client goes away or a deadline passes; providers must stop the upstream call. */
  readonly signal: AbortSignal;
  /**
   * The same cancellation, cheaper: set by the gateway, which makes `signal` only when it is read.
   * The kernel's HTTP client takes either (`signal: options.cancel ?? options.signal`).
   */
  readonly cancel?: CallSignal;
  /** The gateway's request id, forwarded upstream where the provider has a header for it. */
  requestId: string;
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

export interface EmbeddingsResult {
  body: JsonObject;
  usage: Usage;
}

export interface Provider {
  /** The instance name from config (e.g. `openai`, `groq`, `azure-east`). */
  readonly name: string;
  readonly capabilities: ReadonlySet<Capability>;
  chat?(body: ChatRequestBody, options: CallOptions): Promise<ChatResult>;
  /** Throws UpstreamError before the first event when the call fails up front. */
  chatStream?(body: ChatRequestBody, options: CallOptions): AsyncIterable<ChatStreamEvent>;
  embeddings?(body: EmbeddingsRequestBody, options: CallOptions): Promise<EmbeddingsResult>;
  /** Release pooled connections. */
  close?(): Promise<void>;
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
 * A provider type: what `type:` in a provider's config names. Built-in types live in providers/;
 * a third party's package default-exports one of these (see README, "Writing a provider").
 */
export interface ProviderType<C = unknown> {
  readonly type: string;
  readonly configSchema: z.ZodType<C>;
  create(name: string, config: C, context: ProviderContext): Provider;
}

export function defineProviderType<S extends z.ZodType>(def: {
  type: string;
  configSchema: S;
  create(name: string, config: z.output<S>, context: ProviderContext): Provider;
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

  constructor(
    kind: UpstreamErrorKind,
    message: string,
    options: { status?: number | null; retryAfterMs?: number | null; upstreamBody?: unknown; cause?: unknown } = {},
  ) {
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

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
  type JsonObject,
  type LanguageModelProvider,
  type Provider,
  type ProviderContext,
} from '../../core/gateway/provider.ts';
import { cancellationOf } from '../../core/gateway/call-options.ts';
import { UpstreamHttpClient } from '../http/upstream-client.ts';
import { errorFromInBand, kindForErrorType, protocolError, type ErrorContext } from '../http/upstream-errors.ts';
import { estimateChatInputTokens, estimateEmbeddingInputTokens, estimateOutputTokens } from '../token-estimate.ts';
import type { OpenAIConfig } from './config.ts';
import { openAIChatEvents } from './chat-stream.ts';
import { usageFromOpenAI, usageFromOpenAIEmbeddings } from './usage.ts';

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

/** Any OpenAI-compatible chat-completions API, Azure OpenAI included. */
export class OpenAIProvider implements Provider, LanguageModelProvider, EmbeddingProvider {
  readonly language: LanguageModelProvider = this;
  readonly embeddings: EmbeddingProvider = this;
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
  }

  async chat(body: ChatRequestBody, options: CallOptions): Promise<ChatResult> {
    const response = await this.http.postJson<ChatCompletion & { error?: unknown }>({
      path: this.pathFor('chat/completions', body.model),
      body: withoutStreamFields(body),
      headers: this.headers(options),
      signal: cancellationOf(options),
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
    return { completion, usage };
  }

  async *chatStream(body: ChatRequestBody, options: CallOptions): AsyncIterable<ChatStreamEvent> {
    const upstreamBody: ChatRequestBody = { ...body, stream: true };
    if (this.config.includeStreamUsage) {
      upstreamBody.stream_options = { ...(body.stream_options ?? {}), include_usage: true };
    }
    const response = await this.http.postStream({
      path: this.pathFor('chat/completions', body.model),
      body: upstreamBody,
      headers: this.headers(options),
      signal: cancellationOf(options),
    });
    yield* openAIChatEvents(response.body, body, this.errors);
  }

  async embed(body: EmbeddingsRequestBody, options: CallOptions): Promise<EmbeddingsResult> {
    const response = await this.http.postJson<JsonObject>({
      path: this.pathFor('embeddings', body.model),
      body,
      headers: this.headers(options),
      signal: cancellationOf(options),
    });
    const result = response.body;
    if (result === null || typeof result !== 'object' || !Array.isArray(result['data'])) {
      throw protocolError(this.errors, 'upstream answered embeddings without data', result);
    }
    const usage = usageFromOpenAIEmbeddings(result['usage']) ?? estimatedUsage(estimateEmbeddingInputTokens(body.input), 0);
    return { body: result, usage };
  }

  async close(): Promise<void> {
    await this.http.close();
  }

  private pathFor(operation: 'chat/completions' | 'embeddings', model: string): string {
    const azure = this.config.azure;
    if (!azure) return `/${operation}`;
    return `/openai/deployments/${encodeURIComponent(model)}/${operation}?api-version=${encodeURIComponent(azure.apiVersion)}`;
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

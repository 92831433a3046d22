import {
  estimatedUsage,
  UpstreamError,
  type CallOptions,
  type ChatRequestBody,
  type ChatResult,
  type ChatStreamEvent,
  type JsonObject,
  type LanguageModelProvider,
  type Provider,
  type ProviderContext,
} from '../../core/gateway/provider.ts';
import { UpstreamHttpClient } from '../http/upstream-client.ts';
import { readSse } from '../http/sse-reader.ts';
import { errorFromInBand, kindForErrorType, protocolError, toUpstreamError, type ErrorContext } from '../http/upstream-errors.ts';
import { redactText } from '../http/redact.ts';
import { toOpenAIUsage } from '../usage-format.ts';
import { estimateChatInputTokens, estimateOutputTokens, tokensFromUtf8Bytes } from '../token-estimate.ts';
import type { AnthropicConfig } from './config.ts';
import { toAnthropicRequest, UnconvertibleRequestError } from './request-conversion.ts';
import { fromAnthropicMessage, type AnthropicMessageResponse } from './response-conversion.ts';
import { AnthropicStreamTranslator } from './stream-translator.ts';

/** Anthropic's Messages API behind the chat-completions shape, both ways. */
export class AnthropicProvider implements Provider, LanguageModelProvider {
  readonly language: LanguageModelProvider = this;
  private readonly http: UpstreamHttpClient;
  private readonly errors: ErrorContext;
  private readonly messagesPath: string;

  constructor(
    readonly name: string,
    private readonly config: AnthropicConfig,
    context: ProviderContext,
  ) {
    if (!config.allowPrivateNetwork) context.checkOutboundUrl(config.baseUrl);
    this.errors = { label: name, secrets: [config.apiKey] };
    this.messagesPath = /\/v1\/?$/.test(new URL(config.baseUrl).pathname) ? '/messages' : '/v1/messages';
    this.http = new UpstreamHttpClient({
      baseUrl: config.baseUrl,
      timeouts: context.timeouts,
      label: name,
      secrets: [config.apiKey],
      allowPrivateNetwork: config.allowPrivateNetwork,
    });
  }

  async chat(body: ChatRequestBody, options: CallOptions): Promise<ChatResult> {
    const response = await this.http.postJson<AnthropicMessageResponse>({
      path: this.messagesPath,
      body: this.convert(body),
      headers: this.headers(),
      call: options,
    });
    const message = response.body;
    if (message === null || typeof message !== 'object' || !Array.isArray(message.content)) {
      throw protocolError(this.errors, 'upstream answered without message content', message);
    }
    const result = fromAnthropicMessage(message, Math.floor(Date.now() / 1000));
    if (message.usage === undefined) {
      const reply = result.completion.choices[0]?.message;
      const output = {
        text: typeof reply?.content === 'string' ? reply.content : '',
        toolCalls: (reply?.tool_calls ?? []).map((call) => call.function),
      };
      result.usage = { ...result.usage, inputTokens: estimateChatInputTokens(body), outputTokens: estimateOutputTokens(output), estimated: true };
      result.completion.usage = toOpenAIUsage(result.usage);
    }
    return result;
  }

  async *chatStream(body: ChatRequestBody, options: CallOptions): AsyncIterable<ChatStreamEvent> {
    const response = await this.http.postStream({
      path: this.messagesPath,
      body: { ...this.convert(body), stream: true },
      headers: this.headers(),
      call: options,
    });
    const translator = new AnthropicStreamTranslator(body.model);
    try {
      for await (const event of readSse(response.body)) {
        // read on past message_stop so the body ends cleanly and the socket is reused
        if (translator.stopped) continue;
        let data: JsonObject & { type?: string; error?: { type?: unknown } };
        try {
          data = JSON.parse(event.data) as typeof data;
        } catch {
          throw protocolError(this.errors, 'upstream sent a stream event that is not JSON', event.data.slice(0, 2000));
        }
        if (event.event === 'error' || data.type === 'error') {
          throw errorFromInBand(this.errors, kindForErrorType(data.error?.type), data);
        }
        for (const chunk of translator.translate(data as Parameters<AnthropicStreamTranslator['translate']>[0])) {
          yield { type: 'chunk', chunk };
        }
      }
    } catch (error) {
      if (!translator.stopped) throw toUpstreamError(this.errors, error);
    }
    if (!translator.finished) throw protocolError(this.errors, 'the stream ended before the message was finished');
    yield {
      type: 'usage',
      usage: translator.usage() ?? estimatedUsage(estimateChatInputTokens(body), tokensFromUtf8Bytes(translator.outputBytes)),
    };
  }

  async close(): Promise<void> {
    await this.http.close();
  }

  private convert(body: ChatRequestBody): JsonObject {
    try {
      return toAnthropicRequest(body, this.config.defaultMaxTokens);
    } catch (error) {
      if (error instanceof UnconvertibleRequestError) {
        throw new UpstreamError('client', redactText(`${this.name}: ${error.message}`, this.errors.secrets), { cause: error });
      }
      throw error;
    }
  }

  private headers(): Record<string, string> {
    return { ...this.config.headers, 'x-api-key': this.config.apiKey, 'anthropic-version': this.config.version };
  }
}

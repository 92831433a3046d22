import { setTimeout as delay } from 'node:timers/promises';
import {
  UpstreamError,
  type CallOptions,
  type ChatCompletion,
  type ChatCompletionChunk,
  type ChatMessage,
  type ChatRequestBody,
  type ChatResult,
  type ChatStreamEvent,
  type EmbeddingsRequestBody,
  type EmbeddingsResult,
  type EmbeddingProvider,
  type JsonObject,
  type LanguageModelProvider,
  type Provider,
  type Usage,
} from '../../core/gateway/provider.ts';
import { estimateChatInputTokens, estimateEmbeddingInputTokens, estimateOutputTokens } from '../token-estimate.ts';
import { toOpenAIUsage } from '../usage-format.ts';
import type { MockConfig } from './config.ts';
import { embeddingInputs, embeddingItem, mockEmbedding } from './mock-embeddings.ts';
import { planMockReply, stableHash, streamPieces, type MockReply } from './mock-reply.ts';

function usageOf(body: ChatRequestBody, reply: MockReply): Usage {
  return {
    inputTokens: estimateChatInputTokens(body),
    cachedInputTokens: 0,
    cacheWriteTokens: 0,
    outputTokens: estimateOutputTokens({ text: reply.text ?? '', toolCalls: reply.toolCall ? [reply.toolCall] : [] }),
    reasoningTokens: 0,
    // the mock's counts are its own truth, like a real model's tokenizer
    estimated: false,
  };
}

/**
 * A development provider: in-process, no network, deterministic. It behaves like a small model
 * (echoes part of the last user message, calls tools when told to, honours max_tokens, streams
 * word by word) so the whole gateway can run and be tested offline. Not for production traffic.
 */
export class MockProvider implements Provider, LanguageModelProvider, EmbeddingProvider {
  readonly language: LanguageModelProvider = this;
  readonly embeddings: EmbeddingProvider = this;

  constructor(
    readonly name: string,
    private readonly config: MockConfig,
  ) {}

  async chat(body: ChatRequestBody, options: CallOptions): Promise<ChatResult> {
    await this.wait(this.config.latencyMs, options.signal);
    const reply = planMockReply(body);
    const usage = usageOf(body, reply);
    const message: ChatMessage & { role: 'assistant' } = { role: 'assistant', content: reply.text };
    if (reply.toolCall) {
      message.tool_calls = [{ id: reply.toolCall.id, type: 'function', function: { name: reply.toolCall.name, arguments: reply.toolCall.arguments } }];
    }
    const completion: ChatCompletion = {
      id: this.completionId(body),
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: body.model,
      choices: [{ index: 0, message, finish_reason: reply.finishReason, logprobs: null }],
      usage: toOpenAIUsage(usage),
    };
    return { completion, usage };
  }

  async *chatStream(body: ChatRequestBody, options: CallOptions): AsyncIterable<ChatStreamEvent> {
    await this.wait(this.config.latencyMs, options.signal);
    const reply = planMockReply(body);
    const id = this.completionId(body);
    const created = Math.floor(Date.now() / 1000);
    const chunk = (delta: JsonObject, finishReason: string | null = null): ChatStreamEvent => ({
      type: 'chunk',
      chunk: { id, object: 'chat.completion.chunk', created, model: body.model, choices: [{ index: 0, delta, finish_reason: finishReason }] } satisfies ChatCompletionChunk,
    });

    yield chunk({ role: 'assistant', content: '' });
    if (reply.toolCall) {
      await this.wait(this.config.chunkDelayMs, options.signal);
      yield chunk({ tool_calls: [{ index: 0, id: reply.toolCall.id, type: 'function', function: { name: reply.toolCall.name, arguments: '' } }] });
      await this.wait(this.config.chunkDelayMs, options.signal);
      yield chunk({ tool_calls: [{ index: 0, function: { arguments: reply.toolCall.arguments } }] });
    }
    for (const piece of streamPieces(reply.text ?? '')) {
      await this.wait(this.config.chunkDelayMs, options.signal);
      yield chunk({ content: piece });
    }
    yield chunk({}, reply.finishReason);
    yield { type: 'usage', usage: usageOf(body, reply) };
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

  async close(): Promise<void> {}

  private completionId(body: ChatRequestBody): string {
    return `chatcmpl-mock-${stableHash([body.model, body.messages]).slice(0, 24)}`;
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

import { compileBodySchema } from '../../core/kernel/compiled-schema.ts';
import type { ChatCompletionChunk, ChatMessage, ChatRequestBody } from '../../core/gateway/provider.ts';
import { chatRequestSchema } from './chat-request-schema.ts';

/**
 * A chat request whose shape was checked against chatRequestSchema: what the gateway reads
 * (model, messages, stream settings, output limits, tools) has its documented type; everything
 * else passes through to the provider untouched, so new OpenAI fields and provider-specific ones
 * keep working.
 */
export interface ParsedChatRequest {
  model: string;
  messages: ChatMessage[];
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean | null; [extra: string]: unknown } | null;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  tools?: ChatRequestBody['tools'];
  [extra: string]: unknown;
}

const checkChatRequest = compileBodySchema<ParsedChatRequest>(chatRequestSchema);

/**
 * Validated without parseInput's NUL scan: on the hot path that walk costs more than it is worth,
 * and the only place a prompt is stored (request_log_bodies) replaces NUL itself. Token counting
 * and the providers read the body after this, so they only ever see the documented shapes.
 */
export function parseChatRequest(body: unknown): ParsedChatRequest {
  return checkChatRequest(body);
}

/** The body a provider receives: the upstream model name, stream fields left to the provider. */
export function upstreamChatBody(request: ParsedChatRequest, upstreamModel: string): ChatRequestBody {
  const { stream: _stream, stream_options: _options, ...rest } = request;
  return { ...(rest as unknown as ChatRequestBody), model: upstreamModel };
}

/**
 * The commit point of a stream: the first chunk that carries something the client must see.
 * Role-only chunks and empty deltas are preamble and may still be replaced by another route's.
 */
export function carriesContent(chunk: ChatCompletionChunk): boolean {
  for (const choice of chunk.choices) {
    if (choice.finish_reason) return true;
    const delta = choice.delta as Record<string, unknown>;
    for (const field of ['content', 'refusal', 'reasoning_content', 'reasoning']) {
      const value = delta[field];
      if (typeof value === 'string' && value.length > 0) return true;
    }
    if (Array.isArray(delta['tool_calls']) && delta['tool_calls'].length > 0) return true;
    if (delta['function_call'] || delta['audio']) return true;
  }
  return false;
}

import { z } from 'zod';
import { validationError } from '../../core/operations.ts';
import type { ChatCompletionChunk, ChatRequestBody } from '../../core/provider.ts';

/**
 * What the gateway itself needs from a chat request. Everything else passes through to the
 * provider untouched, so new OpenAI fields and provider-specific ones keep working.
 */
const chatRequestSchema = z.looseObject({
  model: z.string().min(1),
  messages: z
    .array(z.looseObject({ role: z.enum(['system', 'developer', 'user', 'assistant', 'tool', 'function']) }))
    .min(1, 'messages must hold at least one message'),
  stream: z.boolean().nullable().optional(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullable().optional() }).nullable().optional(),
  max_tokens: z.number().int().positive().nullable().optional(),
  max_completion_tokens: z.number().int().positive().nullable().optional(),
});

export type ParsedChatRequest = z.output<typeof chatRequestSchema>;

/**
 * Validated without parseInput's NUL scan: on the hot path that walk costs more than it is worth,
 * and the only place a prompt is stored (request_log_bodies) replaces NUL itself.
 */
export function parseChatRequest(body: unknown): ParsedChatRequest {
  const result = chatRequestSchema.safeParse(body);
  if (!result.success) throw validationError(result.error, 'body');
  return result.data;
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

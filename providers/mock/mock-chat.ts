import type { ChatCompletion, ChatCompletionChunk, ChatMessage, ChatRequestBody, JsonObject, Usage } from '../../core/gateway/provider.ts';
import { estimateChatInputTokens, estimateOutputTokens } from '../token-estimate.ts';
import { toOpenAIUsage } from '../usage-format.ts';
import { tokenLogprobs } from './mock-logprobs.ts';
import { replyTokens, stableHash, type MockReply } from './mock-reply.ts';

/**
 * The mock's replies in OpenAI's chat-completions shapes, JSON and streamed, with every field
 * OpenAI's reference marks required present even when null (`refusal`, `logprobs`,
 * `system_fingerprint`).
 */
export interface ChatIdentity {
  id: string;
  created: number;
  model: string;
  systemFingerprint: string;
}

export function chatIdentity(body: ChatRequestBody, created: number): ChatIdentity {
  return {
    id: `chatcmpl-mock-${stableHash([body.model, body.messages, body['seed'] ?? null]).slice(0, 24)}`,
    created,
    model: body.model,
    // Changes only with the model, as OpenAI's changes only with the backend's configuration.
    systemFingerprint: `fp_${stableHash(['mock', body.model]).slice(0, 10)}`,
  };
}

export function chatUsage(body: ChatRequestBody, replies: readonly MockReply[]): Usage {
  let outputTokens = 0;
  for (const reply of replies) outputTokens += estimateOutputTokens({ text: reply.text ?? '', toolCalls: reply.toolCalls });
  // The mock's counts are its own truth, like a real model's tokenizer: not marked estimated.
  return { inputTokens: estimateChatInputTokens(body), cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens, reasoningTokens: 0, estimated: false };
}

/** How many alternatives per token the request wants, or null when it asks for no logprobs. */
function logprobsWanted(body: ChatRequestBody): number | null {
  if (body['logprobs'] !== true) return null;
  const top = body['top_logprobs'];
  return typeof top === 'number' && Number.isInteger(top) && top > 0 ? Math.min(top, 20) : 0;
}

function toolCallsOf(reply: MockReply): ChatMessage['tool_calls'] {
  return reply.toolCalls.map((call) => ({ id: call.id, type: 'function' as const, function: { name: call.name, arguments: call.arguments } }));
}

export function chatCompletion(body: ChatRequestBody, replies: readonly MockReply[], usage: Usage, identity: ChatIdentity): ChatCompletion {
  const top = logprobsWanted(body);
  return {
    id: identity.id,
    object: 'chat.completion',
    created: identity.created,
    model: identity.model,
    choices: replies.map((reply, index) => {
      const message: ChatMessage & { role: 'assistant' } = { role: 'assistant', content: reply.text, refusal: null, annotations: [] };
      if (reply.toolCalls.length > 0) message.tool_calls = toolCallsOf(reply);
      const logprobs = top === null ? null : { content: reply.text === null ? null : tokenLogprobs(replyTokens(reply.text), top), refusal: null };
      return { index, message, logprobs, finish_reason: reply.finishReason };
    }),
    usage: toOpenAIUsage(usage),
    service_tier: 'default',
    system_fingerprint: identity.systemFingerprint,
  };
}

/**
 * The chunks of a stream: each choice's role chunk, then its tool-call deltas (each call by its
 * index, name first, arguments in pieces) or its text token by token with that token's logprobs,
 * the choices interleaved one chunk each in turn as OpenAI sends `n` choices, then each choice's
 * finish chunk. Usage is not a chunk here: the caller reports it beside the stream.
 */
export function chatChunks(body: ChatRequestBody, replies: readonly MockReply[], identity: ChatIdentity): ChatCompletionChunk[] {
  const top = logprobsWanted(body);
  const chunk = (index: number, delta: JsonObject, logprobs: unknown = null, finishReason: string | null = null): ChatCompletionChunk => ({
    id: identity.id,
    object: 'chat.completion.chunk',
    created: identity.created,
    model: identity.model,
    service_tier: 'default',
    system_fingerprint: identity.systemFingerprint,
    choices: [{ index, delta, logprobs, finish_reason: finishReason }],
  });

  const perChoice = replies.map((reply, index) => {
    const deltas: ChatCompletionChunk[] = [chunk(index, { role: 'assistant', content: reply.text === null ? null : '', refusal: null })];
    reply.toolCalls.forEach((call, callIndex) => {
      deltas.push(chunk(index, { tool_calls: [{ index: callIndex, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] }));
      for (const piece of replyTokens(call.arguments)) deltas.push(chunk(index, { tool_calls: [{ index: callIndex, function: { arguments: piece } }] }));
    });
    const tokens = replyTokens(reply.text ?? '');
    const logprobs = top === null ? null : tokenLogprobs(tokens, top);
    tokens.forEach((token, position) => {
      deltas.push(chunk(index, { content: token }, logprobs === null ? null : { content: [logprobs[position]], refusal: null }));
    });
    return deltas;
  });

  const chunks: ChatCompletionChunk[] = [];
  const longest = Math.max(...perChoice.map((deltas) => deltas.length));
  for (let step = 0; step < longest; step++) {
    for (const deltas of perChoice) if (step < deltas.length) chunks.push(deltas[step]!);
  }
  replies.forEach((reply, index) => {
    chunks.push(chunk(index, {}, null, reply.finishReason));
  });
  return chunks;
}

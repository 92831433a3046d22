import type { JsonObject, Usage } from '../core/gateway/provider.ts';

/** Normalised usage in OpenAI's wire shape, for completions a provider builds itself. */
export function toOpenAIUsage(usage: Usage): JsonObject {
  return {
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: usage.inputTokens + usage.outputTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedInputTokens },
    completion_tokens_details: { reasoning_tokens: usage.reasoningTokens },
  };
}

import type { Usage } from '../../core/gateway/provider.ts';

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.round(value) : 0;
}

function field(record: unknown, key: string): unknown {
  return record !== null && typeof record === 'object' ? (record as Record<string, unknown>)[key] : undefined;
}

/**
 * OpenAI-style usage → normalised. OpenAI's prompt_tokens already include the cached ones and
 * completion_tokens the reasoning ones, which is our convention too. DeepSeek-style
 * `prompt_cache_hit_tokens` is read when the OpenAI detail is absent. Null when there is no count.
 */
export function usageFromOpenAI(raw: unknown): Usage | null {
  if (raw === null || typeof raw !== 'object') return null;
  const prompt = field(raw, 'prompt_tokens') ?? field(raw, 'input_tokens');
  const completion = field(raw, 'completion_tokens') ?? field(raw, 'output_tokens');
  if (typeof prompt !== 'number' && typeof completion !== 'number') return null;
  const promptDetails = field(raw, 'prompt_tokens_details') ?? field(raw, 'input_tokens_details');
  const completionDetails = field(raw, 'completion_tokens_details') ?? field(raw, 'output_tokens_details');
  return {
    inputTokens: count(prompt),
    cachedInputTokens: count(field(promptDetails, 'cached_tokens') ?? field(raw, 'prompt_cache_hit_tokens')),
    cacheWriteTokens: 0,
    outputTokens: count(completion),
    reasoningTokens: count(field(completionDetails, 'reasoning_tokens')),
    estimated: false,
  };
}

/** Embeddings report only prompt tokens. */
export function usageFromOpenAIEmbeddings(raw: unknown): Usage | null {
  const prompt = field(raw, 'prompt_tokens') ?? field(raw, 'total_tokens');
  if (typeof prompt !== 'number') return null;
  return { inputTokens: count(prompt), cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0, estimated: false };
}

import type { Usage } from '../../core/gateway/provider.ts';

/**
 * Anthropic's Messages API words for what the chat-completions shape says otherwise, both ways:
 * the provider reads them (Anthropic → OpenAI) and the `/v1/messages` route writes them
 * (OpenAI → Anthropic), from these one tables.
 */

/**
 * Anthropic `stop_reason` → OpenAI `finish_reason`. Several stop reasons share a finish reason;
 * the first row naming a finish reason is what that finish reason becomes the other way.
 */
const STOP_REASONS: ReadonlyArray<readonly [stopReason: string, finishReason: string]> = [
  ['end_turn', 'stop'],
  ['stop_sequence', 'stop'],
  ['pause_turn', 'stop'],
  ['max_tokens', 'length'],
  ['model_context_window_exceeded', 'length'],
  ['tool_use', 'tool_calls'],
  ['refusal', 'content_filter'],
];

const FINISH_BY_STOP = new Map(STOP_REASONS);
const STOP_BY_FINISH = new Map(STOP_REASONS.toReversed().map(([stop, finish]) => [finish, stop]));
// OpenAI's legacy single function call ends a turn as a tool call does.
STOP_BY_FINISH.set('function_call', 'tool_use');

export function finishReasonFromStop(stopReason: string | null | undefined): string | null {
  if (stopReason === null || stopReason === undefined) return null;
  // A stop reason added after this was written ended the turn some other way.
  return FINISH_BY_STOP.get(stopReason) ?? 'stop';
}

/** An upstream that never said why it stopped, or said something unknown, ended its turn. */
export function stopReasonFromFinish(finishReason: string | null | undefined): string {
  return (finishReason && STOP_BY_FINISH.get(finishReason)) || 'end_turn';
}

export interface AnthropicUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
}

const count = (value: number | null | undefined) => (typeof value === 'number' && value > 0 ? value : 0);

/**
 * Anthropic reports input_tokens WITHOUT the cached part; our inputTokens includes it (OpenAI's
 * convention), so cache reads and writes are added back and also named separately.
 */
export function usageFromAnthropic(usage: AnthropicUsage): Usage {
  const cacheRead = count(usage.cache_read_input_tokens);
  const cacheWrite = count(usage.cache_creation_input_tokens);
  return {
    inputTokens: count(usage.input_tokens) + cacheRead + cacheWrite,
    cachedInputTokens: cacheRead,
    cacheWriteTokens: cacheWrite,
    outputTokens: count(usage.output_tokens),
    reasoningTokens: 0,
    estimated: false,
  };
}

/** The inverse of usageFromAnthropic: cache reads and writes taken back out of input_tokens. */
export function usageToAnthropic(usage: Usage): Required<{ [K in keyof AnthropicUsage]: number }> {
  return {
    input_tokens: Math.max(0, usage.inputTokens - usage.cachedInputTokens - usage.cacheWriteTokens),
    output_tokens: usage.outputTokens,
    cache_creation_input_tokens: usage.cacheWriteTokens,
    cache_read_input_tokens: usage.cachedInputTokens,
  };
}

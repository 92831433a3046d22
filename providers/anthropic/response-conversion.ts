import type { ChatCompletion, ChatMessage, Usage } from '../../core/gateway/provider.ts';
import { toOpenAIUsage } from '../usage-format.ts';

export interface AnthropicUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
}

export interface AnthropicContentBlock {
  type: string;
  text?: string;
  thinking?: string;
  id?: string;
  name?: string;
  input?: unknown;
}

export interface AnthropicMessageResponse {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: AnthropicContentBlock[];
  stop_reason: string | null;
  stop_sequence?: string | null;
  usage?: AnthropicUsage;
}

export function finishReasonFromStop(stopReason: string | null | undefined): string | null {
  switch (stopReason) {
    case null:
    case undefined:
      return null;
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'refusal':
      return 'content_filter';
    default:
      // end_turn, stop_sequence, pause_turn
      return 'stop';
  }
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

/** Messages API response → chat completion, with its normalised usage. */
export function fromAnthropicMessage(message: AnthropicMessageResponse, created: number): { completion: ChatCompletion; usage: Usage } {
  let text = '';
  let reasoning = '';
  const toolCalls: NonNullable<ChatMessage['tool_calls']> = [];
  for (const block of message.content) {
    if (block.type === 'text' && typeof block.text === 'string') text += block.text;
    else if (block.type === 'thinking' && typeof block.thinking === 'string') reasoning += block.thinking;
    else if (block.type === 'tool_use') {
      toolCalls.push({ id: block.id ?? '', type: 'function', function: { name: block.name ?? '', arguments: JSON.stringify(block.input ?? {}) } });
    }
  }
  const assistant: ChatMessage & { role: 'assistant' } = { role: 'assistant', content: text === '' && toolCalls.length > 0 ? null : text };
  if (toolCalls.length > 0) assistant.tool_calls = toolCalls;
  if (reasoning !== '') assistant['reasoning_content'] = reasoning;

  const usage = usageFromAnthropic(message.usage ?? {});
  return {
    completion: {
      id: message.id,
      object: 'chat.completion',
      created,
      model: message.model,
      choices: [{ index: 0, message: assistant, finish_reason: finishReasonFromStop(message.stop_reason), logprobs: null }],
      usage: toOpenAIUsage(usage),
    },
    usage,
  };
}

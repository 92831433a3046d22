import type { ChatCompletion, ChatMessage, Usage } from '../../core/gateway/provider.ts';
import { toOpenAIUsage } from '../usage-format.ts';
import { finishReasonFromStop, usageFromAnthropic, type AnthropicUsage } from './messages-vocabulary.ts';

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
  // OpenAI's reference marks `refusal` required (null unless the model refused): typed clients read it.
  const assistant: ChatMessage & { role: 'assistant' } = { role: 'assistant', content: text === '' && toolCalls.length > 0 ? null : text, refusal: null };
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

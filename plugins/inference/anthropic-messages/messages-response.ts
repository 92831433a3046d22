import type { ChatCompletion, ChatMessage, JsonObject, Usage } from '../../../core/gateway/provider.ts';
import { stopReasonFromFinish, usageToAnthropic } from '../../../providers/anthropic/messages-vocabulary.ts';

export interface AnthropicTextBlock {
  type: 'text';
  text: string;
}

export interface AnthropicToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: JsonObject;
}

/** Anthropic's Message, as its API answers a non-streamed call. */
export interface AnthropicMessage {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: Array<AnthropicTextBlock | AnthropicToolUseBlock>;
  stop_reason: string;
  stop_sequence: string | null;
  usage: ReturnType<typeof usageToAnthropic>;
}

/** Anthropic's ids start with msg_; an upstream's own msg_ id is kept as it is. */
export function messageId(completionId: string): string {
  return completionId.startsWith('msg_') ? completionId : `msg_${completionId}`;
}

/** Tool arguments that are not a JSON object (a model's malformed call) become an empty input rather than a failed answer. */
export function toolInput(args: string): JsonObject {
  try {
    const parsed: unknown = JSON.parse(args === '' ? '{}' : args);
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as JsonObject) : {};
  } catch {
    return {};
  }
}

/**
 * Why the turn ended, and with which stop sequence. OpenAI's finish reason `stop` does not say
 * whether a stop sequence matched; upstreams that report the matched one as the choice's
 * `stop_reason` (vLLM and servers like it) give `stop_sequence`, every other stop is `end_turn`.
 */
export function stopOf(finishReason: string | null | undefined, matched: unknown, stopSequences: readonly string[]): { stop_reason: string; stop_sequence: string | null } {
  if (finishReason === 'stop' && typeof matched === 'string' && stopSequences.includes(matched)) {
    return { stop_reason: 'stop_sequence', stop_sequence: matched };
  }
  return { stop_reason: stopReasonFromFinish(finishReason), stop_sequence: null };
}

/** The gateway's chat completion (first choice) and its usage → Anthropic's Message, named with the public model id. */
export function toAnthropicMessage(completion: ChatCompletion, usage: Usage, model: string, stopSequences: readonly string[]): AnthropicMessage {
  const choice = completion.choices[0];
  const message: Partial<ChatMessage> = choice?.message ?? {};
  const content: AnthropicMessage['content'] = [];
  const text = typeof message.content === 'string' ? message.content : '';
  if (text !== '') content.push({ type: 'text', text });
  // A model's refusal is what it said: Anthropic answers it as text with stop_reason refusal.
  const refusal = typeof message['refusal'] === 'string' && message['refusal'] !== '' ? message['refusal'] : null;
  if (refusal !== null) content.push({ type: 'text', text: refusal });
  for (const call of message.tool_calls ?? []) {
    content.push({ type: 'tool_use', id: call.id, name: call.function.name, input: toolInput(call.function.arguments) });
  }
  const stop = refusal !== null ? { stop_reason: 'refusal', stop_sequence: null } : stopOf(choice?.finish_reason, (choice as JsonObject | undefined)?.['stop_reason'], stopSequences);
  return { id: messageId(completion.id), type: 'message', role: 'assistant', model, content, ...stop, usage: usageToAnthropic(usage) };
}

import type { ChatCompletion, ChatMessage, JsonObject, Usage } from '../../../core/gateway/provider.ts';
import { stopReasonFromFinish, usageToAnthropic } from '../../../providers/anthropic/messages-vocabulary.ts';

/*
 * Anthropic's API reference (and its SDK's types) mark some fields required though they are null
 * whenever a feature is not in use (citations, containers, server tools…): they are always sent,
 * as null, so typed clients find every field they are promised.
 */

export interface AnthropicTextBlock {
  type: 'text';
  text: string;
  citations: null;
}

export interface AnthropicToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: JsonObject;
  /** The model called the tool itself (not a server tool's code). */
  caller: { type: 'direct' };
}

export const textBlock = (text: string): AnthropicTextBlock => ({ type: 'text', text, citations: null });

export const toolUseBlock = (id: string, name: string, input: JsonObject): AnthropicToolUseBlock => ({ type: 'tool_use', id, name, input, caller: { type: 'direct' } });

/** A stream's final usage (message_delta's): the token counts, and the fields of features this gateway does not offer, null. */
export function deltaUsageBody(usage: Usage) {
  return { ...usageToAnthropic(usage), output_tokens_details: null, server_tool_use: null };
}

/** A Message's usage: message_delta's, and more fields of features this gateway does not offer. */
export function usageBody(usage: Usage) {
  return {
    ...deltaUsageBody(usage),
    cache_creation: null,
    inference_geo: null,
    service_tier: null,
    speed: null,
  };
}

/** The fields of a Message (and of a stream's message_delta) that are null unless a feature this gateway does not offer is used. */
export const UNUSED_MESSAGE_FIELDS = { container: null, stop_details: null } as const;

/** Anthropic's Message, as its API answers a non-streamed call. */
export interface AnthropicMessage {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: Array<AnthropicTextBlock | AnthropicToolUseBlock>;
  stop_reason: string;
  stop_sequence: string | null;
  container: null;
  diagnostics: null;
  stop_details: null;
  usage: ReturnType<typeof usageBody>;
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
  if (text !== '') content.push(textBlock(text));
  // A model's refusal is what it said: Anthropic answers it as text with stop_reason refusal.
  const refusal = typeof message['refusal'] === 'string' && message['refusal'] !== '' ? message['refusal'] : null;
  if (refusal !== null) content.push(textBlock(refusal));
  for (const call of message.tool_calls ?? []) {
    content.push(toolUseBlock(call.id, call.function.name, toolInput(call.function.arguments)));
  }
  const stop = refusal !== null ? { stop_reason: 'refusal', stop_sequence: null } : stopOf(choice?.finish_reason, (choice as JsonObject | undefined)?.['stop_reason'], stopSequences);
  return {
    id: messageId(completion.id),
    type: 'message',
    role: 'assistant',
    model,
    content,
    ...stop,
    ...UNUSED_MESSAGE_FIELDS,
    diagnostics: null,
    usage: usageBody(usage),
  };
}

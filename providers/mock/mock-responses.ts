import type { ChatMessage, ChatRequestBody, JsonObject, ResponsesRequestBody, ResponsesUsage } from '../../core/gateway/provider.ts';
import { estimateChatInputTokens, estimateOutputTokens } from '../token-estimate.ts';
import { messageText, planMockReplies, replyTokens, snippet, stableHash, type MockReply } from './mock-reply.ts';

/**
 * The OpenAI Responses API served by the mock: the request is read as the chat request it amounts
 * to (instructions, input items, function tools, `text.format`, `max_output_tokens`), answered by
 * the same reply planner as chat, and shaped as a Responses API body or its event sequence. A
 * `web_search` tool is simulated: a question with the tool available runs one "search" (a
 * `web_search_call` item) before the answer, which cites one example.com page.
 */

function isRecord(value: unknown): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** `web_search`, `web_search_preview` and their dated variants (`web_search_2025_08_26`). */
const WEB_SEARCH_TOOL = /^web_search(?:_preview)?(?:_\d{4}_\d{2}_\d{2})?$/;
/** A question, or words asking to look something up: what makes a model reach for search. */
const ASKS_SOMETHING = /\?|\b(?:search|look\s+up|find|latest|news|current|today|who|what|when|where|which|how)\b/i;

/** Text of a Responses content value: a string or parts with `text` (input_text, output_text). */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter(isRecord)
    .map((part) => (typeof part['text'] === 'string' ? part['text'] : ''))
    .filter((text) => text !== '')
    .join(' ');
}

function inputMessages(body: ResponsesRequestBody): ChatMessage[] {
  const messages: ChatMessage[] = [];
  if (typeof body['instructions'] === 'string' && body['instructions'] !== '') messages.push({ role: 'developer', content: body['instructions'] });
  const input = body['input'];
  if (typeof input === 'string') return [...messages, { role: 'user', content: input }];
  for (const item of Array.isArray(input) ? input.filter(isRecord) : []) {
    if (item['type'] === 'function_call' && typeof item['name'] === 'string') {
      const call = { id: String(item['call_id']), type: 'function' as const, function: { name: item['name'], arguments: String(item['arguments'] ?? '') } };
      messages.push({ role: 'assistant', content: null, tool_calls: [call] });
    } else if (item['type'] === 'function_call_output') {
      messages.push({ role: 'tool', tool_call_id: String(item['call_id']), content: typeof item['output'] === 'string' ? item['output'] : JSON.stringify(item['output']) });
    } else if (typeof item['role'] === 'string' && ['user', 'assistant', 'system', 'developer'].includes(item['role'])) {
      messages.push({ role: item['role'] as ChatMessage['role'], content: contentText(item['content']) });
    }
  }
  return messages;
}

/** The chat request a Responses request amounts to, for the shared reply planner and token counts. */
export function chatRequestOf(body: ResponsesRequestBody): ChatRequestBody {
  const tools = (Array.isArray(body['tools']) ? body['tools'] : [])
    .filter(isRecord)
    .filter((tool) => tool['type'] === 'function' && typeof tool['name'] === 'string')
    .map((tool) => ({ type: 'function', function: { name: tool['name'], parameters: tool['parameters'] } }));
  const choice = body['tool_choice'];
  const format = isRecord(body['text']) && isRecord(body['text']['format']) ? body['text']['format'] : null;
  const chat: ChatRequestBody = { model: body.model, messages: inputMessages(body) };
  if (tools.length > 0) chat.tools = tools;
  if (isRecord(choice) && choice['type'] === 'function') chat.tool_choice = { type: 'function', function: { name: choice['name'] } };
  else if (typeof choice === 'string') chat.tool_choice = choice;
  if (format?.['type'] === 'json_schema') chat['response_format'] = { type: 'json_schema', json_schema: { name: format['name'], schema: format['schema'], strict: format['strict'] } };
  else if (format?.['type'] === 'json_object') chat['response_format'] = { type: 'json_object' };
  if (typeof body['max_output_tokens'] === 'number') chat.max_completion_tokens = body['max_output_tokens'];
  if (typeof body['parallel_tool_calls'] === 'boolean') chat['parallel_tool_calls'] = body['parallel_tool_calls'];
  return chat;
}

/** The query the mock searches for, or null when the request offers no search tool or asks nothing. */
function webSearchQuery(body: ResponsesRequestBody, chat: ChatRequestBody): string | null {
  const tools = Array.isArray(body['tools']) ? body['tools'].filter(isRecord) : [];
  if (!tools.some((tool) => typeof tool['type'] === 'string' && WEB_SEARCH_TOOL.test(tool['type']))) return null;
  const choice = body['tool_choice'];
  if (choice === 'none') return null;
  const forced = isRecord(choice) && typeof choice['type'] === 'string' && WEB_SEARCH_TOOL.test(choice['type']);
  const last = chat.messages.at(-1);
  const asked = last?.role === 'user' ? messageText(last) : '';
  if (!forced && !ASKS_SOMETHING.test(asked)) return null;
  const query = snippet(asked).replace(/[?!.\u2026\s]+$/u, '');
  return query === '' ? null : query;
}

/** Everything one call decided: the output items whole, and what they cost. */
export interface MockResponse {
  id: string;
  createdAt: number;
  status: 'completed' | 'incomplete';
  output: JsonObject[];
  usage: ResponsesUsage;
}

export function planMockResponse(body: ResponsesRequestBody, createdAt: number): MockResponse {
  const chat = chatRequestOf(body);
  const query = webSearchQuery(body, chat);
  const searched = query !== null && !isRecord(chat.tool_choice) && chat.tool_choice !== 'required' ? query : null;
  const reply: MockReply = planMockReplies(chat, searched === null ? {} : { searchedFor: searched })[0]!;
  const key = stableHash([body.model, body['input'] ?? null, body['instructions'] ?? null, body['tools'] ?? null]).slice(0, 32);
  const output: JsonObject[] = [];
  // A model answering with a function call has not searched: the search comes with a text answer.
  if (searched !== null && reply.toolCalls.length === 0) {
    output.push({ id: `ws_${key}`, type: 'web_search_call', status: 'completed', action: { type: 'search', query: searched } });
  }
  for (const call of reply.toolCalls) {
    output.push({ id: `fc_${stableHash([key, call.id]).slice(0, 32)}`, type: 'function_call', status: 'completed', call_id: call.id, name: call.name, arguments: call.arguments });
  }
  const status = reply.finishReason === 'length' ? 'incomplete' : 'completed';
  if (reply.text !== null) {
    const isJson = chat['response_format'] !== undefined;
    const annotations = searched !== null && !isJson ? [searchCitation(reply.text, searched)].filter((citation) => citation !== null) : [];
    output.push({ id: `msg_${key}`, type: 'message', status, role: 'assistant', content: [{ type: 'output_text', text: reply.text, annotations, logprobs: [] }] });
  }
  const outputTokens = estimateOutputTokens({ text: reply.text ?? '', toolCalls: reply.toolCalls });
  const webSearches = output.filter((item) => item['type'] === 'web_search_call').length;
  return {
    id: `resp_${key}`,
    createdAt,
    status,
    output,
    usage: {
      tokens: { inputTokens: estimateChatInputTokens(chat), cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens, reasoningTokens: 0, estimated: false },
      webSearches,
    },
  };
}

/** A `url_citation` over the "example.com" the search answer names (absent if truncation cut it). */
function searchCitation(text: string, query: string): JsonObject | null {
  const start = text.indexOf('example.com');
  if (start < 0) return null;
  return {
    type: 'url_citation',
    start_index: start,
    end_index: start + 'example.com'.length,
    url: `https://example.com/search?q=${encodeURIComponent(query)}`,
    title: `Results for ${query}`,
  };
}

/** OpenAI's Responses usage object. */
function responsesUsageBody(usage: ResponsesUsage): JsonObject {
  const { inputTokens, cachedInputTokens, outputTokens, reasoningTokens } = usage.tokens;
  return {
    input_tokens: inputTokens,
    input_tokens_details: { cached_tokens: cachedInputTokens },
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: reasoningTokens },
    total_tokens: inputTokens + outputTokens,
  };
}

/** The response object, echoing the request's settings as OpenAI does; `inProgress` for the stream's opening events. */
export function responseBody(body: ResponsesRequestBody, response: MockResponse, inProgress = false): JsonObject {
  const setting = (name: string, fallback: unknown): unknown => body[name] ?? fallback;
  return {
    id: response.id,
    object: 'response',
    created_at: response.createdAt,
    status: inProgress ? 'in_progress' : response.status,
    background: false,
    error: null,
    incomplete_details: !inProgress && response.status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: setting('instructions', null),
    max_output_tokens: setting('max_output_tokens', null),
    max_tool_calls: setting('max_tool_calls', null),
    model: body.model,
    output: inProgress ? [] : response.output,
    parallel_tool_calls: setting('parallel_tool_calls', true),
    previous_response_id: setting('previous_response_id', null),
    reasoning: { effort: null, summary: null },
    service_tier: 'default',
    store: setting('store', true),
    temperature: setting('temperature', 1),
    text: setting('text', { format: { type: 'text' } }),
    tool_choice: setting('tool_choice', 'auto'),
    tools: setting('tools', []),
    top_p: setting('top_p', 1),
    truncation: setting('truncation', 'disabled'),
    usage: inProgress ? null : responsesUsageBody(response.usage),
    user: setting('user', null),
    metadata: setting('metadata', {}),
  };
}

/**
 * The streaming events of a response, in OpenAI's order, numbered by `sequence_number`:
 * created, in_progress, then per output item its added event, its own progress events (search
 * steps, argument deltas, or content part and text deltas) and its done event, then completed
 * (or incomplete when `max_output_tokens` cut the answer).
 */
export function responseEvents(body: ResponsesRequestBody, response: MockResponse): JsonObject[] {
  const events: JsonObject[] = [];
  const emit = (type: string, fields: JsonObject) => events.push({ type, sequence_number: events.length, ...fields });
  emit('response.created', { response: responseBody(body, response, true) });
  emit('response.in_progress', { response: responseBody(body, response, true) });
  response.output.forEach((item, output_index) => {
    const item_id = item['id'];
    if (item['type'] === 'web_search_call') {
      emit('response.output_item.added', { output_index, item: { ...item, status: 'in_progress' } });
      for (const step of ['in_progress', 'searching', 'completed']) emit(`response.web_search_call.${step}`, { output_index, item_id });
    } else if (item['type'] === 'function_call') {
      emit('response.output_item.added', { output_index, item: { ...item, status: 'in_progress', arguments: '' } });
      for (const delta of replyTokens(String(item['arguments']))) emit('response.function_call_arguments.delta', { item_id, output_index, delta });
      emit('response.function_call_arguments.done', { item_id, output_index, name: item['name'], arguments: item['arguments'] });
    } else {
      const part = (item['content'] as JsonObject[])[0]!;
      const text = String(part['text']);
      emit('response.output_item.added', { output_index, item: { ...item, status: 'in_progress', content: [] } });
      emit('response.content_part.added', { item_id, output_index, content_index: 0, part: { type: 'output_text', text: '', annotations: [], logprobs: [] } });
      for (const delta of replyTokens(text)) emit('response.output_text.delta', { item_id, output_index, content_index: 0, delta, logprobs: [] });
      emit('response.output_text.done', { item_id, output_index, content_index: 0, text, logprobs: [] });
      (part['annotations'] as JsonObject[]).forEach((annotation, annotation_index) => {
        emit('response.output_text.annotation.added', { item_id, output_index, content_index: 0, annotation_index, annotation });
      });
      emit('response.content_part.done', { item_id, output_index, content_index: 0, part });
    }
    emit('response.output_item.done', { output_index, item });
  });
  emit(response.status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response: responseBody(body, response) });
  return events;
}

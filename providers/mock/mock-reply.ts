import type { ChatMessage, ChatRequestBody, JsonObject } from '../../core/gateway/provider.ts';
import { estimateTokens } from '../token-estimate.ts';
import { MockRandom, stableHash } from './mock-random.ts';
import { schemaValue } from './mock-schema-value.ts';

export { stableHash } from './mock-random.ts';

export interface MockToolCall {
  id: string;
  name: string;
  arguments: string;
}

/** One choice the mock model decided on, before it is shaped as a completion, a stream or a response. */
export interface MockReply {
  /** Null when the answer is tool calls. */
  text: string | null;
  toolCalls: MockToolCall[];
  finishReason: 'stop' | 'length' | 'tool_calls';
}

function isRecord(value: unknown): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

export function messageText(message: ChatMessage | undefined): string {
  const content = message?.content;
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part) => (typeof part['text'] === 'string' ? part['text'] : ''))
    .filter((text) => text !== '')
    .join(' ');
}

/** The first dozen words, on one line: what the mock "heard". */
export function snippet(text: string): string {
  const words = text
    .trim()
    .split(/\s+/)
    .filter((word) => word !== '');
  let short = words.slice(0, 12).join(' ');
  let clipped = words.length > 12;
  if (short.length > 80) {
    short = short.slice(0, 80).trimEnd();
    clipped = true;
  }
  return clipped ? `${short}…` : short;
}

interface FunctionTool {
  name: string;
  parameters: JsonObject | undefined;
}

function functionTools(body: ChatRequestBody): FunctionTool[] {
  const tools: FunctionTool[] = [];
  for (const tool of body.tools ?? []) {
    const fn = tool['function'];
    if (tool['type'] === 'function' && isRecord(fn) && typeof fn['name'] === 'string') {
      tools.push({ name: fn['name'], parameters: isRecord(fn['parameters']) ? fn['parameters'] : undefined });
    }
  }
  return tools;
}

/** "call get_weather", "call the `lookup` tool": the user asking for a tool by name. */
const CALL_REQUEST = /\bcall\s+(?:the\s+)?[`'"]?([A-Za-z_][\w.-]*)/i;
/** "call all tools", "call every tool", "call all of them". */
const CALL_ALL = /\bcall\s+(?:all|every|each)\b/i;

/**
 * The tools to call, as a model would: following tool_choice, else an explicit request in the last
 * user message. A request naming several tools ("call get_weather and get_time") calls each, in
 * the order named, in parallel; `parallel_tool_calls: false` keeps the first.
 */
function chooseTools(body: ChatRequestBody, tools: FunctionTool[]): FunctionTool[] {
  if (tools.length === 0) return [];
  const choice = body.tool_choice;
  if (choice === 'none') return [];
  if (isRecord(choice) && isRecord(choice['function']) && typeof choice['function']['name'] === 'string') {
    const named = choice['function']['name'];
    return [tools.find((tool) => tool.name === named) ?? { name: named, parameters: undefined }];
  }
  let chosen: FunctionTool[] = [];
  const last = body.messages.at(-1);
  if (last?.role === 'user') {
    const text = messageText(last);
    if (CALL_ALL.test(text)) chosen = tools;
    else if (CALL_REQUEST.test(text)) {
      const named = tools
        .map((tool) => ({ tool, at: text.search(new RegExp(`(?<![\\w.-])${tool.name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![\\w-])`)) }))
        .filter((found) => found.at >= 0)
        .sort((a, b) => a.at - b.at)
        .map((found) => found.tool);
      const asked = CALL_REQUEST.exec(text)?.[1];
      // The name right after "call" must be a tool: "call nothing_here … get_time" calls nothing.
      if (named.some((tool) => tool.name === asked)) chosen = named;
    }
  }
  if (chosen.length === 0 && choice === 'required') chosen = [tools[0]!];
  return body['parallel_tool_calls'] === false ? chosen.slice(0, 1) : chosen;
}

function lastUserMessage(messages: ChatMessage[]): ChatMessage | undefined {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]?.role === 'user') return messages[i];
  return undefined;
}

/** Closing sentences a seeded or additional choice picks from; the first is the unseeded reply's. */
const CLOSINGS = [
  'This is a deterministic reply from the mock model.',
  'The mock model answers the same way every time it is asked the same thing.',
  'No network was used to write this answer.',
  'This answer comes from the offline mock model.',
  'Ask again with the same seed to get this answer again.',
  'The mock model has nothing more to add.',
];

/** What shapes a reply beyond the request itself. */
export interface ReplyContext {
  /** The query of a web search the mock ran before answering (Responses API `web_search`). */
  searchedFor?: string;
}

function textReply(body: ChatRequestBody, closing: string, context: ReplyContext): string {
  if (context.searchedFor !== undefined) return `A web search for "${context.searchedFor}" found one page on example.com. ${closing}`;
  const last = body.messages.at(-1);
  if (last?.role === 'tool') {
    const call = body.messages.flatMap((message) => message.tool_calls ?? []).find((candidate) => candidate.id === last.tool_call_id);
    return `The ${call?.function.name ?? 'tool'} tool returned: "${snippet(messageText(last))}". That is the result you asked for.`;
  }
  const heard = snippet(messageText(lastUserMessage(body.messages)));
  if (heard === '') return 'Hello! This is the mock model. Ask me anything.';
  return `You said: "${heard}". ${closing}`;
}

/** The schema `response_format` asks the reply to follow, if any; json_object gets a one-field object. */
function requestedJson(body: ChatRequestBody): { schema: unknown; bare: boolean } | null {
  const format = body['response_format'];
  if (!isRecord(format)) return null;
  if (format['type'] === 'json_object') return { schema: { type: 'object', properties: { reply: { type: 'string' } }, required: ['reply'] }, bare: true };
  if (format['type'] === 'json_schema' && isRecord(format['json_schema'])) return { schema: format['json_schema']['schema'] ?? {}, bare: false };
  return null;
}

/** Cut at a word boundary so the estimated token count stays within the limit. */
function truncateToTokens(text: string, limit: number): string {
  let out = '';
  for (const word of text.match(/\S+\s*/g) ?? []) {
    if (estimateTokens((out + word).trimEnd()) > limit) break;
    out += word;
  }
  return out.trimEnd();
}

function stopSequences(body: ChatRequestBody): string[] {
  const stop = body.stop;
  if (typeof stop === 'string') return stop === '' ? [] : [stop];
  return Array.isArray(stop) ? stop.filter((sequence) => typeof sequence === 'string' && sequence !== '') : [];
}

/** The text before the first stop sequence, which (as with OpenAI) is not part of the reply. */
function cutAtStop(text: string, stops: string[]): string {
  let end = text.length;
  for (const stop of stops) {
    const at = text.indexOf(stop);
    if (at >= 0 && at < end) end = at;
  }
  return text.slice(0, end);
}

function planChoice(body: ChatRequestBody, index: number, context: ReplyContext): MockReply {
  const seed = typeof body['seed'] === 'number' ? body['seed'] : null;
  const random = new MockRandom(seed, index, body.messages, body.tools ?? null, body['response_format'] ?? null);
  const heard = snippet(messageText(lastUserMessage(body.messages)));

  const tools = chooseTools(body, functionTools(body));
  if (tools.length > 0) {
    const toolCalls = tools.map((tool, position) => ({
      id: `call_${stableHash([body.messages, tool.name, position, index, seed]).slice(0, 24)}`,
      name: tool.name,
      arguments: JSON.stringify(schemaValue(tool.parameters ?? { type: 'object', properties: {} }, { random, text: heard })),
    }));
    return { text: null, toolCalls, finishReason: 'tool_calls' };
  }

  const json = requestedJson(body);
  const closing = seed === null && index === 0 ? CLOSINGS[0]! : random.pick(CLOSINGS);
  // A bare JSON object carries the reply sentence; a schema's strings carry what the mock heard.
  const answer = json ? JSON.stringify(schemaValue(json.schema, { random, text: json.bare ? textReply(body, closing, context) : heard })) : textReply(body, closing, context);
  const full = cutAtStop(answer, stopSequences(body));
  const limit = body.max_completion_tokens ?? body.max_tokens;
  if (typeof limit === 'number' && limit >= 0 && estimateTokens(full) > limit) {
    return { text: truncateToTokens(full, limit), toolCalls: [], finishReason: 'length' };
  }
  return { text: full, toolCalls: [], finishReason: 'stop' };
}

/** The `n` choices of a request (1 when it does not ask), each decided independently. */
export function planMockReplies(body: ChatRequestBody, context: ReplyContext = {}): MockReply[] {
  const n = typeof body['n'] === 'number' && Number.isInteger(body['n']) && body['n'] > 1 ? body['n'] : 1;
  return Array.from({ length: n }, (_, index) => planChoice(body, index, context));
}

/**
 * The tokens of a reply as the mock counts them for streaming and logprobs: words and single
 * punctuation marks, each carrying its leading whitespace, so they join back to the text exactly.
 */
export function replyTokens(text: string): string[] {
  return text.match(/\s*[\p{L}\p{N}_']+|\s*[^\p{L}\p{N}_'\s]|\s+/gu) ?? [];
}

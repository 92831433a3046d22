import { createHash } from 'node:crypto';
import type { ChatMessage, ChatRequestBody, JsonObject } from '../../core/gateway/provider.ts';
import { estimateTokens } from '../token-estimate.ts';

/** What the mock model decided to answer, before it is shaped as a completion or a stream. */
export interface MockReply {
  /** Null when the answer is a tool call. */
  text: string | null;
  toolCall: { id: string; name: string; arguments: string } | null;
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
function snippet(text: string): string {
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

export function stableHash(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex');
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

const CALL_REQUEST = /\bcall\s+(?:the\s+)?[`'"]?([A-Za-z_][\w.-]*)/i;

/** Which tool to call, if any: as a model would, following tool_choice and an explicit request. */
function chooseTool(body: ChatRequestBody, tools: FunctionTool[]): FunctionTool | null {
  if (tools.length === 0) return null;
  const choice = body.tool_choice;
  if (choice === 'none') return null;
  if (isRecord(choice) && isRecord(choice['function']) && typeof choice['function']['name'] === 'string') {
    const named = choice['function']['name'];
    return tools.find((tool) => tool.name === named) ?? { name: named, parameters: undefined };
  }
  const last = body.messages.at(-1);
  if (last?.role === 'user') {
    const asked = CALL_REQUEST.exec(messageText(last))?.[1];
    const tool = tools.find((candidate) => candidate.name === asked);
    if (tool) return tool;
  }
  return choice === 'required' ? (tools[0] ?? null) : null;
}

/** A value of the schema's type, the same every time. */
function exampleValue(schema: unknown, seedText: string): unknown {
  if (!isRecord(schema)) return null;
  if (Array.isArray(schema['enum']) && schema['enum'].length > 0) return schema['enum'][0];
  if ('const' in schema) return schema['const'];
  switch (schema['type']) {
    case 'string':
      return seedText === '' ? 'example' : snippet(seedText);
    case 'number':
    case 'integer':
      return typeof schema['minimum'] === 'number' ? schema['minimum'] : 1;
    case 'boolean':
      return true;
    case 'array':
      return [];
    case 'object':
      return exampleArguments(schema, seedText);
    default:
      return null;
  }
}

/** Required properties filled from their schemas; `{}` when nothing is required. */
function exampleArguments(schema: JsonObject | undefined, seedText: string): JsonObject {
  const args: JsonObject = {};
  if (!schema || !isRecord(schema['properties']) || !Array.isArray(schema['required'])) return args;
  const properties = schema['properties'];
  for (const key of schema['required']) {
    if (typeof key === 'string') args[key] = exampleValue(properties[key], seedText);
  }
  return args;
}

function lastUserMessage(messages: ChatMessage[]): ChatMessage | undefined {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]?.role === 'user') return messages[i];
  return undefined;
}

function textReply(body: ChatRequestBody): string {
  const last = body.messages.at(-1);
  if (last?.role === 'tool') {
    const call = body.messages.flatMap((message) => message.tool_calls ?? []).find((candidate) => candidate.id === last.tool_call_id);
    return `The ${call?.function.name ?? 'tool'} tool returned: "${snippet(messageText(last))}". That is the result you asked for.`;
  }
  const heard = snippet(messageText(lastUserMessage(body.messages)));
  if (heard === '') return 'Hello! This is the mock model. Ask me anything.';
  return `You said: "${heard}". This is a deterministic reply from the mock model.`;
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

export function planMockReply(body: ChatRequestBody): MockReply {
  const tools = functionTools(body);
  const tool = chooseTool(body, tools);
  if (tool) {
    const args = JSON.stringify(exampleArguments(tool.parameters, messageText(lastUserMessage(body.messages))));
    const id = `call_${stableHash([body.messages, tool.name]).slice(0, 24)}`;
    return { text: null, toolCall: { id, name: tool.name, arguments: args }, finishReason: 'tool_calls' };
  }

  const full = textReply(body);
  const limit = body.max_completion_tokens ?? body.max_tokens;
  if (typeof limit === 'number' && limit >= 0 && estimateTokens(full) > limit) {
    return { text: truncateToTokens(full, limit), toolCall: null, finishReason: 'length' };
  }
  return { text: full, toolCall: null, finishReason: 'stop' };
}

/** The words of a reply as a model would stream them, each carrying its leading space. */
export function streamPieces(text: string): string[] {
  return text.match(/\s*\S+/g) ?? [];
}

import type { ChatMessage, JsonObject } from '../../../core/gateway/provider.ts';
import { compileBodySchema } from '../../../core/kernel/compiled-schema.ts';
import { ApiError } from '../../../core/kernel/errors.ts';
import type { ParsedChatRequest } from '../chat-request.ts';
import { messagesRequestSchema } from './messages-request-schema.ts';

/** A content block as the caller sent it; its fields are read, and checked, by type. */
type Block = JsonObject & { type: string };

/** An Anthropic Messages API request whose top-level shape was checked. */
export interface MessagesRequest {
  model: string;
  max_tokens: number;
  messages: Array<{ role: 'user' | 'assistant'; content: string | Block[] }>;
  system?: string | Block[];
  stop_sequences?: string[];
  temperature?: number;
  top_p?: number;
  top_k?: number;
  stream?: boolean;
  tools?: Array<JsonObject & { name: string; type?: string }>;
  tool_choice?: { type: 'auto' | 'any' | 'tool' | 'none'; name?: string; disable_parallel_tool_use?: boolean };
  metadata?: { user_id?: string | null };
  thinking?: { type: string };
}

const checkMessagesRequest = compileBodySchema<MessagesRequest>(messagesRequestSchema);

/** What the route needs from one Anthropic request: the chat request it becomes, and what to answer with. */
export interface TranslatedRequest {
  chat: ParsedChatRequest;
  /** The stop sequences asked for, to tell `stop_sequence` from `end_turn` in the answer. */
  stopSequences: readonly string[];
}

/** Checks an Anthropic Messages request and translates it into the gateway's chat request; 400 naming the field otherwise. */
export function parseMessagesRequest(body: unknown): TranslatedRequest {
  const request = checkMessagesRequest(body);
  return { chat: toChatRequest(request), stopSequences: request.stop_sequences ?? [] };
}

const invalid = (param: string, message: string) => new ApiError('invalid_parameter', message, { param });

const isRecord = (value: unknown): value is JsonObject => value !== null && typeof value === 'object' && !Array.isArray(value);

function requireString(block: JsonObject, field: string, param: string): string {
  const value = block[field];
  if (typeof value !== 'string') throw invalid(`${param}.${field}`, `Invalid '${param}.${field}': expected a string`);
  return value;
}

/** Base64 images become data URLs, URL images stay URLs: the two forms OpenAI's image_url takes. */
function imagePart(block: Block, param: string): JsonObject {
  const source = block['source'];
  if (!isRecord(source)) throw invalid(`${param}.source`, `Invalid '${param}.source': expected an object`);
  if (source['type'] === 'base64') {
    const mediaType = requireString(source, 'media_type', `${param}.source`);
    const data = requireString(source, 'data', `${param}.source`);
    return { type: 'image_url', image_url: { url: `data:${mediaType};base64,${data}` } };
  }
  if (source['type'] === 'url') return { type: 'image_url', image_url: { url: requireString(source, 'url', `${param}.source`) } };
  throw invalid(`${param}.source.type`, `Invalid '${param}.source.type': images are translated from base64 and url sources only`);
}

/** A base64 document becomes an inline file; a plain-text document becomes its text. */
function documentPart(block: Block, param: string): JsonObject {
  const source = block['source'];
  if (!isRecord(source)) throw invalid(`${param}.source`, `Invalid '${param}.source': expected an object`);
  if (source['type'] === 'base64') {
    const mediaType = requireString(source, 'media_type', `${param}.source`);
    const data = requireString(source, 'data', `${param}.source`);
    const file: JsonObject = { file_data: `data:${mediaType};base64,${data}` };
    if (typeof block['title'] === 'string') file['filename'] = block['title'];
    return { type: 'file', file };
  }
  if (source['type'] === 'text') return { type: 'text', text: requireString(source, 'data', `${param}.source`) };
  throw invalid(`${param}.source.type`, `Invalid '${param}.source.type': documents are translated from base64 and text sources only`);
}

/** Blocks a user turn may hold besides tool results, as OpenAI content parts. */
function userPart(block: Block, param: string): JsonObject {
  switch (block.type) {
    case 'text':
      return { type: 'text', text: requireString(block, 'text', param) };
    case 'image':
      return imagePart(block, param);
    case 'document':
      return documentPart(block, param);
    default:
      throw invalid(`${param}.type`, `Invalid '${param}.type': content blocks of type ${JSON.stringify(block.type)} are not translated`);
  }
}

/** A tool result's content: a string, or text blocks (OpenAI's tool messages carry text only). */
function toolResultContent(block: Block, param: string): string {
  const content = block['content'];
  let text: string;
  if (content === undefined) text = '';
  else if (typeof content === 'string') text = content;
  else if (Array.isArray(content)) {
    text = content
      .map((part, index) => {
        const partParam = `${param}.content[${index}]`;
        if (!isRecord(part) || part['type'] !== 'text') throw invalid(partParam, `Invalid '${partParam}': tool results are translated from text blocks only`);
        return requireString(part, 'text', partParam);
      })
      .join('\n');
  } else throw invalid(`${param}.content`, `Invalid '${param}.content': expected a string or an array of text blocks`);
  // OpenAI's tool message has no error flag: the model is told in the text itself.
  return block['is_error'] === true ? `Error: ${text}` : text;
}

/**
 * A user turn: its tool results become `tool` messages (OpenAI wants them right after the
 * assistant's calls, Anthropic at the start of the user turn, so the order holds), the rest one
 * user message.
 */
function userMessages(content: string | Block[], param: string): ChatMessage[] {
  if (typeof content === 'string') return [{ role: 'user', content }];
  const messages: ChatMessage[] = [];
  let parts: JsonObject[] = [];
  const flush = () => {
    if (parts.length > 0) messages.push({ role: 'user', content: parts });
    parts = [];
  };
  content.forEach((block, index) => {
    const blockParam = `${param}[${index}]`;
    if (block.type === 'tool_result') {
      flush();
      messages.push({ role: 'tool', tool_call_id: requireString(block, 'tool_use_id', blockParam), content: toolResultContent(block, blockParam) });
    } else parts.push(userPart(block, blockParam));
  });
  flush();
  return messages;
}

/** An assistant turn: its text as content, its tool uses as tool calls. Earlier thinking is not replayed. */
function assistantMessage(content: string | Block[], param: string): ChatMessage {
  if (typeof content === 'string') return { role: 'assistant', content };
  let text = '';
  const toolCalls: NonNullable<ChatMessage['tool_calls']> = [];
  content.forEach((block, index) => {
    const blockParam = `${param}[${index}]`;
    switch (block.type) {
      case 'text':
        text += requireString(block, 'text', blockParam);
        break;
      case 'tool_use':
        toolCalls.push({
          id: requireString(block, 'id', blockParam),
          type: 'function',
          function: { name: requireString(block, 'name', blockParam), arguments: JSON.stringify(block['input'] ?? {}) },
        });
        break;
      case 'thinking':
      case 'redacted_thinking':
        break;
      default:
        throw invalid(`${blockParam}.type`, `Invalid '${blockParam}.type': assistant blocks of type ${JSON.stringify(block.type)} are not translated`);
    }
  });
  const message: ChatMessage = { role: 'assistant', content: text === '' && toolCalls.length > 0 ? null : text };
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  return message;
}

function systemMessage(system: string | Block[]): ChatMessage {
  if (typeof system === 'string') return { role: 'system', content: system };
  return {
    role: 'system',
    content: system.map((block, index) => {
      const param = `system[${index}]`;
      if (block.type !== 'text') throw invalid(`${param}.type`, `Invalid '${param}.type': the system prompt takes text blocks only`);
      return { type: 'text', text: requireString(block, 'text', param) };
    }),
  };
}

/** Client tools become functions; Anthropic's server tools (web search, code execution, …) run nowhere here. */
function functionTool(tool: JsonObject & { name: string; type?: string }, index: number): JsonObject {
  if (tool.type !== undefined && tool.type !== 'custom') {
    throw invalid(`tools[${index}].type`, `Invalid 'tools[${index}].type': the server tool ${JSON.stringify(tool.type)} is not available through this gateway`);
  }
  const schema = tool['input_schema'];
  if (!isRecord(schema)) throw invalid(`tools[${index}].input_schema`, `Invalid 'tools[${index}].input_schema': expected a JSON Schema object`);
  const fn: JsonObject = { name: tool.name, parameters: schema };
  if (typeof tool['description'] === 'string') fn['description'] = tool['description'];
  return { type: 'function', function: fn };
}

function toolChoice(choice: NonNullable<MessagesRequest['tool_choice']>): unknown {
  switch (choice.type) {
    case 'auto':
      return 'auto';
    case 'any':
      return 'required';
    case 'none':
      return 'none';
    case 'tool':
      if (!choice.name) throw invalid('tool_choice.name', "Invalid 'tool_choice.name': a tool choice of type tool names the tool");
      return { type: 'function', function: { name: choice.name } };
  }
}

/** Anthropic Messages request → the gateway's chat request (OpenAI chat-completions shape). */
export function toChatRequest(request: MessagesRequest): ParsedChatRequest {
  // Extended thinking's blocks carry signatures that must come back verbatim on the next turn, and
  // no other upstream has them: refused rather than answered without thinking.
  if (request.thinking !== undefined && request.thinking.type !== 'disabled') {
    throw invalid('thinking', "Invalid 'thinking': extended thinking is not translated by this gateway; leave it out or set type disabled");
  }
  const messages: ChatMessage[] = [];
  if (request.system !== undefined && request.system.length > 0) messages.push(systemMessage(request.system));
  request.messages.forEach((message, index) => {
    const param = `messages[${index}].content`;
    if (message.role === 'user') messages.push(...userMessages(message.content, param));
    else messages.push(assistantMessage(message.content, param));
  });

  const chat: ParsedChatRequest = { model: request.model, messages, max_tokens: request.max_tokens };
  if (request.stream === true) chat.stream = true;
  if (request.temperature !== undefined) chat['temperature'] = request.temperature;
  if (request.top_p !== undefined) chat['top_p'] = request.top_p;
  // No OpenAI equivalent: passed on as the chat route passes it, for upstreams that take it.
  if (request.top_k !== undefined) chat['top_k'] = request.top_k;
  if (request.stop_sequences !== undefined && request.stop_sequences.length > 0) chat['stop'] = request.stop_sequences;
  if (request.tools !== undefined && request.tools.length > 0) chat.tools = request.tools.map(functionTool);
  // OpenAI refuses a tool_choice without tools; Anthropic's means nothing then either.
  if (request.tool_choice !== undefined && chat.tools !== undefined) {
    chat['tool_choice'] = toolChoice(request.tool_choice);
    if (request.tool_choice.disable_parallel_tool_use === true) chat['parallel_tool_calls'] = false;
  }
  if (typeof request.metadata?.user_id === 'string') chat['user'] = request.metadata.user_id;
  return chat;
}

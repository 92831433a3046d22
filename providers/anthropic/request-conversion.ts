import type { ChatMessage, ChatRequestBody, JsonObject } from '../../core/gateway/provider.ts';

/** The chat request cannot be expressed as a Messages API request; the caller's fault. */
export class UnconvertibleRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnconvertibleRequestError';
  }
}

type Block = JsonObject;
interface AnthropicMessage {
  role: 'user' | 'assistant';
  content: Block[];
}

/** Anthropic-native request fields a client may send through the chat-completions shape. */
const PASSTHROUGH_FIELDS = ['top_k', 'thinking'] as const;

const DATA_URL = /^data:([^;,]+);base64,(.*)$/s;

function isRecord(value: unknown): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function textBlock(text: string, part?: JsonObject): Block {
  const block: Block = { type: 'text', text };
  if (part && part['cache_control'] !== undefined) block['cache_control'] = part['cache_control'];
  return block;
}

function imageBlock(part: JsonObject): Block {
  const image = part['image_url'];
  const url = typeof image === 'string' ? image : isRecord(image) && typeof image['url'] === 'string' ? image['url'] : null;
  if (url === null) throw new UnconvertibleRequestError('An image_url content part has no url');
  const data = DATA_URL.exec(url);
  let block: Block;
  if (data) block = { type: 'image', source: { type: 'base64', media_type: data[1], data: data[2] } };
  else if (/^https?:\/\//i.test(url)) block = { type: 'image', source: { type: 'url', url } };
  else throw new UnconvertibleRequestError('An image_url must be an http(s) URL or a base64 data URL');
  if (part['cache_control'] !== undefined) block['cache_control'] = part['cache_control'];
  return block;
}

function fileBlock(part: JsonObject): Block {
  const file = isRecord(part['file']) ? part['file'] : {};
  const data = typeof file['file_data'] === 'string' ? DATA_URL.exec(file['file_data']) : null;
  if (!data) throw new UnconvertibleRequestError('Only inline (base64 data URL) files can be sent to this model');
  const block: Block = { type: 'document', source: { type: 'base64', media_type: data[1], data: data[2] } };
  if (typeof file['filename'] === 'string') block['title'] = file['filename'];
  return block;
}

/** OpenAI content (string or parts) → Anthropic blocks. Empty text is dropped: Anthropic refuses it. */
function contentBlocks(content: ChatMessage['content']): Block[] {
  if (content === undefined || content === null) return [];
  if (typeof content === 'string') return content === '' ? [] : [textBlock(content)];
  const blocks: Block[] = [];
  for (const part of content) {
    switch (part['type']) {
      case 'text':
      case 'refusal': {
        const text = part['text'] ?? part['refusal'];
        if (typeof text === 'string' && text !== '') blocks.push(textBlock(text, part));
        break;
      }
      case 'image_url':
        blocks.push(imageBlock(part));
        break;
      case 'file':
        blocks.push(fileBlock(part));
        break;
      case 'input_audio':
        throw new UnconvertibleRequestError('Audio input is not supported by this model');
      default:
        // Anthropic-native blocks (document, image with source, …) go through as they are
        blocks.push(part);
    }
  }
  return blocks;
}

function toolUseBlocks(message: ChatMessage): Block[] {
  return (message.tool_calls ?? []).map((call) => {
    let input: unknown = {};
    const args = call.function.arguments;
    if (args !== undefined && args.trim() !== '') {
      try {
        input = JSON.parse(args);
      } catch {
        throw new UnconvertibleRequestError(`The arguments of tool call ${call.id} are not valid JSON`);
      }
    }
    return { type: 'tool_use', id: call.id, name: call.function.name, input };
  });
}

function toolResultBlock(message: ChatMessage): Block {
  if (!message.tool_call_id) throw new UnconvertibleRequestError('A tool message needs tool_call_id');
  const content = message.content;
  const block: Block = { type: 'tool_result', tool_use_id: message.tool_call_id };
  if (typeof content === 'string') block['content'] = content;
  else if (Array.isArray(content)) block['content'] = contentBlocks(content);
  return block;
}

function systemText(message: ChatMessage): Block[] {
  return contentBlocks(message.content).filter((block) => block['type'] === 'text');
}

/** Anthropic wants strictly alternating turns, and tool results inside a user turn. */
function pushMerged(messages: AnthropicMessage[], role: AnthropicMessage['role'], content: Block[]): void {
  if (content.length === 0) return;
  const last = messages.at(-1);
  if (last && last.role === role) last.content.push(...content);
  else messages.push({ role, content });
}

function toolFromOpenAI(tool: JsonObject): JsonObject {
  if (tool['type'] !== 'function' || !isRecord(tool['function'])) return tool;
  const fn = tool['function'];
  const converted: JsonObject = {
    name: fn['name'],
    input_schema: isRecord(fn['parameters']) ? fn['parameters'] : { type: 'object', properties: {} },
  };
  if (typeof fn['description'] === 'string') converted['description'] = fn['description'];
  if (tool['cache_control'] !== undefined) converted['cache_control'] = tool['cache_control'];
  return converted;
}

function toolChoiceFromOpenAI(choice: unknown): JsonObject | undefined {
  if (choice === undefined || choice === null) return undefined;
  if (choice === 'auto') return { type: 'auto' };
  if (choice === 'none') return { type: 'none' };
  if (choice === 'required') return { type: 'any' };
  if (isRecord(choice)) {
    const fn = choice['function'];
    if (choice['type'] === 'function' && isRecord(fn) && typeof fn['name'] === 'string') return { type: 'tool', name: fn['name'] };
    if (typeof choice['type'] === 'string') return choice;
  }
  throw new UnconvertibleRequestError('tool_choice must be auto, none, required or a named function');
}

/** Chat-completions request → Messages API request body. */
export function toAnthropicRequest(body: ChatRequestBody, defaultMaxTokens: number): JsonObject {
  const system: Block[] = [];
  const messages: AnthropicMessage[] = [];
  for (const message of body.messages) {
    switch (message.role) {
      case 'system':
      case 'developer':
        system.push(...systemText(message));
        break;
      case 'user':
        pushMerged(messages, 'user', contentBlocks(message.content));
        break;
      case 'assistant':
        pushMerged(messages, 'assistant', [...contentBlocks(message.content), ...toolUseBlocks(message)]);
        break;
      case 'tool':
        pushMerged(messages, 'user', [toolResultBlock(message)]);
        break;
      default:
        throw new UnconvertibleRequestError(`Unknown message role ${String(message.role)}`);
    }
  }

  const request: JsonObject = {
    model: body.model,
    max_tokens: body.max_completion_tokens ?? body.max_tokens ?? defaultMaxTokens,
    messages,
  };
  if (system.length > 0) request['system'] = system;
  if (body.temperature !== undefined && body.temperature !== null) request['temperature'] = body.temperature;
  if (body.top_p !== undefined && body.top_p !== null) request['top_p'] = body.top_p;
  if (body.stop !== undefined && body.stop !== null) {
    const stops = (Array.isArray(body.stop) ? body.stop : [body.stop]).filter((stop) => stop !== '');
    if (stops.length > 0) request['stop_sequences'] = stops;
  }
  if (body.tools && body.tools.length > 0) request['tools'] = body.tools.map(toolFromOpenAI);
  let toolChoice = toolChoiceFromOpenAI(body.tool_choice);
  if (body['parallel_tool_calls'] === false && body.tools && body.tools.length > 0 && toolChoice?.['type'] !== 'none') {
    toolChoice = { ...(toolChoice ?? { type: 'auto' }), disable_parallel_tool_use: true };
  }
  if (toolChoice) request['tool_choice'] = toolChoice;
  // OpenAI's metadata is free-form; Anthropic's takes only user_id
  const metadata = body['metadata'];
  const userId = typeof body['user'] === 'string' ? body['user'] : isRecord(metadata) && typeof metadata['user_id'] === 'string' ? metadata['user_id'] : undefined;
  if (userId !== undefined) request['metadata'] = { user_id: userId };
  for (const field of PASSTHROUGH_FIELDS) {
    if (body[field] !== undefined && body[field] !== null) request[field] = body[field];
  }
  return request;
}

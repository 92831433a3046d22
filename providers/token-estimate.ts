import type { ChatMessage, ChatRequestBody, EmbeddingsRequestBody, JsonObject, ResponsesRequestBody } from '../core/gateway/provider.ts';

/**
 * Local token counts for when an upstream reports none (and for the mock, which has no tokenizer).
 * About four bytes of UTF-8 per token: right for English, and it does not undercount scripts
 * whose characters take several bytes (and usually a token or more each).
 */
export function estimateTokens(text: string): number {
  if (text === '') return 0;
  return tokensFromUtf8Bytes(Buffer.byteLength(text, 'utf8'));
}

/** For streams: add up `Buffer.byteLength` of each fragment and convert once at the end. */
export function tokensFromUtf8Bytes(bytes: number): number {
  return Math.ceil(bytes / 4);
}

/** Roughly what a hosted model charges for one image in a prompt. */
export const ESTIMATED_IMAGE_TOKENS = 85;
/** Per-message framing (role markers) that chat formats add. */
const MESSAGE_OVERHEAD = 4;
/** The assistant-reply primer at the end of a chat prompt. */
const REPLY_PRIMER = 3;

function contentTokens(content: ChatMessage['content']): number {
  if (content === undefined || content === null) return 0;
  if (typeof content === 'string') return estimateTokens(content);
  let total = 0;
  for (const part of content) total += partTokens(part);
  return total;
}

function partTokens(part: JsonObject): number {
  if (typeof part['text'] === 'string') return estimateTokens(part['text']);
  if (part['type'] === 'image_url' || part['type'] === 'image' || part['type'] === 'input_image') return ESTIMATED_IMAGE_TOKENS;
  return estimateTokens(JSON.stringify(part));
}

export function estimateMessageTokens(message: ChatMessage): number {
  let total = MESSAGE_OVERHEAD + contentTokens(message.content);
  if (message.name) total += estimateTokens(message.name);
  for (const call of message.tool_calls ?? []) {
    total += estimateTokens(call.function.name) + estimateTokens(call.function.arguments);
  }
  return total;
}

/** The prompt side of a chat request: messages plus tool definitions. */
export function estimateChatInputTokens(body: Pick<ChatRequestBody, 'messages' | 'tools'>): number {
  let total = REPLY_PRIMER;
  for (const message of body.messages) total += estimateMessageTokens(message);
  if (body.tools && body.tools.length > 0) total += estimateTokens(JSON.stringify(body.tools));
  return total;
}

/** The prompt side of a Responses API request: instructions, input and tool definitions as sent. */
export function estimateResponsesInputTokens(request: ResponsesRequestBody): number {
  let total = 0;
  for (const key of ['instructions', 'input', 'tools'] as const) {
    const value = request[key];
    if (value === undefined || value === null) continue;
    total += estimateTokens(typeof value === 'string' ? value : JSON.stringify(value));
  }
  return total;
}

/** The completion side: text, reasoning and tool-call arguments produced. */
export function estimateOutputTokens(output: { text?: string; reasoning?: string; toolCalls?: ReadonlyArray<{ name: string; arguments: string }> }): number {
  let total = estimateTokens(output.text ?? '') + estimateTokens(output.reasoning ?? '');
  for (const call of output.toolCalls ?? []) total += estimateTokens(call.name) + estimateTokens(call.arguments);
  return total;
}

/** Embedding inputs: text counts by estimate, pre-tokenised input by its length. */
export function estimateEmbeddingInputTokens(input: EmbeddingsRequestBody['input']): number {
  if (typeof input === 'string') return estimateTokens(input);
  let total = 0;
  for (const item of input as unknown[]) {
    if (typeof item === 'string') total += estimateTokens(item);
    else if (typeof item === 'number') total += 1;
    else if (Array.isArray(item)) total += item.length;
  }
  return total;
}

/** UTF-8 bytes of what a streamed chunk outputs (text, reasoning, tool calls): for estimating usage. */
export function chunkOutputBytes(chunk: { choices: ReadonlyArray<{ delta?: unknown }> }): number {
  let bytes = 0;
  for (const choice of chunk.choices) {
    const delta = choice.delta as Record<string, unknown> | undefined;
    if (!delta) continue;
    if (typeof delta['content'] === 'string') bytes += Buffer.byteLength(delta['content']);
    if (typeof delta['reasoning_content'] === 'string') bytes += Buffer.byteLength(delta['reasoning_content']);
    const calls = delta['tool_calls'];
    if (Array.isArray(calls)) {
      for (const call of calls as Array<{ function?: { name?: unknown; arguments?: unknown } }>) {
        if (typeof call.function?.name === 'string') bytes += Buffer.byteLength(call.function.name);
        if (typeof call.function?.arguments === 'string') bytes += Buffer.byteLength(call.function.arguments);
      }
    }
  }
  return bytes;
}

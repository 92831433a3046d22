import type { ChatCompletionChunk, ChatMessage, ChatResult, ChatStreamEvent, JsonObject, Usage } from '../../core/gateway/provider.ts';
import { estimatedUsage } from '../../core/gateway/provider.ts';
import type { ApiError } from '../../core/kernel/errors.ts';
import { chatInputTokenBound } from '../../providers/input-token-bound.ts';
import { chunkOutputBytes, estimateChatInputTokens, tokensFromUtf8Bytes } from '../../providers/token-estimate.ts';
import { toOpenAIUsage } from '../../providers/usage-format.ts';
import type { CallEstimate, EventSink, GatewayCapability, StreamCall, StreamWriter } from './capability.ts';
import { carriesContent, parseChatRequest, upstreamChatBody, type ParsedChatRequest } from './chat-request.ts';
import type { CatalogueModel } from './model-catalogue.ts';

/** `POST /v1/chat/completions`: JSON and SSE, committed at the first content chunk. */
export const chatCompletionsCapability: GatewayCapability<'language', ParsedChatRequest, ChatResult, ChatStreamEvent> = {
  endpoint: '/v1/chat/completions',
  modality: 'language',
  browserRule: true,
  parse: parseChatRequest,
  modelOf: (body) => body.model,
  mapInputTexts: mapChatInputTexts,
  estimate(body, model) {
    // A number at once, unless a long text is being counted in slices.
    const counting = chatInputTokenBound(body, model.inputProfile);
    return typeof counting === 'number' ? chatEstimate(body, model, counting) : counting.then((inputTokens) => chatEstimate(body, model, inputTokens));
  },
  attempt: (candidate, body, options) => candidate.api.chat(upstreamChatBody(body, candidate.upstreamModel), options),
  answer: ({ completion, usage }, _body, model) => ({ usage, body: { ...completion, model: model.id, usage: completion.usage ?? toOpenAIUsage(usage) } }),
  streaming: {
    wanted: (body) => body.stream === true,
    open: (candidate, body, options) => candidate.api.chatStream(upstreamChatBody(body, candidate.upstreamModel), options),
    commits: (event) => event.type === 'chunk' && carriesContent(event.chunk),
    writer: (body, model, call) => new ChatStreamWriter(body, model, call),
  },
};

function chatEstimate(body: ParsedChatRequest, model: CatalogueModel, inputTokens: number): CallEstimate {
  const asked = body.max_completion_tokens ?? body.max_tokens ?? model.maxOutputTokens;
  // Each of n choices may take max_tokens, and the upstream bills them all as output.
  const choices = typeof body['n'] === 'number' && body['n'] > 1 ? Math.ceil(body['n']) : 1;
  return {
    inputTokens,
    // An absurd n must still make an integer (the reservation is priced in BigInt).
    maxOutputTokens: Math.min(Math.min(asked, model.maxOutputTokens) * choices, Number.MAX_SAFE_INTEGER),
    // What a call cut off by a crash is billed for: the exact count where the tokenizer is known, else
    // the local estimate (the reservation's byte bound would bill several times the real input).
    countedInputTokens: model.inputProfile.tokenizers.includes('bytes') ? estimateChatInputTokens(body as unknown as Parameters<typeof estimateChatInputTokens>[0]) : inputTokens,
  };
}

/** Message contents and text parts: what the data guardrails read. */
export function mapChatInputTexts(body: ParsedChatRequest, map: (text: string) => string): ParsedChatRequest {
  let messages: ChatMessage[] | null = null;
  body.messages.forEach((message, index) => {
    const content = message.content;
    let mapped = content;
    if (typeof content === 'string') mapped = map(content);
    else if (Array.isArray(content)) mapped = mapTextParts(content, map);
    if (mapped !== content) (messages ??= [...body.messages])[index] = { ...message, content: mapped };
  });
  return messages ? { ...body, messages } : body;
}

function mapTextParts(parts: JsonObject[], map: (text: string) => string): JsonObject[] {
  let out: JsonObject[] | null = null;
  parts.forEach((part, index) => {
    const text = part['text'];
    if (part['type'] !== 'text' || typeof text !== 'string') return;
    const mapped = map(text);
    if (mapped !== text) (out ??= [...parts])[index] = { ...part, text: mapped };
  });
  return out ?? parts;
}

/**
 * What a chat stream is billed on and logged as, whoever frames it for the client (chat's chunks,
 * Anthropic's events): the upstream's usage, else what was sent counted locally.
 */
export class ChatStreamTally {
  private usage: Usage | null = null;
  private outputBytes = 0;
  /** The last chunk seen: the trailing usage chunk reuses its id and time. */
  last: ChatCompletionChunk | null = null;
  /** Only when the account keeps bodies: the streamed answer, reassembled. */
  private readonly transcript: { content: string; toolCalls: unknown[]; finishReason: string | null } | null;

  constructor(private readonly call: StreamCall) {
    this.transcript = call.logBodies ? { content: '', toolCalls: [], finishReason: null } : null;
  }

  get reportedUsage(): Usage | null {
    return this.usage;
  }

  /** Counts one event; answers the chunk to forward, or null for the usage event (nothing to forward). */
  count(event: ChatStreamEvent): ChatCompletionChunk | null {
    if (event.type === 'usage') {
      this.usage = event.usage;
      return null;
    }
    this.last = event.chunk;
    this.outputBytes += chunkOutputBytes(event.chunk);
    const transcript = this.transcript;
    if (transcript) {
      for (const choice of event.chunk.choices) {
        if (typeof choice.delta.content === 'string') transcript.content += choice.delta.content;
        if (Array.isArray(choice.delta.tool_calls)) transcript.toolCalls.push(...choice.delta.tool_calls);
        transcript.finishReason = choice.finish_reason ?? transcript.finishReason;
      }
    }
    return event.chunk;
  }

  settle() {
    // A stream that broke before its usage arrived: what was sent, counted locally.
    return { usage: this.usage ?? estimatedUsage(this.call.countedInputTokens, tokensFromUtf8Bytes(this.outputBytes)), logged: this.transcript ?? undefined };
  }
}

const USAGE_NULL = ',"usage":null';

/**
 * The upstream's chunk text (`raw`, see ChatStreamEvent) as the client must get it: under our model
 * id, without OpenAI's `"usage":null` (the gateway writes its own usage chunk). Null where that
 * cannot be done by exact replacement (another spelling, a second match, a line break that would
 * end the SSE frame): the caller then serialises the parsed chunk, as it would anyway.
 */
export function chunkTextAs(raw: string, upstreamModel: string, modelId: string): string | null {
  if (raw.includes('\n') || raw.includes('\r')) return null;
  let text = raw;
  if (upstreamModel !== modelId) {
    // The one `"model"` key is the chunk's own: anything quoted inside a string is escaped.
    const from = `"model":${JSON.stringify(upstreamModel)}`;
    const at = onlyMatch(text, '"model"');
    if (at === -1 || !text.startsWith(from, at)) return null;
    text = `${text.slice(0, at)}"model":${JSON.stringify(modelId)}${text.slice(at + from.length)}`;
  }
  // Likewise `"usage":` is the key, and what the upstream sends with it here is null.
  if (text.includes('"usage":')) {
    const at = onlyMatch(text, USAGE_NULL);
    if (at === -1) return null;
    text = text.slice(0, at) + text.slice(at + USAGE_NULL.length);
    if (text.includes('"usage":')) return null;
  }
  return text;
}

/** Where `part` occurs in `text` if it does exactly once, else -1. */
function onlyMatch(text: string, part: string): number {
  const at = text.indexOf(part);
  return at !== -1 && text.indexOf(part, at + part.length) === -1 ? at : -1;
}

/** Forwards a chat stream's chunks under the gateway's model id, and counts what it sent. */
class ChatStreamWriter implements StreamWriter<ChatStreamEvent> {
  private readonly tally: ChatStreamTally;

  constructor(
    private readonly body: ParsedChatRequest,
    private readonly model: CatalogueModel,
    private readonly call: StreamCall,
  ) {
    this.tally = new ChatStreamTally(call);
  }

  write(event: ChatStreamEvent, sink: EventSink): Promise<void> | undefined {
    const chunk = this.tally.count(event);
    if (!chunk) return undefined;
    const text = event.type === 'chunk' && event.raw !== undefined ? chunkTextAs(event.raw, chunk.model, this.model.id) : null;
    if (text !== null) return sink.data(text);
    chunk.model = this.model.id;
    return sink.data(chunk);
  }

  async close(sink: EventSink): Promise<void> {
    const usage = this.tally.reportedUsage;
    if (this.body.stream_options?.include_usage === true && usage) {
      const tail = this.tally.last;
      await sink.data({
        id: tail?.id ?? this.call.requestId,
        object: 'chat.completion.chunk',
        created: tail?.created ?? Math.floor(Date.now() / 1000),
        model: this.model.id,
        choices: [],
        usage: toOpenAIUsage(usage),
      });
    }
    await sink.data('[DONE]');
  }

  async fail(error: ApiError, sink: EventSink): Promise<void> {
    await sink.data(error.toEnvelope());
  }

  settle() {
    return this.tally.settle();
  }
}

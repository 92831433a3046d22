import type { ChatResult, ChatStreamEvent } from '../../../core/gateway/provider.ts';
import type { ApiError } from '../../../core/kernel/errors.ts';
import type { EventSink, GatewayCapability, StreamCall, StreamWriter } from '../capability.ts';
import { ChatStreamTally, chatCompletionsCapability, mapChatInputTexts } from '../chat-capability.ts';
import type { CatalogueModel } from '../model-catalogue.ts';
import { anthropicErrorBody } from './messages-errors.ts';
import { parseMessagesRequest, type TranslatedRequest } from './messages-request.ts';
import { toAnthropicMessage } from './messages-response.ts';
import { MessageStreamEncoder } from './messages-stream.ts';

const chat = chatCompletionsCapability;
const chatStreaming = chat.streaming!;

/**
 * `POST /v1/messages`: Anthropic's Messages API for any model of the catalogue. The request is
 * translated into a chat request and runs as one (same estimate, routes, attempts, commit point);
 * only the answer, the stream's framing (Anthropic's named events) and the error shape are
 * Anthropic's. The key is also taken from `x-api-key`, as Anthropic's SDKs and tools send it.
 */
export const anthropicMessagesCapability: GatewayCapability<'language', TranslatedRequest, ChatResult, ChatStreamEvent> = {
  endpoint: '/v1/messages',
  modality: 'language',
  foreignApi: { xApiKey: true, errorBody: anthropicErrorBody },
  parse: parseMessagesRequest,
  modelOf: (body) => body.chat.model,
  mapInputTexts(body, map) {
    const mapped = mapChatInputTexts(body.chat, map);
    return mapped === body.chat ? body : { ...body, chat: mapped };
  },
  estimate: (body, model) => chat.estimate(body.chat, model),
  attempt: (candidate, body, options) => chat.attempt(candidate, body.chat, options),
  answer: ({ completion, usage }, body, model) => ({ usage, body: toAnthropicMessage(completion, usage, model.id, body.stopSequences) }),
  streaming: {
    wanted: (body) => body.chat.stream === true,
    open: (candidate, body, options) => chatStreaming.open(candidate, body.chat, options),
    commits: chatStreaming.commits,
    writer: (body, model, call) => new AnthropicStreamWriter(body, model, call),
  },
};

/** Writes the chat stream as Anthropic's named events; billed exactly as the chat stream is. */
class AnthropicStreamWriter implements StreamWriter<ChatStreamEvent> {
  private readonly tally: ChatStreamTally;
  private readonly encoder: MessageStreamEncoder;

  constructor(body: TranslatedRequest, model: CatalogueModel, call: StreamCall) {
    this.tally = new ChatStreamTally(call);
    // message_start tells the input as counted at admission; message_delta the final count.
    this.encoder = new MessageStreamEncoder({ model: model.id, stopSequences: body.stopSequences, inputTokens: call.countedInputTokens });
  }

  async write(event: ChatStreamEvent, sink: EventSink): Promise<void> {
    this.tally.count(event);
    for (const { event: name, data } of this.encoder.push(event)) await sink.event(name, data);
  }

  async close(sink: EventSink): Promise<void> {
    for (const { event: name, data } of this.encoder.finish(this.tally.settle().usage)) await sink.event(name, data);
  }

  /** After the commit point: Anthropic's in-band `error` event, which its SDKs raise. */
  async fail(error: ApiError, sink: EventSink): Promise<void> {
    await sink.event('error', anthropicErrorBody(error));
  }

  settle() {
    return this.tally.settle();
  }
}

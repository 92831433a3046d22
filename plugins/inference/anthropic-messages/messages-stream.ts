import { emptyUsage, type ChatCompletionChunk, type ChatStreamEvent, type JsonObject, type Usage } from '../../../core/gateway/provider.ts';
import { deltaUsageBody, messageId, stopOf, textBlock, toolUseBlock, UNUSED_MESSAGE_FIELDS, usageBody } from './messages-response.ts';

/** One server-sent event of Anthropic's stream: its `event:` name and its `data:` JSON. */
export interface AnthropicStreamEvent {
  event: string;
  data: JsonObject;
}

export interface StreamTranslation {
  /** The public model id the client asked for. */
  model: string;
  stopSequences: readonly string[];
  /** The input as counted before the call, for message_start's usage; the final count comes in message_delta. */
  inputTokens?: number;
}

type OpenBlock = { kind: 'text'; index: number } | { kind: 'tool'; index: number; toolIndex: number };

/**
 * The gateway's chat stream → Anthropic's event sequence, one chat event at a time: message_start
 * and a ping, then each content block as content_block_start, its deltas (text_delta,
 * input_json_delta) and content_block_stop, then (finish) message_delta with the stop reason and
 * usage, which the chat stream only has at its end, and message_stop. It keeps which block is open
 * and which tool call is which block.
 */
export class MessageStreamEncoder {
  private started = false;
  private nextIndex = 0;
  private open: OpenBlock | null = null;
  /** OpenAI numbers tool calls, Anthropic numbers every block: from tool-call index to block index. */
  private readonly blockOfTool = new Map<number, number>();
  private finishReason: string | null = null;
  private matchedStop: unknown;
  private usage: Usage | null = null;

  constructor(private readonly translation: StreamTranslation) {}

  *push(event: ChatStreamEvent): Generator<AnthropicStreamEvent> {
    if (event.type === 'usage') {
      this.usage = event.usage;
      return;
    }
    yield* this.start(event.chunk);
    const choice = event.chunk.choices.find((candidate) => candidate.index === 0);
    if (!choice) return;
    const delta = choice.delta;
    for (const field of ['content', 'refusal'] as const) {
      const text = delta[field];
      if (typeof text === 'string' && text !== '') yield* this.text(text);
    }
    if (Array.isArray(delta.tool_calls)) {
      for (const call of delta.tool_calls as JsonObject[]) yield* this.toolCall(call);
    }
    if (choice.finish_reason) {
      this.finishReason = choice.finish_reason;
      this.matchedStop = (choice as JsonObject)['stop_reason'];
      yield* this.closeBlock();
    }
  }

  /** `counted`: the usage to report when the upstream reported none (what was sent, counted locally). */
  *finish(counted?: Usage): Generator<AnthropicStreamEvent> {
    yield* this.start(null);
    yield* this.closeBlock();
    // The final counts: message_start's were only what admission counted.
    yield {
      event: 'message_delta',
      data: {
        type: 'message_delta',
        delta: { ...stopOf(this.finishReason, this.matchedStop, this.translation.stopSequences), ...UNUSED_MESSAGE_FIELDS },
        usage: deltaUsageBody(this.usage ?? counted ?? emptyUsage()),
      },
    };
    yield { event: 'message_stop', data: { type: 'message_stop' } };
  }

  private *start(chunk: ChatCompletionChunk | null): Generator<AnthropicStreamEvent> {
    if (this.started) return;
    this.started = true;
    const message = {
      id: messageId(chunk?.id ?? ''),
      type: 'message',
      role: 'assistant',
      model: this.translation.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      ...UNUSED_MESSAGE_FIELDS,
      diagnostics: null,
      usage: usageBody({ ...emptyUsage(), inputTokens: this.translation.inputTokens ?? 0 }),
    };
    yield { event: 'message_start', data: { type: 'message_start', message } };
    yield { event: 'ping', data: { type: 'ping' } };
  }

  private *text(text: string): Generator<AnthropicStreamEvent> {
    if (this.open?.kind !== 'text') {
      yield* this.closeBlock();
      yield* this.openBlock({ kind: 'text', index: this.nextIndex }, textBlock(''));
    }
    yield this.delta(this.open!.index, { type: 'text_delta', text });
  }

  /** The first delta of a tool call (with its id and name) opens its block; later ones carry argument text. */
  private *toolCall(call: JsonObject): Generator<AnthropicStreamEvent> {
    const toolIndex = typeof call['index'] === 'number' ? call['index'] : 0;
    const fn = (call['function'] ?? {}) as JsonObject;
    let index = this.blockOfTool.get(toolIndex);
    if (index === undefined) {
      yield* this.closeBlock();
      index = this.nextIndex;
      this.blockOfTool.set(toolIndex, index);
      yield* this.openBlock({ kind: 'tool', index, toolIndex }, toolUseBlock(String(call['id'] ?? ''), String(fn['name'] ?? ''), {}));
    }
    const args = fn['arguments'];
    // Deltas address their block by index, so a late delta of an earlier call still lands in its block.
    if (typeof args === 'string' && args !== '') yield this.delta(index, { type: 'input_json_delta', partial_json: args });
  }

  private *openBlock(block: OpenBlock, contentBlock: object): Generator<AnthropicStreamEvent> {
    this.open = block;
    this.nextIndex += 1;
    yield { event: 'content_block_start', data: { type: 'content_block_start', index: block.index, content_block: contentBlock } };
  }

  private *closeBlock(): Generator<AnthropicStreamEvent> {
    if (!this.open) return;
    const { index } = this.open;
    this.open = null;
    yield { event: 'content_block_stop', data: { type: 'content_block_stop', index } };
  }

  private delta(index: number, delta: JsonObject): AnthropicStreamEvent {
    return { event: 'content_block_delta', data: { type: 'content_block_delta', index, delta } };
  }
}

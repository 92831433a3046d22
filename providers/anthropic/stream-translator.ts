import type { ChatCompletionChunk, JsonObject, Usage } from '../../core/gateway/provider.ts';
import { finishReasonFromStop, usageFromAnthropic, type AnthropicUsage } from './messages-vocabulary.ts';

interface StreamEvent {
  type: string;
  message?: { id?: string; model?: string; usage?: AnthropicUsage };
  index?: number;
  content_block?: { type: string; id?: string; name?: string; text?: string };
  delta?: { type?: string; text?: string; partial_json?: string; thinking?: string; stop_reason?: string | null };
  usage?: AnthropicUsage;
}

/**
 * Anthropic stream events → OpenAI chunks. Anthropic numbers every content block; OpenAI numbers
 * only tool calls, so block indexes are mapped to tool-call indexes as tool_use blocks open.
 */
export class AnthropicStreamTranslator {
  private id = '';
  private model: string;
  private readonly created = Math.floor(Date.now() / 1000);
  private readonly toolIndexByBlock = new Map<number, number>();
  private usageSoFar: AnthropicUsage = {};
  private sawUsage = false;
  /** A stop_reason arrived: the answer is complete even if message_stop never does. */
  finished = false;
  /** message_stop arrived. */
  stopped = false;
  /** UTF-8 bytes of generated text, thinking and tool arguments, for estimating usage if none comes. */
  outputBytes = 0;

  constructor(requestedModel: string) {
    this.model = requestedModel;
  }

  /** The chunks one event becomes (often none). */
  translate(event: StreamEvent): ChatCompletionChunk[] {
    switch (event.type) {
      case 'message_start': {
        this.id = event.message?.id ?? this.id;
        this.model = event.message?.model ?? this.model;
        if (event.message?.usage) this.mergeUsage(event.message.usage);
        // The first delta says role and refusal as OpenAI's does: SDKs that assemble messages from deltas read both.
        return [this.chunk({ role: 'assistant', content: '', refusal: null })];
      }
      case 'content_block_start': {
        const block = event.content_block;
        if (block?.type === 'tool_use') {
          const toolIndex = this.toolIndexByBlock.size;
          this.toolIndexByBlock.set(event.index ?? -1, toolIndex);
          return [this.chunk({ tool_calls: [{ index: toolIndex, id: block.id, type: 'function', function: { name: block.name, arguments: '' } }] })];
        }
        if (block?.type === 'text' && block.text) return [this.chunk({ content: block.text })];
        return [];
      }
      case 'content_block_delta': {
        const delta = event.delta;
        if (delta?.type === 'text_delta' && delta.text) {
          this.outputBytes += Buffer.byteLength(delta.text);
          return [this.chunk({ content: delta.text })];
        }
        if (delta?.type === 'thinking_delta' && delta.thinking) {
          this.outputBytes += Buffer.byteLength(delta.thinking);
          return [this.chunk({ reasoning_content: delta.thinking })];
        }
        if (delta?.type === 'input_json_delta' && delta.partial_json) {
          this.outputBytes += Buffer.byteLength(delta.partial_json);
          const index = this.toolIndexByBlock.get(event.index ?? -1);
          if (index === undefined) return [];
          return [this.chunk({ tool_calls: [{ index, function: { arguments: delta.partial_json } }] })];
        }
        return [];
      }
      case 'message_delta': {
        if (event.usage) this.mergeUsage(event.usage);
        const stop = event.delta?.stop_reason;
        if (stop === undefined || stop === null) return [];
        this.finished = true;
        return [this.chunk({}, finishReasonFromStop(stop))];
      }
      case 'message_stop':
        this.stopped = true;
        return [];
      default:
        // ping, content_block_stop, and event types added after this was written
        return [];
    }
  }

  /** Null when the stream carried no usage at all. */
  usage(): Usage | null {
    return this.sawUsage ? usageFromAnthropic(this.usageSoFar) : null;
  }

  /** message_delta counts are cumulative, so later values replace earlier ones. */
  private mergeUsage(usage: AnthropicUsage): void {
    this.sawUsage = true;
    for (const [key, value] of Object.entries(usage) as Array<[keyof AnthropicUsage, unknown]>) {
      if (typeof value === 'number') this.usageSoFar[key] = value;
    }
  }

  private chunk(delta: JsonObject, finishReason: string | null = null): ChatCompletionChunk {
    return {
      id: this.id,
      object: 'chat.completion.chunk',
      created: this.created,
      model: this.model,
      choices: [{ index: 0, delta, finish_reason: finishReason }],
    };
  }
}

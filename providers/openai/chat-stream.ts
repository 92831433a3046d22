import { estimatedUsage, type ChatCompletionChunk, type ChatRequestBody, type ChatStreamEvent, type Usage } from '../../core/gateway/provider.ts';
import { SseDecoder, type SseEvent } from '../http/sse-reader.ts';
import { errorFromInBand, kindForErrorType, protocolError, toUpstreamError, type ErrorContext } from '../http/upstream-errors.ts';
import { chunkOutputBytes, estimateChatInputTokens, tokensFromUtf8Bytes } from '../token-estimate.ts';
import { usageFromOpenAI } from './usage.ts';

type RawChunk = Partial<ChatCompletionChunk> & { error?: unknown; usage?: unknown };

/** Makes the upstream request; its body is the SSE bytes. */
type OpenStream = () => Promise<{ body: AsyncIterable<Uint8Array> }>;

/**
 * OpenAI SSE → chunks, then usage once. The usage chunk arrives after the finish chunk, so the
 * stream is read to `[DONE]`. Chunks are passed on without `usage`: the gateway writes its own
 * usage chunk from the usage event, the same way for every provider.
 *
 * `open` makes the upstream request when the first event is asked for. The bytes are decoded here,
 * in this one generator, rather than through a generator of SSE events: each layer of async
 * iteration costs every chunk of every stream a promise and a few microtasks.
 */
export async function* openAIChatEvents(open: OpenStream, request: ChatRequestBody, errors: ErrorContext): AsyncGenerator<ChatStreamEvent> {
  const { body } = await open();
  const reader = new ChatChunkReader(errors);
  const sse = new SseDecoder();
  try {
    for await (const bytes of body) {
      for (const event of sse.push(bytes)) {
        const chunk = reader.read(event);
        if (chunk) yield chunk;
      }
    }
    for (const event of sse.end()) {
      const chunk = reader.read(event);
      if (chunk) yield chunk;
    }
  } catch (error) {
    // a connection that drops after [DONE] lost nothing
    if (!reader.done) throw toUpstreamError(errors, error);
  }
  const ended = reader.done || reader.finished;
  if (!ended) throw protocolError(errors, 'the stream ended before a finish_reason or [DONE]');

  yield {
    type: 'usage',
    usage: reader.usage ?? estimatedUsage(estimateChatInputTokens(request), tokensFromUtf8Bytes(reader.bytesOut)),
  };
}

/** What the events of one stream said so far; `read` answers the chunk event to pass on, if any. */
class ChatChunkReader {
  usage: Usage | null = null;
  finished = false;
  done = false;
  bytesOut = 0;

  constructor(private readonly errors: ErrorContext) {}

  read(event: SseEvent): ChatStreamEvent | null {
    // keep reading after [DONE] so the body ends cleanly and the socket goes back to the pool
    if (this.done) return null;
    if (event.data === '[DONE]') {
      this.done = true;
      return null;
    }
    let chunk: RawChunk;
    try {
      chunk = JSON.parse(event.data) as RawChunk;
    } catch {
      throw protocolError(this.errors, 'upstream sent a stream event that is not JSON', event.data.slice(0, 2000));
    }
    if (event.event === 'error' || (chunk.error !== undefined && chunk.error !== null)) {
      const detail = (chunk.error ?? chunk) as { type?: unknown; code?: unknown };
      throw errorFromInBand(this.errors, kindForErrorType(detail.code ?? detail.type), chunk);
    }
    const usage = chunk.usage;
    if (usage !== undefined) {
      this.usage = usageFromOpenAI(usage) ?? this.usage;
      delete chunk.usage;
    }
    const choices = chunk.choices;
    if (!Array.isArray(choices) || choices.length === 0) return null;
    for (const choice of choices) if (choice.finish_reason) this.finished = true;
    this.bytesOut += chunkOutputBytes({ choices });
    // The text as it came may go on as it is (the gateway writes its own usage chunk).
    if (usage === undefined || usage === null) return { type: 'chunk', chunk: chunk as ChatCompletionChunk, raw: event.data };
    return { type: 'chunk', chunk: chunk as ChatCompletionChunk };
  }
}

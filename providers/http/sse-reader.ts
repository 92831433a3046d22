import { createParser, type EventSourceMessage, type EventSourceParser } from 'eventsource-parser';

export interface SseEvent {
  /** The `event:` field; undefined when the server sent none (OpenAI never does). */
  event: string | undefined;
  data: string;
}

/** One event's text can be big (an image in a tool result), but not unbounded. */
const MAX_BUFFERED_CHARS = 16 * 1024 * 1024;

export class SseOverflowError extends Error {
  constructor() {
    super(`an SSE event exceeded ${MAX_BUFFERED_CHARS} characters`);
    this.name = 'SseOverflowError';
  }
}

const NONE: readonly SseEvent[] = [];

/**
 * Server-sent events from bytes fed in as they arrive: `push` answers the events each piece
 * completed, in order, so a reader that already loops over the bytes needs no generator of its own
 * (an extra one costs a promise and a few microtasks per event on a stream's hottest path).
 */
export class SseDecoder {
  private readonly decoder = new TextDecoder();
  private readonly parser: EventSourceParser;
  private pending: SseEvent[] = [];
  private overflow = false;

  constructor() {
    this.parser = createParser({
      maxBufferSize: MAX_BUFFERED_CHARS,
      onEvent: (message: EventSourceMessage) => {
        this.pending.push({ event: message.event, data: message.data });
      },
      onError: (error) => {
        if (error.type === 'max-buffer-size-exceeded') this.overflow = true;
      },
    });
  }

  /** The events this piece of the byte stream completed; throws SseOverflowError past the limit. */
  push(bytes: Uint8Array): readonly SseEvent[] {
    this.parser.feed(this.decoder.decode(bytes, { stream: true }));
    if (this.overflow) throw new SseOverflowError();
    return this.take();
  }

  /** At the end of the byte stream: what is left, a last event without its blank line included. */
  end(): readonly SseEvent[] {
    const rest = this.decoder.decode();
    if (rest !== '') this.parser.feed(rest);
    // a final event without its blank line still counts: some servers close right after `data: [DONE]`
    this.parser.feed('\n\n');
    return this.take();
  }

  private take(): readonly SseEvent[] {
    if (this.pending.length === 0) return NONE;
    const ready = this.pending;
    this.pending = [];
    return ready;
  }
}

/** Server-sent events from a byte stream, in order. Errors of the byte stream pass through. */
export async function* readSse(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new SseDecoder();
  for await (const chunk of body) yield* decoder.push(chunk);
  yield* decoder.end();
}

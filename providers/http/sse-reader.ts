import { createParser, type EventSourceMessage } from 'eventsource-parser';

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

/** Server-sent events from a byte stream, in order. Errors of the byte stream pass through. */
export async function* readSse(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let pending: SseEvent[] = [];
  let overflow = false;
  const parser = createParser({
    maxBufferSize: MAX_BUFFERED_CHARS,
    onEvent: (message: EventSourceMessage) => {
      pending.push({ event: message.event, data: message.data });
    },
    onError: (error) => {
      if (error.type === 'max-buffer-size-exceeded') overflow = true;
    },
  });

  const drain = function* () {
    const ready = pending;
    pending = [];
    yield* ready;
  };

  for await (const chunk of body) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    if (overflow) throw new SseOverflowError();
    if (pending.length > 0) yield* drain();
  }
  const rest = decoder.decode();
  if (rest !== '') parser.feed(rest);
  // a final event without its blank line still counts: some servers close right after `data: [DONE]`
  parser.feed('\n\n');
  if (pending.length > 0) yield* drain();
}

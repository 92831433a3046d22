import { once } from 'node:events';
import type { ServerResponse } from 'node:http';

/**
 * Writes server-sent events to a raw response with backpressure: a slow client makes us wait for
 * 'drain' instead of buffering the whole stream in memory.
 */
export class SseResponse {
  constructor(private readonly raw: ServerResponse) {}

  get clientGone(): boolean {
    return this.raw.destroyed || this.raw.writableEnded;
  }

  open(headers: Record<string, string | number | string[] | undefined>): void {
    this.raw.writeHead(200, {
      ...headers,
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
  }

  /**
   * Writes one `data:` frame. Answers a promise only when the client reads slower than we write
   * (wait for it before the next frame); otherwise nothing, so a stream's frames cost no promise each.
   */
  data(payload: unknown): Promise<void> | undefined {
    return this.write(`data: ${typeof payload === 'string' ? payload : JSON.stringify(payload)}\n\n`);
  }

  /** A named event (`event:` line), as the Responses API and Anthropic's Messages API stream them; answers as data() does. */
  event(name: string, payload: unknown): Promise<void> | undefined {
    return this.write(`event: ${name}\ndata: ${typeof payload === 'string' ? payload : JSON.stringify(payload)}\n\n`);
  }

  end(): void {
    if (!this.raw.writableEnded) this.raw.end();
  }

  private write(text: string): Promise<void> | undefined {
    if (this.clientGone || this.raw.write(text)) return undefined;
    return Promise.race([once(this.raw, 'drain'), once(this.raw, 'close')]).then(() => undefined);
  }
}

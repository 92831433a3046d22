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

  async data(payload: unknown): Promise<void> {
    await this.write(`data: ${typeof payload === 'string' ? payload : JSON.stringify(payload)}\n\n`);
  }

  /** A named event (`event:` line), as the Responses API and Anthropic's Messages API stream them. */
  async event(name: string, payload: unknown): Promise<void> {
    await this.write(`event: ${name}\ndata: ${typeof payload === 'string' ? payload : JSON.stringify(payload)}\n\n`);
  }

  end(): void {
    if (!this.raw.writableEnded) this.raw.end();
  }

  private async write(text: string): Promise<void> {
    if (this.clientGone) return;
    if (!this.raw.write(text)) {
      await Promise.race([once(this.raw, 'drain'), once(this.raw, 'close')]);
    }
  }
}

import { once } from 'node:events';
import { connect, type AddressInfo, type Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

export interface RawResponse {
  statusCode: number;
  /** Lower-cased names; a repeated header keeps its last value. */
  headers: Record<string, string>;
  body: string;
}

/**
 * One HTTP/1.1 connection written byte for byte: for what fetch and app.inject cannot send
 * (malformed requests, repeated headers, requests trickled slowly) and for watching the server
 * close the connection. Responses are read by content-length (not chunked ones).
 */
export class RawConnection {
  readonly closed: Promise<void>;
  private received = '';
  private waiting: (() => void) | null = null;
  private isClosed = false;

  private constructor(private readonly socket: Socket) {
    socket.setEncoding('latin1');
    socket.on('data', (text: string) => {
      this.received += text;
      this.wake();
    });
    // A reset after the server answered is still a closed connection; the answer was read.
    socket.on('error', () => undefined);
    this.closed = once(socket, 'close').then(() => {
      this.isClosed = true;
      this.wake();
    });
  }

  static async open(app: FastifyInstance): Promise<RawConnection> {
    const { port } = app.server.address() as AddressInfo;
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    return new RawConnection(socket);
  }

  get ended(): boolean {
    return this.isClosed;
  }

  /** Writes unless the server has closed the connection; says whether it wrote. */
  write(data: string): boolean {
    if (this.isClosed || this.socket.destroyed) return false;
    this.socket.write(data, 'latin1');
    return true;
  }

  /** Writes `data` one byte every `everyMs` until it is all sent or the server closes the connection. */
  async trickle(data: string, everyMs: number): Promise<void> {
    for (const byte of data) {
      if (!this.write(byte)) return;
      await Promise.race([new Promise((resolve) => setTimeout(resolve, everyMs)), this.closed]);
    }
  }

  /** The next complete response, also one read before the connection closed; rejects if there is none. */
  async response(): Promise<RawResponse> {
    for (;;) {
      const parsed = this.takeResponse();
      if (parsed) return parsed;
      if (this.isClosed) throw new Error(`connection closed without a complete response; received ${JSON.stringify(this.received.slice(0, 300))}`);
      await new Promise<void>((resolve) => (this.waiting = resolve));
    }
  }

  close(): void {
    this.socket.destroy();
  }

  private wake(): void {
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.();
  }

  private takeResponse(): RawResponse | null {
    const end = this.received.indexOf('\r\n\r\n');
    if (end < 0) return null;
    const [statusLine = '', ...lines] = this.received.slice(0, end).split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    const bodyBytes = Buffer.from(this.received.slice(end + 4), 'latin1');
    if (bodyBytes.length < length) return null;
    const body = bodyBytes.subarray(0, length).toString('utf8');
    this.received = bodyBytes.subarray(length).toString('latin1');
    return { statusCode: Number(statusLine.split(' ')[1]), headers, body };
  }
}

/** Sends one request on a fresh connection and returns the response and the connection. */
export async function rawRequest(app: FastifyInstance, request: string): Promise<{ response: RawResponse; connection: RawConnection }> {
  const connection = await RawConnection.open(app);
  connection.write(request);
  return { response: await connection.response(), connection };
}

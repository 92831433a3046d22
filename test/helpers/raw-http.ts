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
 * close the connection. Responses are read by content-length or, when chunked, to the last chunk.
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

  /**
   * Connects to the app. `request`, when given, is handed to the socket before it has connected,
   * so it goes out in one write the moment the connection exists: nothing of this side's pace
   * comes between the server accepting and the whole request arriving.
   */
  static async open(app: FastifyInstance, request?: string): Promise<RawConnection> {
    const { port } = app.server.address() as AddressInfo;
    const socket = connect(port, '127.0.0.1');
    if (request !== undefined) socket.write(request, 'latin1');
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
    const bodyBytes = Buffer.from(this.received.slice(end + 4), 'latin1');
    if (headers['transfer-encoding']?.toLowerCase() === 'chunked') {
      const chunked = readChunked(bodyBytes);
      if (!chunked) return null;
      this.received = bodyBytes.subarray(chunked.consumed).toString('latin1');
      return { statusCode: Number(statusLine.split(' ')[1]), headers, body: chunked.body.toString('utf8') };
    }
    const length = Number(headers['content-length'] ?? 0);
    if (bodyBytes.length < length) return null;
    const body = bodyBytes.subarray(0, length).toString('utf8');
    this.received = bodyBytes.subarray(length).toString('latin1');
    return { statusCode: Number(statusLine.split(' ')[1]), headers, body };
  }
}

/** A whole chunked body (without trailers): its bytes and how many were read, or null while incomplete. */
function readChunked(bytes: Buffer): { body: Buffer; consumed: number } | null {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = bytes.indexOf('\r\n', at, 'latin1');
    if (lineEnd < 0) return null;
    const size = Number.parseInt(bytes.subarray(at, lineEnd).toString('latin1'), 16);
    if (Number.isNaN(size)) throw new Error(`bad chunk size line ${JSON.stringify(bytes.subarray(at, lineEnd).toString('latin1'))}`);
    const start = lineEnd + 2;
    if (size === 0) {
      // The last chunk, then the (empty) trailer section's CRLF.
      if (bytes.length < start + 2) return null;
      return { body: Buffer.concat(parts), consumed: start + 2 };
    }
    if (bytes.length < start + size + 2) return null;
    parts.push(bytes.subarray(start, start + size));
    at = start + size + 2;
  }
}

/** Sends one request on a fresh connection and returns the response and the connection. */
export async function rawRequest(app: FastifyInstance, request: string): Promise<{ response: RawResponse; connection: RawConnection }> {
  const connection = await RawConnection.open(app);
  connection.write(request);
  return { response: await connection.response(), connection };
}

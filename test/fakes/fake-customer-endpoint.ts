import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * A customer's HTTP endpoint (a webhook receiver, an MCP server) on 127.0.0.1: a real server that
 * records every request and every connection, answering with whatever the test's handler does.
 */

export interface ReceivedRequest {
  method: string;
  /** Path with query string, as sent. */
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** 'completed' when the answer was sent whole, 'closed' when the client went away first. */
  outcome: Promise<'completed' | 'closed'>;
}

/** Answers one request; may leave `res` unanswered (a server that never answers). */
export type EndpointHandler = (req: IncomingMessage, res: ServerResponse, received: ReceivedRequest) => void;

export interface FakeCustomerEndpoint {
  /** `http://127.0.0.1:<port>` */
  url: string;
  port: number;
  requests: ReceivedRequest[];
  /** TCP connections accepted so far. */
  readonly connections: number;
  /** Resolves with the `count`-th request once it has arrived (its body read), at once if it has. */
  arrived(count?: number): Promise<ReceivedRequest>;
  /** How the next requests are answered (default: 200 `ok`). */
  handle(handler: EndpointHandler): void;
  close(): Promise<void>;
}

const answerOk: EndpointHandler = (_req, res) => {
  res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
};

export async function startFakeCustomerEndpoint(): Promise<FakeCustomerEndpoint> {
  const requests: ReceivedRequest[] = [];
  const sockets = new Set<Socket>();
  const waiters: Array<{ count: number; resolve: (request: ReceivedRequest) => void }> = [];
  let handler = answerOk;
  let connections = 0;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const outcome = new Promise<'completed' | 'closed'>((resolve) => {
        res.on('close', () => resolve(res.writableFinished ? 'completed' : 'closed'));
      });
      const received: ReceivedRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), outcome };
      requests.push(received);
      for (const waiter of waiters.filter((w) => w.count <= requests.length)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(requests[waiter.count - 1]!);
      }
      handler(req, res, received);
    });
  });
  server.on('connection', (socket: Socket) => {
    connections += 1;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    get connections() {
      return connections;
    },
    arrived(count = 1) {
      const ready = requests[count - 1];
      if (ready) return Promise.resolve(ready);
      return new Promise((resolve) => waiters.push({ count, resolve }));
    },
    handle(next) {
      handler = next;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

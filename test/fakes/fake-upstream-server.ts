import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The wire-format-neutral half of the fake upstreams: a real HTTP server on 127.0.0.1, a record
 * of every request, a queue of scripted behaviours, and the faults every upstream can show.
 * `fake-openai-upstream.ts` and `fake-anthropic-upstream.ts` add the answers in their formats.
 */

export interface RecordedRequest {
  method: string;
  /** Path with query string, as sent. */
  path: string;
  headers: IncomingHttpHeaders;
  /** The client's port: equal across requests when a connection was kept alive and reused. */
  remotePort: number | undefined;
  /** Parsed JSON, or the raw text when it was not JSON (a format may replace it with what it parsed, e.g. a form). */
  body: any;
  /** The body's bytes as received: for formats that are not text (multipart uploads). */
  rawBody: Buffer;
  /**
   * Settles when the exchange is over: 'completed' when the fake finished answering, 'closed'
   * when the client went away first (an abort or a timeout on the caller's side).
   */
  outcome: Promise<'completed' | 'closed'>;
}

/** Faults shared by every wire format. */
export type FaultBehaviour =
  /** Answer with this status and a JSON error body in the upstream's format (or `body`). */
  | { kind: 'status'; status: number; message?: string; body?: unknown; headers?: Record<string, string>; retryAfter?: string }
  /** Read the request, then reset the connection before any response byte. */
  | { kind: 'reset' }
  /** Read the request and never answer, until the client or `close()` ends the connection. */
  | { kind: 'hang' }
  /** Answer exactly this (e.g. an unparseable body with status 200). */
  | { kind: 'raw'; status?: number; headers?: Record<string, string>; body: string };

export interface Exchange {
  request: RecordedRequest;
  /** Path without query string. */
  pathname: string;
  res: ServerResponse;
  /** True once the client has gone away; long answers check it between writes. */
  readonly clientGone: boolean;
}

export interface FakeUpstream<B> {
  /** Origin, e.g. `http://127.0.0.1:43121`. */
  url: string;
  /** Requests in arrival order (empty when started with `record: false`). */
  requests: RecordedRequest[];
  /**
   * Resolves with the `count`-th recorded request (1 = the first since start or reset()) once it
   * has arrived, at once if it already has: a test acts "while the upstream holds the call" on
   * this, not on a timer. Needs `record` (the default).
   */
  arrived(count?: number): Promise<RecordedRequest>;
  /** Script the next requests, one behaviour each, in order; unscripted requests get a normal answer. */
  enqueue(...behaviours: B[]): void;
  /** Drop recorded requests and unused behaviours. */
  reset(): void;
  close(): Promise<void>;
}

export interface FakeServerOptions {
  /** Keep every request (default true). Benchmarks turn it off to keep memory flat. */
  record?: boolean;
}

export interface WireFormat<B> {
  /** The error body this format's upstream sends with a status. */
  errorBody(status: number, message: string): unknown;
  /** Answer one request; `behaviour` is undefined for the default, happy answer. */
  answer(exchange: Exchange, behaviour: B | undefined): Promise<void> | void;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Write and wait until the socket took it, so a following cut does not swallow it. */
function writeAndFlush(res: ServerResponse, text: string): Promise<void> {
  return new Promise((resolve) => {
    res.write(text, () => resolve());
  });
}

/** Ends the connection abruptly (no chunked terminator), as a crashing upstream would. */
function cutConnection(res: ServerResponse): void {
  res.socket?.destroy();
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

function startSse(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
}

/** A whole SSE body: in one write (the cheap default path), or frame by frame with a pause between. */
export async function sendSse(exchange: Exchange, frames: string[], chunkDelayMs = 0): Promise<void> {
  startSse(exchange.res);
  if (chunkDelayMs <= 0) {
    exchange.res.end(frames.join(''));
    return;
  }
  for (const frame of frames) {
    if (exchange.clientGone) return;
    await writeAndFlush(exchange.res, frame);
    await sleep(chunkDelayMs);
  }
  exchange.res.end();
}

/** The first `count` frames, then either a last frame (an in-band error) or a cut connection. */
export async function sendBrokenSse(exchange: Exchange, frames: string[], count: number, ending: { lastFrame: string } | 'cut'): Promise<void> {
  startSse(exchange.res);
  await writeAndFlush(exchange.res, frames.slice(0, count).join(''));
  if (ending === 'cut') cutConnection(exchange.res);
  else exchange.res.end(ending.lastFrame);
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function parseBody(text: string): unknown {
  if (text === '') return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export async function startFakeServer<B extends { kind: string }>(format: WireFormat<B>, options: FakeServerOptions = {}): Promise<FakeUpstream<B>> {
  const record = options.record ?? true;
  const requests: RecordedRequest[] = [];
  let queue: B[] = [];
  let arrivals: Array<{ count: number; resolve(request: RecordedRequest): void }> = [];
  const wakeArrivals = () => {
    const due = arrivals.filter((waiter) => waiter.count <= requests.length);
    arrivals = arrivals.filter((waiter) => waiter.count > requests.length);
    for (const waiter of due) waiter.resolve(requests[waiter.count - 1]!);
  };

  const server = http.createServer((req, res) => {
    let gone = false;
    let settle!: (value: 'completed' | 'closed') => void;
    const outcome = new Promise<'completed' | 'closed'>((resolve) => (settle = resolve));
    res.on('close', () => {
      gone = !res.writableFinished;
      settle(res.writableFinished ? 'completed' : 'closed');
    });

    void readBody(req)
      .then(async (rawBody) => {
        const path = req.url ?? '/';
        const query = path.indexOf('?');
        const body = parseBody(rawBody.toString('utf8'));
        const request: RecordedRequest = { method: req.method ?? 'GET', path, headers: req.headers, remotePort: req.socket.remotePort, body, rawBody, outcome };
        if (record) {
          requests.push(request);
          wakeArrivals();
        }
        const exchange: Exchange = {
          request,
          pathname: query === -1 ? path : path.slice(0, query),
          res,
          get clientGone() {
            return gone;
          },
        };
        const behaviour = queue.shift() as (B | FaultBehaviour) | undefined;
        await answerWith(format, exchange, behaviour);
      })
      .catch(() => {
        if (!res.headersSent) res.destroy();
      });
  });
  // the fakes must never be what keeps a test process alive
  server.unref();

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    arrived: (count = 1) => {
      if (!record) throw new Error('arrived() needs a fake started with record: true');
      return new Promise((resolve) => {
        arrivals.push({ count, resolve });
        wakeArrivals();
      });
    },
    enqueue: (...behaviours) => {
      queue.push(...behaviours);
    },
    reset: () => {
      requests.length = 0;
      queue = [];
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function answerWith<B extends { kind: string }>(format: WireFormat<B>, exchange: Exchange, behaviour: B | FaultBehaviour | undefined): Promise<void> {
  const { res } = exchange;
  switch (behaviour?.kind) {
    case 'status': {
      const fault = behaviour as Extract<FaultBehaviour, { kind: 'status' }>;
      const headers = { ...fault.headers, ...(fault.retryAfter === undefined ? {} : { 'retry-after': fault.retryAfter }) };
      sendJson(res, fault.status, fault.body ?? format.errorBody(fault.status, fault.message ?? `fake upstream error ${fault.status}`), headers);
      return;
    }
    case 'reset':
      res.socket?.resetAndDestroy();
      return;
    case 'hang':
      return;
    case 'raw': {
      const raw = behaviour as Extract<FaultBehaviour, { kind: 'raw' }>;
      res.writeHead(raw.status ?? 200, { 'content-type': 'application/json', ...raw.headers });
      res.end(raw.body);
      return;
    }
    default:
      await format.answer(exchange, behaviour as B | undefined);
  }
}

import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { Pool } from 'undici';
import type Dispatcher from 'undici/types/dispatcher.js';
import { newRequestId } from '../../../core/kernel/request-ids.ts';
import { PATH_MAX, type AppRequestRow } from './request-rows.ts';
import type { AppRoute, RouteTable } from './route-table.ts';

export interface AppsProxyOptions {
  host: string;
  port: number;
  baseDomain: string;
  routes: RouteTable;
  /** Where each served request's row goes; must never block or throw. */
  record: (row: AppRequestRow) => void;
  swapWaitMs: number;
  stoppedRetryAfterSeconds: number;
  trustForwarded: boolean;
  logger: { warn(details: object, message: string): void };
}

/** Headers that describe one connection, not the message: never forwarded either way (RFC 9110 7.6.1). */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);
/** Set by the proxy itself: a client's own values are replaced (x-request-id is kept as x-client-request-id). */
const PROXY_SET = new Set(['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-request-id']);
/** Methods a retry cannot change the outcome of (RFC 9110 9.2.2). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);
/** Failures that mean the target was gone before it answered: the old instance of a swap going away. */
const GONE = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'UND_ERR_DESTROYED']);
/** How often pools to targets no route names any more are closed. */
const POOL_SWEEP_MS = 5_000;
/** nginx's code for a request whose client went away before its answer was complete. */
const CLIENT_CLOSED = 499;

/**
 * The apps proxy: its own node HTTP server, routing by Host (`<slug>.<baseDomain>`, any port, any
 * case) to the instance the route table names, through one undici Pool per target (keep-alive).
 * Bodies are streamed both ways without buffering; websockets (`Upgrade`) are piped over a raw
 * socket. Each request gets a gateway request id, sent to the app and back to the client as
 * `x-request-id`, and leaves one row (request-rows.ts). See README.md for the design.
 */
export class AppsProxy {
  readonly server: http.Server;
  private readonly pools = new Map<string, Pool>();
  private readonly tunnels = new Set<Duplex>();
  /** `.<baseDomain>`, lower case: what a Host must end with. */
  private readonly suffix: string;
  private sweeper: NodeJS.Timeout | null = null;

  constructor(readonly options: AppsProxyOptions) {
    this.suffix = `.${options.baseDomain.toLowerCase()}`;
    this.server = http.createServer((req, res) => this.onRequest(req, res));
    // Longer than common load balancers' 60 s, so they close an idle connection first.
    this.server.keepAliveTimeout = 72_000;
    this.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.onUpgrade(req, socket, head));
    this.server.on('clientError', (_error, socket: Duplex) => {
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      else socket.destroy();
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.options.port, this.options.host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.sweeper = setInterval(() => this.closeUnusedPools(), POOL_SWEEP_MS);
    this.sweeper.unref();
    return this.port;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Stops accepting, lets requests in flight finish for up to `graceMs`, then cuts what is left. */
  async close(graceMs = 5_000): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    for (const tunnel of this.tunnels) tunnel.destroy();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([closed, new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)))]);
    clearTimeout(timer);
    this.server.closeAllConnections();
    await closed;
    await Promise.all([...this.pools.values()].map((pool) => pool.destroy()));
    this.pools.clear();
  }

  /** The route a Host header names, or null when it names no app. */
  routeOf(host: string | undefined): AppRoute | null {
    const slug = slugOf(host, this.suffix);
    return slug === null ? null : (this.options.routes.get(slug) ?? null);
  }

  poolFor(target: string): Pool {
    let pool = this.pools.get(target);
    if (!pool) {
      pool = new Pool(`http://${target}`, { pipelining: 1 });
      this.pools.set(target, pool);
    }
    return pool;
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const arrived = arrivalNow();
    const route = this.routeOf(req.headers.host);
    if (!route) {
      answerPlain(res, 404, `No app is served at ${req.headers.host ?? 'this address'}.\n`);
      return;
    }
    const requestId = newRequestId(arrived.wallMs);
    if (!route.target) {
      res.setHeader('retry-after', String(this.options.stoppedRetryAfterSeconds));
      res.setHeader('x-request-id', requestId);
      answerPlain(res, 503, 'This app is not running right now. Try again shortly.\n');
      this.options.record(rowOf(route, req, requestId, arrived, 503, 0, 0));
      return;
    }
    new ProxiedRequest(this, req, res, route, requestId, arrived).send(route.target);
  }

  /** A websocket (or any Upgrade): the handshake is written to the target as received, then bytes are piped both ways. */
  private onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const arrived = arrivalNow();
    socket.on('error', () => socket.destroy());
    const route = this.routeOf(req.headers.host);
    if (!route) {
      rawAnswer(socket, 404, 'Not Found', `No app is served at ${req.headers.host ?? 'this address'}.\n`);
      return;
    }
    if (!route.target) {
      rawAnswer(socket, 503, 'Service Unavailable', 'This app is not running right now.\n', this.options.stoppedRetryAfterSeconds);
      return;
    }
    const requestId = newRequestId(arrived.wallMs);
    const [host, port] = splitTarget(route.target);
    const upstream = net.connect(port, host);
    this.tunnels.add(socket);
    let status = 0;
    let bytesIn = head.length;
    let bytesOut = 0;
    let recorded = false;
    const finish = (): void => {
      socket.destroy();
      upstream.destroy();
      this.tunnels.delete(socket);
      if (recorded) return;
      recorded = true;
      this.options.record(rowOf(route, req, requestId, arrived, status || 502, bytesIn, bytesOut));
    };
    upstream.on('error', () => {
      if (bytesOut === 0 && socket.writable) rawAnswer(socket, 502, 'Bad Gateway', 'The app did not answer.\n');
      finish();
    });
    socket.on('close', finish);
    upstream.on('close', finish);
    upstream.on('data', (chunk: Buffer) => {
      // The first bytes are the target's status line: `HTTP/1.1 101 Switching Protocols`.
      if (bytesOut === 0) status = Number(chunk.subarray(9, 12).toString('latin1')) || 0;
      bytesOut += chunk.length;
    });
    socket.on('data', (chunk: Buffer) => {
      bytesIn += chunk.length;
    });
    upstream.write(handshakeOf(req, this.forwardedHeaders(req, requestId)));
    if (head.length > 0) upstream.write(head);
    upstream.pipe(socket);
    socket.pipe(upstream);
  }

  /** The request's headers for the target, as a flat list: hop-by-hop ones dropped, the proxy's own added. */
  forwardedHeaders(req: IncomingMessage, requestId: string, keepUpgrade = true): string[] {
    const raw = req.rawHeaders;
    const named = connectionTokens(req.headers.connection);
    const out: string[] = [];
    let clientFor: string | undefined;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i] as string;
      const lower = name.toLowerCase();
      if (PROXY_SET.has(lower)) {
        if (lower === 'x-request-id') out.push('x-client-request-id', raw[i + 1] as string);
        else if (lower === 'x-forwarded-for') clientFor = clientFor === undefined ? raw[i + 1] : `${clientFor}, ${raw[i + 1]}`;
        continue;
      }
      if (HOP_BY_HOP.has(lower) || named?.has(lower)) {
        // An upgrade's handshake needs its Connection and Upgrade to reach the target.
        if (keepUpgrade && (lower === 'connection' || lower === 'upgrade')) out.push(name, raw[i + 1] as string);
        continue;
      }
      if (lower === 'expect') continue; // undici refuses it; the proxy reads the body anyway
      out.push(name, raw[i + 1] as string);
    }
    const peer = req.socket.remoteAddress ?? '';
    const forwardedFor = this.options.trustForwarded && clientFor ? `${clientFor}, ${peer}` : peer;
    out.push('x-forwarded-for', forwardedFor, 'x-forwarded-proto', 'http', 'x-forwarded-host', req.headers.host ?? '');
    out.push('x-request-id', requestId);
    return out;
  }

  private closeUnusedPools(): void {
    const live = this.options.routes.liveTargets();
    for (const [target, pool] of this.pools) {
      if (live.has(target)) continue;
      this.pools.delete(target);
      // close() lets requests already on it finish.
      void pool.close().catch(() => undefined);
    }
  }
}

/**
 * One request on its way through: an undici dispatch handler writing the target's answer to the
 * client as it arrives (pausing the target while the client is slow), and the retry of a swap.
 */
class ProxiedRequest implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | null = null;
  private target = '';
  private attempts = 0;
  private status = 0;
  private bytesIn = 0;
  private bytesOut = 0;
  private finished = false;
  private readonly hasBody: boolean;

  constructor(
    private readonly proxy: AppsProxy,
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private route: AppRoute,
    private readonly requestId: string,
    private readonly arrived: Arrival,
  ) {
    const length = req.headers['content-length'];
    this.hasBody = length !== undefined ? length !== '0' : req.headers['transfer-encoding'] !== undefined;
    res.once('close', () => {
      if (this.finished) return;
      // The client went away before its answer was complete: stop the target's work too (finished
      // first, so the abort's error is not taken for the target's).
      this.finish(this.res.headersSent ? this.status : CLIENT_CLOSED);
      this.controller?.abort(new Error('client closed the connection'));
    });
  }

  send(target: string): void {
    this.target = target;
    this.attempts += 1;
    const req = this.req;
    this.proxy.poolFor(target).dispatch(
      {
        path: req.url ?? '/',
        method: req.method ?? 'GET',
        headers: this.proxy.forwardedHeaders(req, this.requestId, false),
        // The client's stream itself: undici reads it as it writes (pausing it when the target is
        // slow), with no stream or iterator in between.
        body: this.hasBody ? req : null,
      },
      this,
    );
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.finished) {
      controller.abort(new Error('client closed the connection'));
      return;
    }
    // undici attaches its own 'data' listener to the body right after this call, in the same
    // synchronous step, so no chunk can flow before either listener is there. A retry never
    // carries a body, so this counts each byte once.
    if (this.hasBody) this.req.on('data', (chunk: Buffer) => (this.bytesIn += chunk.length));
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>, statusMessage?: string): void {
    if (statusCode < 200 || this.finished) return; // 1xx: the final answer follows
    this.status = statusCode;
    const named = connectionTokens(headers.connection);
    for (const name of Object.keys(headers)) if (HOP_BY_HOP.has(name) || named?.has(name)) delete headers[name];
    headers['x-request-id'] = this.requestId;
    this.res.writeHead(statusCode, statusMessage || undefined, headers);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.finished) return;
    this.bytesOut += chunk.length;
    if (!this.res.write(chunk) && !controller.paused) {
      controller.pause();
      this.res.once('drain', () => controller.resume());
    }
  }

  onResponseEnd(): void {
    if (this.finished) return;
    this.res.end();
    this.finish(this.status);
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    if (this.finished) return;
    const code = (error as { code?: string }).code;
    if (!this.res.headersSent && this.attempts === 1 && !this.hasBody && IDEMPOTENT.has(this.req.method ?? '') && code && GONE.has(code)) {
      void this.retry();
      return;
    }
    this.fail(error);
  }

  /**
   * The target went away before answering, as the old instance does at a deploy's switch: send
   * the request once more, to the route's new target, waiting a moment for the switch's message
   * when the route still names the one that failed.
   */
  private async retry(): Promise<void> {
    const slug = this.route.slug;
    const routes = this.proxy.options.routes;
    if (routes.get(slug)?.target === this.target) await routes.nextChange(slug, this.proxy.options.swapWaitMs);
    if (this.finished) return;
    const now = routes.get(slug);
    if (!now?.target) {
      this.fail(new Error('the app stopped while its request was retried'));
      return;
    }
    this.route = now;
    this.controller = null;
    this.send(now.target);
  }

  private fail(error: Error): void {
    if (this.res.headersSent) {
      // Part of the answer is out: cutting the connection is the only honest way to say it broke.
      this.res.destroy(error);
      this.finish(this.status);
      return;
    }
    this.proxy.options.logger.warn({ requestId: this.requestId, target: this.target, err: error.message }, 'apps proxy: target failed');
    this.res.setHeader('x-request-id', this.requestId);
    answerPlain(this.res, 502, 'The app did not answer.\n');
    this.finish(502);
  }

  private finish(status: number): void {
    if (this.finished) return;
    this.finished = true;
    this.proxy.options.record(rowOf(this.route, this.req, this.requestId, this.arrived, status, this.bytesIn, this.bytesOut));
  }
}

/**
 * When a request arrived: the wall-clock millisecond, which is also its id's (so a search by id
 * finds its row by time), and the monotonic clock its duration is measured on.
 */
interface Arrival {
  wallMs: number;
  monotonicMs: number;
}

function arrivalNow(): Arrival {
  return { wallMs: Date.now(), monotonicMs: performance.now() };
}

function rowOf(route: AppRoute, req: IncomingMessage, id: string, arrived: Arrival, status: number, bytesIn: number, bytesOut: number): AppRequestRow {
  const durationMs = performance.now() - arrived.monotonicMs;
  const url = req.url ?? '/';
  const query = url.indexOf('?');
  const path = query === -1 ? url : url.slice(0, query);
  return {
    id,
    at: new Date(arrived.wallMs),
    organizationId: route.organizationId,
    appId: route.appId,
    serviceId: route.serviceId,
    deploymentId: route.deploymentId,
    method: req.method ?? 'GET',
    path: path.length > PATH_MAX ? path.slice(0, PATH_MAX) : path,
    status,
    durationMs,
    bytesIn,
    bytesOut,
  };
}

/** `<slug>` of a Host `<slug>.<baseDomain>[:port]`, any case, a trailing dot allowed; null for any other host. */
export function slugOf(host: string | undefined, suffix: string): string | null {
  if (!host) return null;
  let name = host;
  const colon = name.lastIndexOf(':');
  if (colon !== -1) name = name.slice(0, colon);
  name = name.toLowerCase();
  if (name.endsWith('.')) name = name.slice(0, -1);
  if (!name.endsWith(suffix)) return null;
  const slug = name.slice(0, name.length - suffix.length);
  return slug === '' || slug.includes('.') ? null : slug;
}

function connectionTokens(value: string | string[] | undefined): Set<string> | null {
  if (value === undefined) return null;
  const text = Array.isArray(value) ? value.join(',') : value;
  const names = text
    .split(',')
    .map((token) => token.trim().toLowerCase())
    .filter((token) => token !== '' && token !== 'close' && token !== 'keep-alive' && token !== 'upgrade');
  return names.length === 0 ? null : new Set(names);
}

function splitTarget(target: string): [string, number] {
  const colon = target.lastIndexOf(':');
  return [target.slice(0, colon), Number(target.slice(colon + 1))];
}

function handshakeOf(req: IncomingMessage, headers: readonly string[]): string {
  let text = `${req.method} ${req.url} HTTP/1.1\r\n`;
  for (let i = 0; i < headers.length; i += 2) text += `${headers[i]}: ${headers[i + 1]}\r\n`;
  return `${text}\r\n`;
}

/** The proxy's own answers (no app, app stopped, app unreachable): plain text for whoever opened the address. */
function answerPlain(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'x-content-type-options': 'nosniff',
    'cache-control': 'no-store',
  });
  res.end(text);
}

function rawAnswer(socket: Duplex, status: number, reason: string, text: string, retryAfterSeconds?: number): void {
  const retry = retryAfterSeconds === undefined ? '' : `retry-after: ${retryAfterSeconds}\r\n`;
  socket.end(`HTTP/1.1 ${status} ${reason}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(text)}\r\n${retry}connection: close\r\n\r\n${text}`);
}

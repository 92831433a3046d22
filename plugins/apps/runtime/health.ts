import { request } from 'node:http';
import { connect, createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The health gate: a TCP connect to 127.0.0.1:PORT, retried until it succeeds, then (optionally)
 * `GET /` answered with any status. It answers the probe that failed, worded for the person reading
 * the deploy (`nothing listening on PORT=20001 after 30s`), or null once healthy. It gives up at
 * once when `exited` settles: a process that died is not waited for.
 */
export interface HealthOptions {
  port: number;
  timeoutMs: number;
  http: boolean;
  /** Settles when the process ends: the gate stops probing. */
  exited: Promise<unknown>;
}

const RETRY_MS = 50;
const CONNECT_TIMEOUT_MS = 1_000;

export async function healthGate(options: HealthOptions): Promise<string | null> {
  const { port, timeoutMs } = options;
  const deadline = performance.now() + timeoutMs;
  let ended = false;
  void options.exited.then(() => {
    ended = true;
  });
  const seconds = `${Math.round(timeoutMs / 100) / 10}s`;
  while (!(await accepts(port))) {
    if (ended) return `process ended before anything listened on PORT=${port}`;
    if (performance.now() >= deadline) return `nothing listening on PORT=${port} after ${seconds}`;
    await Promise.race([sleep(RETRY_MS), options.exited]);
  }
  if (!options.http) return null;
  const left = Math.max(deadline - performance.now(), 500);
  const answered = await answersGet(port, left);
  if (answered) return null;
  return `PORT=${port} accepted connections but GET / got no HTTP answer within ${seconds}`;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, timeout: CONNECT_TIMEOUT_MS });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}

function answersGet(port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const get = request({ host: '127.0.0.1', port, path: '/', method: 'GET', timeout: timeoutMs, headers: { 'user-agent': 'svc-health' } });
    get.once('response', (response) => {
      response.resume();
      resolve(true);
    });
    get.once('error', () => resolve(false));
    get.once('timeout', () => {
      get.destroy();
      resolve(false);
    });
    get.end();
  });
}

/** True when nothing on this machine listens on 127.0.0.1:PORT (a bind succeeds). */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

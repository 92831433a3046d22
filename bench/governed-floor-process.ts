/**
 * Child process for bench/stream-cost.ts (`--governed-floor`): a yardstick, not a gateway. It does
 * only the work no governed gateway can skip for a chat call, on node:http and undici, so that the
 * gateway's CPU per call splits into what governance itself costs (this minus the bare proxy) and
 * what our own path adds on top (the gateway minus this):
 *
 * - the key: SHA-256 of the bearer token, one Map lookup;
 * - the body parsed, its model and messages checked;
 * - admission in memory: a request window (GCRA), a concurrency count and a reservation in BigInt;
 * - a journal line written (writeSync) before the upstream sees the call, and another when settled;
 * - the upstream body serialised again under the upstream's model name, sent with undici's dispatch;
 * - the answer parsed, its model replaced, its usage priced in BigInt, serialised again; a stream's
 *   events each parsed, renamed and serialised again, its usage read from the usage chunk;
 * - the request-log row queued (and dropped every 100 ms: storing it is left out, as are metrics).
 *
 * No error paths, failover, timeouts, limits beyond one key or logging: what it leaves out makes
 * it cheaper than any real gateway could be, which is what a floor is for.
 */
import { createHash } from 'node:crypto';
import { closeSync, openSync, unlinkSync, writeSync } from 'node:fs';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Dispatcher, Pool } from 'undici';
import { exitWithParent, tellParent } from './ipc.ts';

/** The token stream-cost.ts sends to the floors. */
const TOKEN = 'sk-bench-upstream';
const RESERVED_MICROS = 2_000n;
const PRICE_MICROS_PER_TOKEN = { input: 150n, output: 600n };

interface Holder {
  keyId: string;
  organizationId: string;
  /** Theoretical arrival time of the request window (GCRA), ms. */
  arrival: number;
  inFlight: number;
  reservedMicros: bigint;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const holders = new Map<string, Holder>([[sha256(TOKEN), { keyId: 'key_1', organizationId: 'org_1', arrival: 0, inFlight: 0, reservedMicros: 0n }]]);
const rows: unknown[][] = [];
let sequence = 0;

function admit(holder: Holder): boolean {
  const now = performance.now();
  const arrival = Math.max(holder.arrival, now) + 0.001;
  if (arrival - now > 60_000 || holder.inFlight >= 10_000) return false;
  holder.arrival = arrival;
  holder.inFlight += 1;
  holder.reservedMicros += RESERVED_MICROS;
  return true;
}

function costMicros(usage: { prompt_tokens?: number; completion_tokens?: number } | undefined): bigint {
  return BigInt(usage?.prompt_tokens ?? 0) * PRICE_MICROS_PER_TOKEN.input + BigInt(usage?.completion_tokens ?? 0) * PRICE_MICROS_PER_TOKEN.output;
}

/** The upstream's answer, gathered (JSON) or handed on chunk by chunk (SSE). */
class UpstreamAnswer implements Dispatcher.DispatchHandler {
  private readonly chunks: Buffer[] = [];

  constructor(
    private readonly onChunk: ((chunk: Buffer) => void) | null,
    private readonly onEnd: (text: string) => void,
  ) {}

  onRequestStart(): void {}

  onResponseStart(): void {}

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.onChunk) this.onChunk(chunk);
    else this.chunks.push(chunk);
  }

  onResponseEnd(): void {
    this.onEnd(this.chunks.length === 0 ? '' : Buffer.concat(this.chunks).toString('utf8'));
  }

  onResponseError(): void {
    this.onEnd('');
  }
}

function serve(pool: Pool, journal: number, request: IncomingMessage, response: ServerResponse, raw: string): void {
  const holder = holders.get(sha256((request.headers.authorization ?? '').slice('Bearer '.length)));
  const body = JSON.parse(raw) as { model?: unknown; messages?: unknown; stream?: boolean };
  if (!holder || typeof body.model !== 'string' || !Array.isArray(body.messages) || !admit(holder)) {
    response.writeHead(400).end();
    return;
  }
  const model = body.model;
  const id = `req_${(sequence++).toString(36)}`;
  const started = performance.now();
  writeSync(journal, `${JSON.stringify(['admitted', id, holder.keyId, holder.organizationId, model, Date.now(), String(RESERVED_MICROS)])}\n`);
  const settle = (usage: { prompt_tokens?: number; completion_tokens?: number } | undefined) => {
    holder.inFlight -= 1;
    holder.reservedMicros -= RESERVED_MICROS;
    const row = [id, holder.keyId, holder.organizationId, model, 200, String(costMicros(usage)), usage?.prompt_tokens, usage?.completion_tokens, Math.round(performance.now() - started)];
    writeSync(journal, `${JSON.stringify(['row', ...row])}\n`);
    rows.push(row);
  };
  const headers = { 'x-request-id': id, 'x-ratelimit-remaining-requests': '99999' };
  const upstream = { method: 'POST' as const, path: '/v1/chat/completions', headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` } };
  const upstreamBody = JSON.stringify({ ...body, model: 'gpt-4o-mini' });
  if (body.stream !== true) {
    pool.dispatch(
      { ...upstream, body: upstreamBody },
      new UpstreamAnswer(null, (text) => {
        const answer = JSON.parse(text) as { model: string; usage?: { prompt_tokens?: number; completion_tokens?: number } };
        answer.model = model;
        settle(answer.usage);
        const out = JSON.stringify(answer);
        response.writeHead(200, { ...headers, 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(out) }).end(out);
      }),
    );
    return;
  }
  response.writeHead(200, { ...headers, 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  let pending = '';
  let usage: { prompt_tokens?: number; completion_tokens?: number } | undefined;
  const forward = (event: string) => {
    const data = event.slice('data: '.length);
    if (data === '[DONE]') return;
    const chunk = JSON.parse(data) as { model: string; usage?: typeof usage };
    if (chunk.usage) usage = chunk.usage;
    chunk.model = model;
    response.write(`data: ${JSON.stringify(chunk)}\n\n`);
  };
  const onChunk = (bytes: Buffer) => {
    pending += bytes.toString('utf8');
    for (let end = pending.indexOf('\n\n'); end !== -1; end = pending.indexOf('\n\n')) {
      forward(pending.slice(0, end));
      pending = pending.slice(end + 2);
    }
  };
  pool.dispatch(
    { ...upstream, body: upstreamBody },
    new UpstreamAnswer(onChunk, () => {
      settle(usage);
      response.end('data: [DONE]\n\n');
    }),
  );
}

async function main(): Promise<void> {
  const upstream = new URL(process.env.BENCH_UPSTREAM_URL ?? '');
  const pool = new Pool(upstream.origin, { connections: null });
  const journalPath = join(tmpdir(), `governed-floor-${process.pid}.journal`);
  const journal = openSync(journalPath, 'a', 0o600);
  const drop = setInterval(() => (rows.length = 0), 100);
  const server = http.createServer((request, response) => {
    const parts: Buffer[] = [];
    request.on('data', (part: Buffer) => parts.push(part));
    request.on('end', () => serve(pool, journal, request, response, Buffer.concat(parts).toString('utf8')));
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  exitWithParent(async () => {
    clearInterval(drop);
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await pool.close();
    closeSync(journal);
    unlinkSync(journalPath);
  });
  await tellParent({ type: 'ready', url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
}

main().catch(async (error: unknown) => {
  await tellParent({ type: 'error', message: `governed floor failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}` });
  process.exit(1);
});

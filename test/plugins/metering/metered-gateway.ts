import type { AddressInfo } from 'node:net';
import type { AppConfigInput } from '../../../config/schema.ts';
import type { RequestLogWriter } from '../../../plugins/metering/request-log-writer.ts';
import type { Coordination } from '../../../core/ports/coordination.ts';
import type { Database } from '../../../core/ports/database.ts';
import type { CreditLedger } from '../../../core/ports/metering.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { MeteringTokens } from '../../../plugins/metering/index.ts';
import { chatInputTokenBound, inputTokenProfile } from '../../../providers/input-token-bound.ts';
import { startFakeOpenAIUpstream, type FakeOpenAIOptions, type FakeOpenAIUpstream } from '../../fakes/fake-openai-upstream.ts';
import type { Test } from 'tap';
import type { AnyPlugin } from '../../../core/kernel/plugin.ts';
import { manifest as defaultManifest } from '../../../plugins/index.ts';
import { allPlugins, buildTestApp, createKey, realServersConfig, type TapLike, type TestApp } from '../../helpers/app.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';

/**
 * A listening gateway with the metering plugin configured by the test (startGateway in
 * test/helpers/gateway.ts takes no metering settings). One OpenAI-compatible fake upstream serves
 * the model `solo`; `mock-small` is the in-process mock. Both are priced with TEST_PRICES
 * ($1/M input, $0.50/M cached input, $2/M output), so one input token costs 1 µ$ and one output
 * token 2 µ$.
 *
 * Unless the test says otherwise: $1000 of opening credit and no operator default limits (no
 * rpm/tpm/concurrency unless a key sets its own), so every limit a test meets is one it set.
 */
export interface MeteredGatewayOptions {
  /** Merged over the defaults above (shallowly: pass whole `limits` when changing them). */
  metering?: Record<string, unknown>;
  /** Merged over the inference section (shallowly). */
  inference?: Record<string, unknown>;
  /** Storage section, e.g. realServersConfig().storage. */
  storage?: AppConfigInput['storage'];
  /** Share one owner token between instances on the same database. */
  ownerToken?: string;
  /** Reuse an upstream (two instances behind one fake); otherwise one is started (and closed on teardown). */
  upstream?: FakeOpenAIUpstream;
  upstreamOptions?: FakeOpenAIOptions;
  clock?: () => Date;
  /** Plugins of the test's own after the manifest's (code that uses the gateway's seams, as batches do). */
  extraPlugins?: AnyPlugin[];
}

export interface ChatResult {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

export interface MeteredGateway {
  test: TestApp;
  url: string;
  upstream: FakeOpenAIUpstream;
  db: Database;
  coordination: Coordination;
  ledger: CreditLedger;
  writer: RequestLogWriter;
  /** Writes every queued request-log row (and its ledger charge) now. */
  flush(): Promise<void>;
  /**
   * Waits until every admitted call has finished and settled (alert-only caps' alerts recorded),
   * then flushes: after it, no call made so far writes anything more.
   */
  settled(): Promise<void>;
  /** A key in the default project, scope `inference` unless `body` says otherwise (owner-created, so it may carry a spendCap). */
  newKey(body?: Record<string, unknown>): Promise<{ id: string; key: string }>;
  /** PATCH /client/keys/{id} as the owner; throws unless 200. */
  patchKey(id: string, body: Record<string, unknown>): Promise<void>;
  /** POST /v1/chat/completions over HTTP; a streamed answer's text is read to the end. */
  chat(key: string, body: Record<string, unknown>, init?: { signal?: AbortSignal }): Promise<ChatResult>;
  /** Sum of request_logs.cost_micros, optionally for one key. */
  loggedCost(keyId?: string): Promise<bigint>;
}

export const user = (content: string) => [{ role: 'user', content }];

/**
 * The input tokens billed for `[{role:'user', content}]` when the upstream reports none: 3 (reply
 * primer) + 4 (message framing) + ceil(bytes/4) — providers/token-estimate.ts.
 */
export const estimatedInputTokens = (content: string) => 3 + 4 + Math.ceil(Buffer.byteLength(content, 'utf8') / 4);

/**
 * What admission reserves for the input of `[{role:'user', content}]` on `solo`, whose tokenizer is
 * unknown (a loopback upstream): the byte bound of providers/input-token-bound.ts.
 */
export function reservedInputTokens(content: string): number {
  const reserved = chatInputTokenBound({ messages: user(content) }, inputTokenProfile([{ tokenizer: 'bytes', maxImageTokens: 0 }]));
  if (typeof reserved !== 'number') throw new Error('the byte bound is never counted in slices');
  return reserved;
}

export async function startMeteredGateway(t: TapLike, options: MeteredGatewayOptions = {}): Promise<MeteredGateway> {
  let upstream = options.upstream;
  if (!upstream) {
    const started = await startFakeOpenAIUpstream(options.upstreamOptions);
    t.teardown(() => started.close());
    upstream = started;
  }
  const inference = {
    providers: {
      primary: { type: 'openai', baseUrl: upstream.baseUrl, apiKey: 'sk-primary-secret', allowPrivateNetwork: true },
      mock: { type: 'mock' },
    },
    models: {
      solo: { routes: [{ provider: 'primary', model: 'up-solo' }], prices: TEST_PRICES },
      'mock-small': { routes: [{ provider: 'mock', model: 'mock-small' }], prices: TEST_PRICES },
    },
    timeouts: { connectMs: 2_000, firstByteMs: 10_000, totalMs: 30_000 },
    failover: { initialBackoffMs: 5, maxBackoffMs: 20, deadlineMs: 10_000, ttftTimeoutMs: 10_000, maxRetryAfterMs: 1_500, retriesPerRoute: 0, maxAttempts: 1 },
    circuitBreaker: { failureThreshold: 100_000 },
    ...options.inference,
  };
  const metering = {
    initialCreditUsd: 1000,
    limits: {
      keyDefaults: { requestsPerMinute: null, tokensPerMinute: null, concurrency: null },
      project: {},
      account: {},
    },
    ...options.metering,
  };
  const extraPlugins = options.extraPlugins ?? [];
  const test = await buildTestApp(t, {
    clock: options.clock,
    config: {
      ...(options.storage ? { storage: options.storage } : {}),
      ...(options.ownerToken ? { bootstrap: { ownerToken: options.ownerToken } } : {}),
    },
    ...(extraPlugins.length > 0 ? { manifest: [...defaultManifest, ...extraPlugins] } : {}),
    plugins: { ...allPlugins(), ...Object.fromEntries(extraPlugins.map((plugin) => [plugin.name, {}])), inference, metering },
  });
  await test.app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(test.app.server.address() as AddressInfo).port}`;
  const container = test.app.svc.container;
  const db = container.resolve(Tokens.Database);
  const writer = container.resolve(MeteringTokens.Writer);

  const flush = async () => {
    // A flush already running returns its promise and leaves rows queued meanwhile to the next
    // one: flush until nothing is queued (each round is a database write; a failing one throws below).
    for (let round = 0; round < 50 && writer.snapshot().queued > 0; round += 1) await writer.flush();
    if (writer.snapshot().queued > 0) throw new Error(`request log writer did not drain: ${JSON.stringify(writer.snapshot())}`);
  };

  return {
    test,
    url,
    upstream,
    db,
    coordination: container.resolve(Tokens.Coordination),
    ledger: container.resolve(MeteringTokens.Ledger),
    writer,
    flush,
    async settled() {
      await container.resolve(MeteringTokens.Admission).idle();
      await flush();
    },
    async newKey(body = {}) {
      const created = await createKey(test, { name: 'metering test', scopes: ['inference'], ...body });
      return { id: created.id, key: created.key };
    },
    async patchKey(id, body) {
      const response = await test.call('PATCH', `/client/keys/${id}`, { body });
      if (response.statusCode !== 200) throw new Error(`PATCH key ${id}: ${response.statusCode} ${response.body}`);
    },
    async chat(key, body, init = {}) {
      const response = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: init.signal,
      });
      const text = await response.text();
      let parsed: unknown = null;
      if ((response.headers.get('content-type') ?? '').includes('application/json')) parsed = JSON.parse(text);
      return { status: response.status, headers: response.headers, body: parsed, text };
    },
    async loggedCost(keyId) {
      const { rows } = await db.query<{ total: bigint }>('SELECT COALESCE(sum(cost_micros), 0)::bigint AS total FROM request_logs WHERE ($1::uuid IS NULL OR key_id = $1::uuid)', [
        keyId ?? null,
      ]);
      return BigInt(rows[0]!.total);
    },
  };
}

/** Polls `check` until it returns true or the deadline passes (test/helpers/eventually.ts). */
export { waitFor } from '../../helpers/eventually.ts';

/** The data frames of an SSE body (without the `data: ` prefix), `[DONE]` included. */
export function sseFrames(text: string): string[] {
  return text
    .split('\n\n')
    .map((block) => block.trim())
    .filter((block) => block.startsWith('data: '))
    .map((block) => block.slice('data: '.length));
}

/**
 * Runs `suite` twice: on the embedded backends (PGlite, in-memory coordination) and, when CI gives
 * them, on a fresh schema and key prefix of the real PostgreSQL and Redis.
 */
export function onEveryBackend(t: Test, suite: (t: Test, storage: AppConfigInput['storage'] | undefined) => void): void {
  t.test('embedded: PGlite + in-memory coordination', async (t) => {
    suite(t, undefined);
  });
  const real = realServersConfig();
  t.test('PostgreSQL + Redis', { skip: real ? false : 'TEST_PG_URL and TEST_REDIS_URL are not set' }, async (t) => {
    if (!real) return;
    t.teardown(() => real.dropSchema()); // registered first: runs after the gateway has closed
    suite(t, real.storage);
  });
}

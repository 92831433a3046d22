import type { AnyPlugin } from '../../../core/kernel/plugin.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import type { Database } from '../../../core/ports/database.ts';
import { MeteringTokens } from '../../../plugins/metering/index.ts';
import { manifest as defaultManifest } from '../../../plugins/index.ts';
import { startFakeOpenAIUpstream, type FakeOpenAIUpstream } from '../../fakes/fake-openai-upstream.ts';
import { allPlugins, buildTestApp, createKey, type TapLike, type TestApp } from '../../helpers/app.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';

/**
 * An embedded gateway (app.inject) with metering and every default plugin, plus the test's own
 * plugins, in front of one fake OpenAI upstream serving `solo` (chat), `embed` (embeddings), both
 * at TEST_PRICES, and `painter` (images, $0.04 each). No operator default limits: every limit a
 * test meets is one it set.
 */
export interface GovernedGateway {
  test: TestApp;
  upstream: FakeOpenAIUpstream;
  db: Database;
  /** Writes every queued request-log row and its ledger charge now. */
  flush(): Promise<void>;
  newKey(body?: Record<string, unknown>): Promise<{ id: string; key: string }>;
  /** The request-log row of a request id. */
  logRow(requestId: string): Promise<Record<string, any>>;
  /** Sum of ai_usage ledger lines (positive: what was charged). */
  charged(): Promise<bigint>;
}

/** `models` adds models of the test's own (the mock provider is there to serve them offline). */
export async function startGovernedGateway(t: TapLike, plugins: AnyPlugin[] = [], models: Record<string, unknown> = {}): Promise<GovernedGateway> {
  const upstream = await startFakeOpenAIUpstream();
  t.teardown(() => upstream.close());
  const inference = {
    providers: { primary: { type: 'openai', baseUrl: upstream.baseUrl, apiKey: 'sk-primary-secret', allowPrivateNetwork: true }, mock: { type: 'mock' } },
    models: {
      ...models,
      solo: { routes: [{ provider: 'primary', model: 'up-solo' }], prices: TEST_PRICES },
      embed: { routes: [{ provider: 'primary', model: 'up-embed' }], modalities: { input: ['text'], output: ['embedding'] }, prices: TEST_PRICES },
      painter: {
        routes: [{ provider: 'primary', model: 'up-painter' }],
        modalities: { input: ['text'], output: ['image'] },
        images: { sizes: ['1024x1024'] },
        prices: { ...TEST_PRICES, perImageUsd: 0.04 },
      },
    },
    failover: { retriesPerRoute: 0, maxAttempts: 1 },
  };
  const metering = { initialCreditUsd: 1000, limits: { keyDefaults: { requestsPerMinute: null, tokensPerMinute: null, concurrency: null }, project: {}, account: {} } };
  const test = await buildTestApp(t, {
    manifest: [...defaultManifest, ...plugins],
    plugins: { ...allPlugins(), ...Object.fromEntries(plugins.map((plugin) => [plugin.name, {}])), inference, metering },
  });
  const container = test.app.svc.container;
  const db = container.resolve(Tokens.Database);
  const writer = container.resolve(MeteringTokens.Writer);
  const flush = async () => {
    await container.resolve(MeteringTokens.Admission).idle();
    for (let round = 0; round < 50 && writer.snapshot().queued > 0; round += 1) await writer.flush();
  };
  return {
    test,
    upstream,
    db,
    flush,
    newKey: (body = {}) => createKey(test, { name: 'gateway call test', scopes: ['inference'], ...body }),
    async logRow(requestId) {
      await flush();
      const { rows } = await db.query('SELECT * FROM request_logs WHERE id = $1', [requestId]);
      if (rows.length !== 1) throw new Error(`no request_logs row for ${requestId}`);
      return rows[0]!;
    },
    async charged() {
      await flush();
      const { rows } = await db.query<{ total: string }>("SELECT COALESCE(-sum(amount_micros), 0)::text AS total FROM credit_ledger WHERE kind = 'ai_usage'");
      return BigInt(rows[0]!.total);
    },
  };
}

import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { closedPort } from './closed-port.ts';
import { startFakeAnthropicUpstream, type FakeAnthropicUpstream } from '../fakes/fake-anthropic-upstream.ts';
import { startFakeOpenAIUpstream, type FakeOpenAIUpstream } from '../fakes/fake-openai-upstream.ts';
import { allPlugins, buildTestApp, createKey, type TapLike, type TestApp, type TestAppOptions } from './app.ts';

/** $1 per million input tokens, $2 per million output tokens: easy to check by hand. */
export const TEST_PRICES = { inputPerMTokUsd: 1, cachedInputPerMTokUsd: 0.5, outputPerMTokUsd: 2 };

export interface Gateway {
  test: TestApp;
  /** http://127.0.0.1:port */
  url: string;
  key: string;
  client: OpenAI;
  primary: FakeOpenAIUpstream;
  secondary: FakeOpenAIUpstream;
  anthropic: FakeAnthropicUpstream;
}

/**
 * A listening gateway with three fake upstreams (two OpenAI-compatible, one Anthropic) and an
 * official OpenAI SDK client pointed at it. Models:
 *   `duo`     primary, then secondary
 *   `solo`    primary only
 *   `claude`  the Anthropic fake
 *   `mock-small` the in-process mock
 */
export async function startGateway(
  t: TapLike,
  overrides: {
    inference?: Record<string, unknown>;
    config?: TestAppOptions['config'];
    manifest?: TestAppOptions['manifest'];
    clock?: TestAppOptions['clock'];
    logStream?: TestAppOptions['logStream'];
    /** Merged into the named models' settings (e.g. `{ solo: { batch: true } }`). */
    inferenceModels?: Record<string, Record<string, unknown>>;
    /** Other plugins' settings, over their test defaults. */
    plugins?: Record<string, unknown>;
  } = {},
): Promise<Gateway> {
  const primary = await startFakeOpenAIUpstream();
  const secondary = await startFakeOpenAIUpstream();
  const anthropic = await startFakeAnthropicUpstream();
  t.teardown(() => Promise.all([primary.close(), secondary.close(), anthropic.close()]));
  const fast = { connectMs: 500, firstByteMs: 1_000, totalMs: 5_000 };
  const inference = {
    providers: {
      primary: { type: 'openai', baseUrl: primary.baseUrl, apiKey: 'sk-primary-secret', allowPrivateNetwork: true },
      secondary: { type: 'openai', baseUrl: secondary.baseUrl, apiKey: 'sk-secondary-secret', allowPrivateNetwork: true },
      claude: { type: 'anthropic', baseUrl: anthropic.url, apiKey: 'sk-ant-secret', allowPrivateNetwork: true },
      mock: { type: 'mock' },
      // Nothing listens there: a route to it fails to connect, for failover tests.
      dead: { type: 'openai', baseUrl: `http://127.0.0.1:${await closedPort()}/v1`, apiKey: 'sk-dead', allowPrivateNetwork: true },
    },
    models: {
      duo: {
        routes: [
          { provider: 'primary', model: 'up-primary' },
          { provider: 'secondary', model: 'up-secondary' },
        ],
        prices: TEST_PRICES,
      },
      solo: { routes: [{ provider: 'primary', model: 'up-solo' }], prices: TEST_PRICES },
      claude: { routes: [{ provider: 'claude', model: 'claude-test' }], prices: TEST_PRICES },
      'mock-small': { routes: [{ provider: 'mock', model: 'mock-small' }], prices: TEST_PRICES },
    },
    timeouts: fast,
    failover: { initialBackoffMs: 5, maxBackoffMs: 20, deadlineMs: 5_000, ttftTimeoutMs: 500, maxRetryAfterMs: 1_500 },
    circuitBreaker: { failureThreshold: 1_000 },
    ...overrides.inference,
  };
  for (const [name, patch] of Object.entries(overrides.inferenceModels ?? {})) {
    const models = inference.models as Record<string, Record<string, unknown>>;
    models[name] = { ...models[name], ...patch };
  }
  const plugins = { ...allPlugins(overrides.manifest), ...overrides.plugins, inference };
  const test = await buildTestApp(t, { config: overrides.config, manifest: overrides.manifest, clock: overrides.clock, logStream: overrides.logStream, plugins });
  await test.app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(test.app.server.address() as AddressInfo).port}`;
  const { key } = await createKey(test, { name: 'gateway test', scopes: ['inference'] });
  const client = new OpenAI({ apiKey: key, baseURL: `${url}/v1`, maxRetries: 0, timeout: 20_000 });
  return { test, url, key, client, primary, secondary, anthropic };
}

/**
 * A capability's two failover models for a test gateway: `<name>-duo` (primary, then secondary) and
 * `<name>-after-dead` (the route nothing listens on, then secondary), upstream models named
 * `up-<kind>-primary` and `up-<kind>-secondary`.
 */
export function failoverModels(name: string, kind: string, spec: Record<string, unknown>): Record<string, Record<string, unknown>> {
  return {
    [`${name}-duo`]: {
      ...spec,
      routes: [
        { provider: 'primary', model: `up-${kind}-primary` },
        { provider: 'secondary', model: `up-${kind}-secondary` },
      ],
    },
    [`${name}-after-dead`]: {
      ...spec,
      routes: [
        { provider: 'dead', model: 'up-dead' },
        { provider: 'secondary', model: `up-${kind}-secondary` },
      ],
    },
  };
}

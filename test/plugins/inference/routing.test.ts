import t from 'tap';
import { createMemoryCoordination } from '../../../adapters/memory/memory-coordination.ts';
import { UpstreamError, type EmbeddingProvider, type LanguageModelProvider, type Provider } from '../../../core/gateway/provider.ts';
import { CircuitBreaker } from '../../../plugins/inference/circuit-breaker.ts';
import { runWithFailover, waitOrAbort, type FailoverSettings } from '../../../plugins/inference/failover.ts';
import type { CatalogueModel } from '../../../plugins/inference/model-catalogue.ts';
import { inputTokenProfile } from '../../../providers/input-token-bound.ts';
import type { ProviderRegistry } from '../../../plugins/inference/provider-registry.ts';
import { planRoutes, type RouteCandidate } from '../../../plugins/inference/route-planner.ts';
import { CallSignal } from '../../../core/gateway/call-signal.ts';

const unused = async (): Promise<never> => {
  throw new Error('not called in these tests');
};
const language: LanguageModelProvider = { chat: unused, chatStream: () => ({ [Symbol.asyncIterator]: () => ({ next: unused }) }) };
const embeddings: EmbeddingProvider = { embed: unused };
const provider = (name: string, offered: Array<'language' | 'embeddings'> = ['language']): Provider => ({
  name,
  ...(offered.includes('language') ? { language } : {}),
  ...(offered.includes('embeddings') ? { embeddings } : {}),
});
const registry = (providers: Provider[]) => ({ get: (name: string) => providers.find((p) => p.name === name) }) as unknown as ProviderRegistry;

function model(routes: Array<{ provider: string; model?: string; weight?: number; priority?: number }>): CatalogueModel {
  return {
    id: 'm',
    created: 0,
    routes: routes.map((r) => ({ provider: r.provider, model: r.model ?? `${r.provider}-model`, weight: r.weight ?? 1, priority: r.priority })),
    modalities: { input: ['text'], output: ['text'] },
    batch: false,
    builtinTools: {},
    contextWindow: 1000,
    maxOutputTokens: 100,
    ownedBy: 'svc',
    development: false,
    inputProfile: inputTokenProfile([]),
  };
}

/** A deterministic sequence for Math.random's place. */
const sequence = (...values: number[]) => {
  let i = 0;
  return () => values[i++ % values.length]!;
};

t.test('route planning', async (t) => {
  const coordination = createMemoryCoordination();
  t.teardown(() => coordination.close());
  const breaker = new CircuitBreaker(coordination, { failureThreshold: 2, windowMs: 60_000, cooldownMs: 60_000 });
  await breaker.start();
  t.teardown(() => breaker.stop());
  const providers = registry([provider('a'), provider('b'), provider('c'), provider('embed-only', ['embeddings']), provider('both', ['language', 'embeddings'])]);
  const keys = (candidates: RouteCandidate[]) => candidates.map((c) => c.provider.name);

  t.test('routes without priorities are tried in config order', async (t) => {
    t.same(keys(planRoutes(model([{ provider: 'a' }, { provider: 'b' }, { provider: 'c' }]), 'language', providers, breaker)), ['a', 'b', 'c']);
  });

  t.test('lower priority numbers come first', async (t) => {
    t.same(
      keys(
        planRoutes(
          model([
            { provider: 'a', priority: 2 },
            { provider: 'b', priority: 1 },
          ]),
          'language',
          providers,
          breaker,
        ),
      ),
      ['b', 'a'],
    );
  });

  t.test('routes of equal priority share traffic by weight', async (t) => {
    const plan = model([
      { provider: 'a', weight: 3, priority: 0 },
      { provider: 'b', weight: 1, priority: 0 },
    ]);
    // Total weight 4: a draw below 3 picks a, at or above 3 picks b.
    t.same(keys(planRoutes(plan, 'language', providers, breaker, sequence(0.5))), ['a', 'b']);
    t.same(keys(planRoutes(plan, 'language', providers, breaker, sequence(0.8))), ['b', 'a']);
    let firstA = 0;
    const random = Math.random;
    for (let i = 0; i < 4000; i += 1) if (planRoutes(plan, 'language', providers, breaker, random)[0]!.provider.name === 'a') firstA += 1;
    t.ok(firstA > 2700 && firstA < 3300, `a first ${firstA} times in 4000 (expected about 3000)`);
  });

  t.test('a provider offering only embeddings is not offered for chat', async (t) => {
    t.same(keys(planRoutes(model([{ provider: 'embed-only' }, { provider: 'a' }]), 'language', providers, breaker)), ['a']);
  });

  t.test('a provider offering only chat is not offered for embeddings', async (t) => {
    const plan = model([{ provider: 'a' }, { provider: 'embed-only' }, { provider: 'both' }]);
    t.same(keys(planRoutes(plan, 'embeddings', providers, breaker)), ['embed-only', 'both']);
  });

  t.test('each route carries the interface of the modality asked for', async (t) => {
    const plan = model([{ provider: 'both' }]);
    t.equal(planRoutes(plan, 'embeddings', providers, breaker)[0]!.api, embeddings);
    t.equal(planRoutes(plan, 'language', providers, breaker)[0]!.api, language);
    t.same(planRoutes(plan, 'images', providers, breaker), [], 'nothing offers images');
  });

  t.test('a route whose circuit is open moves to the back but is still tried', async (t) => {
    await breaker.recordFailure('a/a-model');
    await breaker.recordFailure('a/a-model');
    t.ok(breaker.isOpen('a/a-model'));
    t.same(keys(planRoutes(model([{ provider: 'a' }, { provider: 'b' }]), 'language', providers, breaker)), ['b', 'a']);
  });
});

t.test('failover engine', async (t) => {
  const coordination = createMemoryCoordination();
  t.teardown(() => coordination.close());
  const breaker = new CircuitBreaker(coordination, { failureThreshold: 1000, windowMs: 60_000, cooldownMs: 60_000 });
  const settings: FailoverSettings = { maxAttempts: 10, retriesPerRoute: 2, initialBackoffMs: 100, maxBackoffMs: 400, maxRetryAfterMs: 1000, deadlineMs: 60_000 };
  const candidates: RouteCandidate<'language'>[] = ['a', 'b'].map((name) => ({ key: `${name}/m`, provider: provider(name), api: language, upstreamModel: 'm' }));

  t.test('backoff grows exponentially with full jitter, capped', async (t) => {
    const waits: number[] = [];
    const result = await runWithFailover(
      candidates,
      async (candidate) => {
        if (candidate.provider.name === 'a') throw new UpstreamError('server', 'boom', { status: 500 });
        return 'ok';
      },
      {
        settings: { ...settings, initialBackoffMs: 40, maxBackoffMs: 60 },
        breaker,
        signal: new CallSignal(),
        random: () => 0.5,
        now: () => 0,
        wait: async (ms) => void waits.push(ms),
      },
    );
    t.equal(result.value, 'ok');
    t.equal(result.attempts, 4, 'three tries on a, then b');
    t.same(waits, [20, 30], 'half (the jitter) of 40 ms, then of 80 ms capped at 60 ms; none before moving to b');
  });

  t.test('a retry-after within maxRetryAfterMs is waited out instead of the backoff', async (t) => {
    const waits: number[] = [];
    let calls = 0;
    const result = await runWithFailover(
      candidates,
      async () => {
        calls += 1;
        if (calls === 1) throw new UpstreamError('rate_limited', 'slow down', { status: 429, retryAfterMs: 800 });
        return 'ok';
      },
      { settings, breaker, signal: new CallSignal(), now: () => 0, wait: async (ms) => void waits.push(ms) },
    );
    t.equal(result.candidate.provider.name, 'a', 'the same route, after waiting');
    t.same(waits, [800]);
  });

  t.test('a retry-after longer than maxRetryAfterMs moves to the next route without waiting', async (t) => {
    const waits: number[] = [];
    const result = await runWithFailover(
      candidates,
      async (candidate) => {
        if (candidate.provider.name === 'a') throw new UpstreamError('rate_limited', 'slow down', { status: 429, retryAfterMs: 30_000 });
        return 'ok';
      },
      { settings, breaker, signal: new CallSignal(), now: () => 0, wait: async (ms) => void waits.push(ms) },
    );
    t.equal(result.candidate.provider.name, 'b');
    t.same(waits, []);
  });

  t.test('the default wait ends early when the client goes away', async (t) => {
    const client = new CallSignal();
    const waiting = waitOrAbort(60_000, client);
    client.abort(new Error('client gone'));
    await t.rejects(waiting, { name: 'ClientGoneError' });
  });

  t.test('no new attempt starts after the deadline', async (t) => {
    let clock = 0;
    let attempts = 0;
    const error = await runWithFailover(
      candidates,
      async () => {
        attempts += 1;
        clock += 600;
        throw new UpstreamError('connect', 'refused');
      },
      { settings: { ...settings, initialBackoffMs: 0, maxBackoffMs: 0, deadlineMs: 1000 }, breaker, signal: new CallSignal(), now: () => clock },
    ).catch((e: unknown) => e);
    t.equal(attempts, 2, 'the third attempt would start after the deadline');
    t.match(error, { status: 502, code: 'upstream_error' });
  });

  t.test('maxAttempts bounds the attempts across every route', async (t) => {
    let attempts = 0;
    const error = await runWithFailover(
      candidates,
      async () => {
        attempts += 1;
        throw new UpstreamError('server', 'down', { status: 503 });
      },
      { settings: { ...settings, maxAttempts: 3, initialBackoffMs: 0, maxBackoffMs: 0 }, breaker, signal: new CallSignal() },
    ).catch((e: unknown) => e);
    t.equal(attempts, 3);
    t.match(error, { status: 502, attempts: 3 });
  });

  t.test('an auth failure moves to the next route without retrying the same one', async (t) => {
    const seen: string[] = [];
    const result = await runWithFailover(
      candidates,
      async (candidate) => {
        seen.push(candidate.provider.name);
        if (candidate.provider.name === 'a') throw new UpstreamError('auth', 'bad key', { status: 401 });
        return 'ok';
      },
      { settings, breaker, signal: new CallSignal() },
    );
    t.same(seen, ['a', 'b']);
    t.equal(result.candidate.provider.name, 'b');
  });

  t.test('an upstream 404 (a route pointing at a missing model) fails over', async (t) => {
    const result = await runWithFailover(
      candidates,
      async (candidate) => {
        if (candidate.provider.name === 'a') throw new UpstreamError('client', 'no such model', { status: 404 });
        return 'ok';
      },
      { settings, breaker, signal: new CallSignal() },
    );
    t.equal(result.candidate.provider.name, 'b');
  });

  t.test('a client that goes away stops the search at once', async (t) => {
    const client = new CallSignal();
    let attempts = 0;
    const error = await runWithFailover(
      candidates,
      async () => {
        attempts += 1;
        client.abort(new Error('client gone'));
        throw new UpstreamError('aborted', 'cancelled');
      },
      { settings, breaker, signal: client },
    ).catch((e: unknown) => e);
    t.equal(attempts, 1);
    t.equal((error as Error).name, 'ClientGoneError');
  });
});

import { randomUUID } from 'node:crypto';
import t, { type Test } from 'tap';
import type { AppConfigInput } from '../../../config/schema.ts';
import type { Credential } from '../../../core/identity/credential.ts';
import type { AdmissionRequest, CallOutcome, MeteredUnits } from '../../../core/gateway/inference-admission.ts';
import type { Usage } from '../../../core/gateway/provider.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { ApiError } from '../../../core/kernel/errors.ts';
import { MeteringTokens } from '../../../plugins/metering/index.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';
import { onEveryBackend, startMeteredGateway, type MeteredGateway } from './metered-gateway.ts';

/**
 * Calls billed in units besides tokens, driven through the admission the /v1 routes use
 * (GovernedAdmission): reservations, settlement, the request log, the ledger and the usage report,
 * on both backends. Prices: TEST_PRICES for tokens (1 µ$ per input token, 2 µ$ per output token)
 * and, per unit, $0.01 a web search, images $0.04 (standard) or $0.08 (hd) at 1024x1024 and $0.02
 * otherwise, $0.000015 a character, $0.0001 a second of audio.
 */
const UNIT_MODELS = {
  searcher: {
    routes: [{ provider: 'mock', model: 'mock-small' }],
    builtinTools: { webSearch: { reservePerCall: 5 } },
    prices: { ...TEST_PRICES, perWebSearchUsd: 0.01 },
  },
  painter: {
    routes: [{ provider: 'mock', model: 'mock-small' }],
    modalities: { input: ['text'], output: ['image'] },
    images: { sizes: ['1024x1024', '512x512'], qualities: ['standard', 'hd'] },
    prices: { ...TEST_PRICES, perImageUsd: 0.02, images: { '1024x1024': { standard: 0.04, hd: 0.08 } } },
  },
  speaker: {
    routes: [{ provider: 'mock', model: 'mock-small' }],
    modalities: { input: ['text'], output: ['audio'] },
    speech: { voices: ['alloy'] },
    prices: { ...TEST_PRICES, perCharacterUsd: 0.000015 },
  },
  listener: {
    routes: [{ provider: 'mock', model: 'mock-small' }],
    modalities: { input: ['audio'], output: ['text'] },
    transcription: {},
    prices: { ...TEST_PRICES, perAudioSecondUsd: 0.0001 },
  },
};

const tokens = (input: number, output: number): Usage => ({ inputTokens: input, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: output, reasoningTokens: 0, estimated: false });

function outcome(usage: Usage | null, units?: MeteredUnits): CallOutcome {
  return { status: 200, errorCode: null, usage, units, provider: 'mock', upstreamModel: 'mock-small', attempts: 1, latencyMs: 5, ttftMs: null };
}

interface Harness {
  g: MeteredGateway;
  credential(key: string): Promise<Credential>;
  /** Admits a call and settles it with `result`; returns the request id. */
  call(credential: Credential, call: { model: string; endpoint?: string; estimate: AdmissionRequest['estimate']; result: CallOutcome }): Promise<string>;
  balance(): Promise<bigint>;
  row(id: string): Promise<Record<string, unknown>>;
}

async function harness(t: Test, storage: AppConfigInput['storage'] | undefined): Promise<Harness> {
  const g = await startMeteredGateway(t, { storage, inference: { models: UNIT_MODELS } });
  const container = g.test.app.svc.container;
  const admission = container.resolve(MeteringTokens.Admission);
  const authenticator = container.resolve(Tokens.Authenticator);
  return {
    g,
    credential: (key) => authenticator.authenticate(`Bearer ${key}`),
    async call(credential, { model, endpoint = '/v1/test', estimate, result }) {
      const requestId = `req_${randomUUID().replaceAll('-', '')}`;
      const admitted = await admission.admit({ credential, requestId, endpoint, model, stream: false, estimate, countedInputTokens: estimate.inputTokens });
      admitted.finish(result);
      return requestId;
    },
    async balance() {
      await g.settled();
      return (await g.ledger.balance(g.test.organizationId)) ?? 0n;
    },
    async row(id) {
      await g.settled();
      const { rows } = await g.db.query('SELECT cost_micros, units_cost_micros, web_searches, images, image_size, image_quality, characters, audio_seconds FROM request_logs WHERE id = $1', [
        id,
      ]);
      const row = rows[0]!;
      return { ...row, cost_micros: BigInt(row['cost_micros'] as bigint), units_cost_micros: BigInt(row['units_cost_micros'] as bigint) };
    },
  };
}

const refusedWith = async (t: Test, promise: Promise<unknown>, expected: { status: number; code: string; param?: string }) => {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  t.ok(error instanceof ApiError, 'refused with an API error');
  t.match(error, expected);
};

onEveryBackend(t, (t, storage) => {
  let h: Harness;
  t.before(async () => {
    h = await harness(t, storage);
  });

  t.test('settlement bills the searches that ran, not the ones reserved, at the model’s rate on top of tokens', async (t) => {
    const credential = await h.credential((await h.g.newKey()).key);
    const id = await h.call(credential, {
      model: 'searcher',
      estimate: { inputTokens: 100, maxOutputTokens: 100, units: { webSearches: 5 } },
      result: outcome(tokens(100, 10), { webSearches: 2 }),
    });
    t.match(await h.row(id), { cost_micros: 120n + 20_000n, units_cost_micros: 20_000n, web_searches: 2, images: 0 });
  });

  t.test('images are billed by size and quality, and at perImageUsd for a pair the table does not list', async (t) => {
    const credential = await h.credential((await h.g.newKey()).key);
    const hd = await h.call(credential, {
      model: 'painter',
      endpoint: '/v1/images/generations',
      estimate: { inputTokens: 0, maxOutputTokens: 0, units: { images: { count: 2, size: '1024x1024', quality: 'hd' } } },
      result: outcome(null, { images: { count: 2, size: '1024x1024', quality: 'hd' } }),
    });
    t.match(await h.row(hd), { cost_micros: 160_000n, units_cost_micros: 160_000n, images: 2, image_size: '1024x1024', image_quality: 'hd' });
    const small = await h.call(credential, {
      model: 'painter',
      estimate: { inputTokens: 0, maxOutputTokens: 0, units: { images: { count: 1, size: '512x512', quality: 'standard' } } },
      result: outcome(null, { images: { count: 1, size: '512x512', quality: 'standard' } }),
    });
    t.match(await h.row(small), { cost_micros: 20_000n, images: 1, image_size: '512x512' });
  });

  t.test('speech bills its characters; transcription its seconds of audio, each started second whole', async (t) => {
    const credential = await h.credential((await h.g.newKey()).key);
    const spoken = await h.call(credential, {
      model: 'speaker',
      estimate: { inputTokens: 0, maxOutputTokens: 0, units: { characters: 1000 } },
      result: outcome(null, { characters: 1000 }),
    });
    t.match(await h.row(spoken), { cost_micros: 15_000n, characters: 1000 });
    const heard = await h.call(credential, {
      model: 'listener',
      estimate: { inputTokens: 0, maxOutputTokens: 0, units: { audioSeconds: 60.2 } },
      result: outcome(tokens(0, 40), { audioSeconds: 60.2 }),
    });
    t.match(await h.row(heard), { cost_micros: 80n + 6_100n, units_cost_micros: 6_100n, audio_seconds: 61 });
  });

  t.test('the reservation includes the units’ cost: a cap that fits standard images refuses hd ones', async (t) => {
    const { key } = await h.g.newKey({ spendCap: { usd: 0.05, period: 'total', mode: 'blocking' } });
    const credential = await h.credential(key);
    const image = (quality: string) => ({ count: 1, size: '1024x1024', quality });
    await refusedWith(t, h.call(credential, { model: 'painter', estimate: { inputTokens: 0, maxOutputTokens: 0, units: { images: image('hd') } }, result: outcome(null) }), {
      status: 402,
      code: 'budget_exceeded',
    });
    const id = await h.call(credential, {
      model: 'painter',
      estimate: { inputTokens: 0, maxOutputTokens: 0, units: { images: image('standard') } },
      result: outcome(null, { images: image('standard') }),
    });
    t.match(await h.row(id), { cost_micros: 40_000n });
  });

  t.test('a unit the model has no price for is refused with 400 before anything is taken', async (t) => {
    const { id, key } = await h.g.newKey();
    const credential = await h.credential(key);
    await refusedWith(t, h.call(credential, { model: 'speaker', estimate: { inputTokens: 1, maxOutputTokens: 1, units: { webSearches: 1 } }, result: outcome(null) }), {
      status: 400,
      code: 'unit_not_priced',
      param: 'tools',
    });
    await refusedWith(
      t,
      h.call(credential, {
        model: 'speaker',
        estimate: { inputTokens: 0, maxOutputTokens: 0, units: { images: { count: 1, size: '256x256', quality: 'standard' } } },
        result: outcome(null),
      }),
      { status: 400, code: 'unit_not_priced', param: 'size' },
    );
    await h.g.settled();
    t.equal(await h.g.loggedCost(id), 0n, 'nothing logged, nothing billed');
  });

  t.test('the ledger, the request log and the usage report agree to the micro-dollar after a mix of calls with units', async (t) => {
    const { id: keyId, key } = await h.g.newKey();
    const credential = await h.credential(key);
    const before = await h.balance();
    const mix: Array<{ model: string; units: MeteredUnits; usage: Usage | null }> = [
      { model: 'searcher', units: { webSearches: 3 }, usage: tokens(333, 77) },
      { model: 'searcher', units: {}, usage: tokens(1, 1) },
      { model: 'painter', units: { images: { count: 3, size: '1024x1024', quality: 'standard' } }, usage: null },
      { model: 'painter', units: { images: { count: 1, size: '512x512', quality: 'hd' } }, usage: tokens(17, 0) },
      { model: 'speaker', units: { characters: 4097 }, usage: null },
      { model: 'speaker', units: { characters: 1 }, usage: null },
      { model: 'listener', units: { audioSeconds: 0.4 }, usage: tokens(0, 3) },
      { model: 'listener', units: { audioSeconds: 125 }, usage: tokens(0, 900) },
    ];
    for (const call of mix) {
      await h.call(credential, { model: call.model, estimate: { inputTokens: 400, maxOutputTokens: 1000, units: call.units }, result: outcome(call.usage, call.units) });
    }
    // Tokens: 333 + 154 + 1 + 2 + 17 + 6 + 1800 = 2313 µ$. Units: 30_000 + 120_000 + 20_000 + 61_455 (4097 × 15 µ$)
    // + 15 + 100 (one started second) + 12_500 = 244_070 µ$.
    const expected = 2_313n + 244_070n;
    const spent = before - (await h.balance());
    t.equal(spent, expected, 'the ledger');
    t.equal(await h.g.loggedCost(keyId), expected, 'the request log');
    const report = await h.g.test.call('GET', `/client/usage?keyId=${keyId}`);
    const body = report.json() as { totals: { costUsd: number; units: Record<string, number> } };
    t.equal(Math.round(body.totals.costUsd * 1e6), Number(expected), 'the usage report');
    t.same(body.totals.units, { webSearches: 3, images: 4, characters: 4098, audioSeconds: 126, costUsd: 0.24407 }, 'the report’s units and their cost');
  });

  t.test('request-log error codes are typed: catalogued ones and client_closed_request kept, an unknown one stored as internal_error', async (t) => {
    const credential = await h.credential((await h.g.newKey()).key);
    const ended = async (status: number, errorCode: string) => {
      const id = await h.call(credential, { model: 'searcher', estimate: { inputTokens: 1, maxOutputTokens: 1 }, result: { ...outcome(null), status, errorCode } });
      await h.g.settled();
      const { rows } = await h.g.db.query<{ error_code: string }>('SELECT error_code FROM request_logs WHERE id = $1', [id]);
      return rows[0]?.error_code;
    };
    t.equal(await ended(502, 'upstream_error'), 'upstream_error');
    t.equal(await ended(499, 'client_closed_request'), 'client_closed_request');
    t.equal(await ended(500, 'made_up_code'), 'internal_error');
  });

  t.test('chargeRequest spends one request of the key’s rate limit and no money, and refuses with 429 past it', async (t) => {
    const { id, key } = await h.g.newKey();
    await h.g.patchKey(id, { rateLimits: { requestsPerMinute: 2 } });
    const credential = await h.credential(key);
    const admission = h.g.test.app.svc.container.resolve(MeteringTokens.Admission);
    const before = await h.balance();
    t.match(await admission.chargeRequest(credential), { 'x-ratelimit-limit-requests': '2', 'x-ratelimit-remaining-requests': '1' });
    t.match(await admission.chargeRequest(credential), { 'x-ratelimit-remaining-requests': '0' });
    const error = await admission.chargeRequest(credential).catch((e: unknown) => e);
    t.match(error, { status: 429, code: 'rate_limit_exceeded', headers: { 'retry-after': /^\d+$/, 'x-ratelimit-remaining-requests': '0' } });
    await refusedWith(t, h.call(credential, { model: 'searcher', estimate: { inputTokens: 1, maxOutputTokens: 1 }, result: outcome(null) }), {
      status: 429,
      code: 'rate_limit_exceeded',
    });
    t.equal(await h.balance(), before, 'no money moved');
    t.equal(await h.g.loggedCost(id), 0n, 'and no row was written');
  });
});

t.test('the gateway refuses to start with a model whose image sizes and qualities are not all priced', async (t) => {
  const painter = { ...UNIT_MODELS.painter, prices: { ...TEST_PRICES, images: { '1024x1024': { standard: 0.04 } } } };
  await t.rejects(startMeteredGateway(t, { inference: { models: { painter } } }), {
    message: /plugins\.inference\.models\.painter\.prices\.images\.1024x1024\.hd: .*\n.*images\.512x512\.standard/,
  });
});

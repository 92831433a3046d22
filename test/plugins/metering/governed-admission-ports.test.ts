import { mock } from 'node:test';
import Fastify from 'fastify';
import t from 'tap';
import { createMemoryCoordination } from '../../../adapters/memory/memory-coordination.ts';
import type { AdmissionRequest, CallOutcome } from '../../../core/gateway/inference-admission.ts';
import type { KeyCredential, SessionCredential } from '../../../core/identity/credential.ts';
import {
  type AdmissionGate,
  type Coordination,
  type GateRecovery,
  type GateRequest,
  type GateResult,
  type GateSettlement,
  type Holdings,
  type LeaseStore,
  NOTHING_OUTSTANDING,
  type Outstanding,
  type RateEntry,
} from '../../../core/ports/coordination.ts';
import type { IdentityStores, KeyRateLimits, RecentCalls, SpendCap, SpendReader, SpendWindows } from '../../../core/ports/identity.ts';
import type { CreditLedger, RequestLogRow } from '../../../core/ports/metering.ts';
import type { ProvisionalCall } from '../../../plugins/metering/billing-journal.ts';
import type { BudgetAlerts } from '../../../plugins/metering/budget-alerts.ts';
import { CapPolicies } from '../../../plugins/metering/cap-policies.ts';
import { creditCounterKey } from '../../../plugins/metering/credit-grants.ts';
import { capCounterKey, GovernedAdmission, type GovernanceDeps, type GovernanceSettings, type LimitSet } from '../../../plugins/metering/governed-admission.ts';
import { priceSheet } from '../../../plugins/metering/pricing.ts';
import { RequestLogWriter } from '../../../plugins/metering/request-log-writer.ts';
import type { HeldMoney } from '../../../plugins/metering/spend-holds.ts';
import { testClock } from '../../helpers/jobs.ts';
// The gateway's codes (upstream_error, guardrail_blocked) are catalogued by the inference plugin, which
// metering always runs beside: a row's error code is stored only when it is a catalogued one.
import '../../../plugins/inference/inference-errors.ts';

// GovernedAdmission's own arithmetic, over the memory coordination adapter and in-memory stand-ins for
// its other ports (ledger, spend reader, budget alerts, spend holds, the recovery side of the gate):
// each test sets exactly what the ports report and checks exactly what admission asks of them. No
// database, so the file runs in about a second per mutant (mutation/groups.mjs, group
// ledger-admission). governed-admission.test.ts runs the same class over PGlite's real stores.

const ORG = 'org-1';
const PROJECT = 'project-1';
const MAKER = 'maker-key';
const KEY = 'key-1';

/** One input token costs 1 µ$, one output token 2 µ$; characters 3 µ$, audio 100 µ$ a second, a search 1,000 µ$, an image 40,000 µ$. */
const LIVE = priceSheet('priced', {
  inputPerMTokUsd: 1,
  cachedInputPerMTokUsd: 0.5,
  outputPerMTokUsd: 2,
  perCharacterUsd: 0.000003,
  perAudioSecondUsd: 0.0001,
  perWebSearchUsd: 0.001,
  perImageUsd: 0.04,
});
/** The batch price: half. */
const BATCH = priceSheet('priced', { inputPerMTokUsd: 0.5, cachedInputPerMTokUsd: 0.25, outputPerMTokUsd: 1 });
const TOKENS_ONLY = priceSheet('tokens-only', { inputPerMTokUsd: 1, outputPerMTokUsd: 2 });
const NO_LIMITS: LimitSet = { requestsPerMinute: null, tokensPerMinute: null, concurrency: null };
const WINDOWS_ZERO: SpendWindows = { todayMicros: 0n, weekMicros: 0n, monthMicros: 0n, totalMicros: 0n };
const ERROR = 50;

interface Options {
  settings?: Partial<GovernanceSettings>;
  accountCap?: SpendCap | null;
  projectCap?: SpendCap | null;
  requestLogging?: boolean;
  holds?: HeldMoney;
  batchPrices?: boolean;
  balance?: bigint;
  /** null: no listener. */
  onCharged?: GovernanceDeps['onCharged'] | null;
}

/** A GovernedAdmission whose ports are recorded and steered by the test. */
function harness(options: Options = {}) {
  const clock = testClock('2026-03-04T10:00:00.000Z');
  /** The coordination store's own clock (milliseconds); it does not move unless a test moves it. */
  const coordinationNow = { ms: 1_000_000 };
  const memory = createMemoryCoordination({ now: () => coordinationNow.ms });

  const admits: GateRequest[] = [];
  const settles: GateSettlement[] = [];
  const seededWindows: RateEntry[] = [];
  const others = new Map<string, Outstanding>();
  const recorded = { refreshes: 0, holdings: null as (() => Holdings) | null };
  const steer: { admit?: (request: GateRequest) => Promise<GateResult>; settle?: (settlement: GateSettlement) => Promise<void> } = {};
  const recovery: GateRecovery = {
    setHoldingsSource: (source) => void (recorded.holdings = source),
    refresh: () => void (recorded.refreshes += 1),
    othersOutstanding: async (scope) => others.get(scope) ?? NOTHING_OUTSTANDING,
    seedWindow: async (entry) => void seededWindows.push(entry),
    counts: () => ({ recoveries: 0, admissionsHeld: 0 }),
  };
  const gate: AdmissionGate = {
    admit: (request) => {
      admits.push(request);
      return steer.admit ? steer.admit(request) : memory.gate.admit(request);
    },
    settle: (settlement) => {
      settles.push(settlement);
      return steer.settle ? steer.settle(settlement) : memory.gate.settle(settlement);
    },
    recovery,
  };
  const renewals: Array<[string[], string, number]> = [];
  const leases: LeaseStore = {
    acquire: (...args) => memory.leases.acquire(...args),
    renew: (keys, leaseId, ttlMs) => {
      renewals.push([keys, leaseId, ttlMs]);
      return memory.leases.renew(keys, leaseId, ttlMs);
    },
    release: (...args) => memory.leases.release(...args),
    active: (key) => memory.leases.active(key),
  };
  const refreshes: Array<[Array<{ key: string; amount: number }>, number]> = [];
  const allowances = Object.create(memory.allowances) as Coordination['allowances'];
  allowances.give = (entries, ttlMs) => {
    refreshes.push([entries, ttlMs]);
    return memory.allowances.give(entries, ttlMs);
  };
  const coordination: Coordination = { ...memory, gate, leases, allowances };

  const balances = new Map<string, bigint>();
  const accountsEnsured: Array<[string, bigint]> = [];
  const ledger = {
    async ensureAccount(organizationId: string, initial: bigint) {
      accountsEnsured.push([organizationId, initial]);
      if (!balances.has(organizationId)) balances.set(organizationId, options.balance ?? initial);
    },
    async balance(organizationId: string) {
      return balances.get(organizationId) ?? null;
    },
  } as unknown as CreditLedger;

  /** What the request log holds, per `key:<id>`, `project:<id>` or `account:<id>`. */
  const spent = new Map<string, SpendWindows>();
  const recent = new Map<string, RecentCalls>();
  const recentSince: Date[] = [];
  const spend: SpendReader = {
    forKey: async (id) => spent.get(`key:${id}`) ?? WINDOWS_ZERO,
    forProject: async (id) => spent.get(`project:${id}`) ?? WINDOWS_ZERO,
    forOrganization: async (id) => spent.get(`account:${id}`) ?? WINDOWS_ZERO,
    recentCalls: async (scope, id, since) => {
      recentSince.push(since);
      return recent.get(`${scope}:${id}`) ?? { requests: 0, tokens: 0 };
    },
  };

  const identity = {
    organizations: { get: async () => ({ spendCap: options.accountCap ?? null, requestLogging: options.requestLogging ?? false }) },
    projects: { get: async () => ({ spendCap: options.projectCap ?? null }) },
  } as unknown as IdentityStores;

  const stored: RequestLogRow[] = [];
  const logLines: Array<Record<string, unknown>> = [];
  const logger = Fastify({ logger: { level: 'info', stream: { write: (line: string) => void logLines.push(JSON.parse(line)) } } }).log;
  const writer = new RequestLogWriter(
    {
      record: async (rows) => {
        stored.push(...rows);
        return rows.length;
      },
    },
    { flushIntervalMs: 1_000_000, batchSize: 500, maxQueue: 1000 },
    logger,
  );
  const enqueued: RequestLogRow[] = [];
  const enqueue = writer.enqueue.bind(writer);
  writer.enqueue = (row) => {
    enqueued.push(row);
    enqueue(row);
  };
  const provisional: ProvisionalCall[] = [];
  writer.admitted = (call) => void provisional.push(call);

  const alertsRecorded: Array<Record<string, unknown>> = [];
  const alertsKnown = new Set<string>();
  const alertFailure = { next: null as Error | null };
  const alerts = {
    alreadyRecorded: (scope: string, id: string) => alertsKnown.has(`${scope}:${id}`),
    record: async (input: Record<string, unknown>) => {
      if (alertFailure.next) throw alertFailure.next;
      alertsRecorded.push(input);
      alertsKnown.add(`${input['scope']}:${input['scopeId']}`);
      return true;
    },
  } as unknown as BudgetAlerts;

  const rejected: string[] = [];
  const charged: Array<[string, bigint]> = [];
  const settings: GovernanceSettings = {
    keyDefaults: NO_LIMITS,
    project: NO_LIMITS,
    account: NO_LIMITS,
    leaseTtlMs: 60_000,
    counterTtlMs: 120_000,
    initialCreditMicros: 1_000_000n,
    ...options.settings,
  };
  const admission = new GovernedAdmission({
    coordination,
    ledger,
    spend,
    policies: new CapPolicies(identity, 60_000),
    writer,
    alerts,
    prices: new Map([
      ['priced', LIVE],
      ['tokens-only', TOKENS_ONLY],
    ]),
    ...(options.batchPrices === false ? {} : { batchPrices: new Map([['priced', BATCH]]) }),
    ...(options.holds ? { holds: options.holds } : {}),
    clock,
    logger,
    settings,
    onRejected: (kind) => void rejected.push(kind),
    ...(options.onCharged === null ? {} : { onCharged: options.onCharged ?? ((model, micros) => void charged.push([model, micros])) }),
  });

  const session: SessionCredential = {
    kind: 'session',
    sessionId: 'session-1',
    personId: 'person-1',
    email: 'owner@admission.test',
    organizationId: ORG,
    role: 'owner',
    scopes: new Set(),
    csrfTokenHash: null,
  };
  const key = (limits: Partial<KeyRateLimits> = {}, spendCap: SpendCap | null = null, ancestors: KeyCredential['ancestors'] = [], keyId = KEY): KeyCredential => ({
    kind: 'key',
    keyId,
    keyName: 'test',
    organizationId: ORG,
    projectId: PROJECT,
    appId: null,
    scopes: new Set(),
    modelAllowList: null,
    expiresAt: null,
    spendCap,
    rateLimits: { ...NO_LIMITS, ...limits },
    ancestors,
  });
  let requests = 0;
  const request = (credential: AdmissionRequest['credential'], overrides: Partial<AdmissionRequest> = {}): AdmissionRequest => ({
    credential,
    requestId: `request-${(requests += 1)}`,
    endpoint: '/v1/chat/completions',
    model: 'priced',
    stream: false,
    estimate: { inputTokens: 10, maxOutputTokens: 20 },
    countedInputTokens: 10,
    ...overrides,
  });
  const counter = async (key: string) => (await memory.allowances.peek([key]))[0];
  const errors = () => logLines.filter((line) => line['level'] === ERROR);

  return {
    admission,
    clock,
    coordinationNow,
    memory,
    admits,
    settles,
    seededWindows,
    others,
    recorded,
    steer,
    renewals,
    refreshes,
    balances,
    accountsEnsured,
    spent,
    recent,
    recentSince,
    writer,
    stored,
    enqueued,
    provisional,
    alertsRecorded,
    alertFailure,
    rejected,
    charged,
    settings,
    session,
    key,
    request,
    counter,
    errors,
  };
}

const served = (inputTokens: number, outputTokens: number, extra: Partial<CallOutcome> = {}): CallOutcome => ({
  status: 200,
  errorCode: null,
  usage: { inputTokens, outputTokens, cachedInputTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0, estimated: false },
  provider: 'fake',
  upstreamModel: 'upstream-priced',
  attempts: 1,
  latencyMs: 5,
  ttftMs: null,
  ...extra,
});

const refusalOf = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('expected a refusal');
    },
    (error: unknown) => error as { code: string; message: string; status: number; headers?: Record<string, string>; param?: string },
  );

/** A promise the test resolves or rejects when it chooses. */
function deferred() {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<void>((yes, no) => {
    resolve = yes;
    reject = no;
  });
  return { promise, resolve, reject };
}

const CREDIT = creditCounterKey(ORG);

t.test('the gate is asked, in one request, for every scope of a key: its own, its makers, its project and its account', async (t) => {
  const h = harness({
    settings: {
      keyDefaults: { requestsPerMinute: 9, tokensPerMinute: null, concurrency: 3 },
      project: { requestsPerMinute: 11, tokensPerMinute: 2000, concurrency: null },
      account: { requestsPerMinute: 13, tokensPerMinute: null, concurrency: 4 },
    },
    projectCap: { limitMicros: 700n, period: 'month', mode: 'blocking' },
    accountCap: { limitMicros: 800n, period: 'total', mode: 'blocking' },
  });
  const now = h.clock();
  const credential = h.key({ requestsPerMinute: 5, tokensPerMinute: 1000, concurrency: 2 }, { limitMicros: 500n, period: 'day', mode: 'blocking' }, [
    { keyId: MAKER, spendCap: { limitMicros: 600n, period: 'week', mode: 'alert' }, rateLimits: { requestsPerMinute: 7, tokensPerMinute: null, concurrency: null } },
  ]);
  (await h.admission.admit(h.request(credential))).finish(served(1, 1));
  (await h.admission.admit(h.request(credential))).finish(served(1, 1));
  const first = h.admits[0];
  const minute = { periodMs: 60_000 };
  t.same(
    { ...first, leaseId: undefined },
    {
      requests: [
        { key: `rpm:key:${KEY}`, limit: 5, ...minute, cost: 1 },
        { key: `rpm:key:${MAKER}`, limit: 7, ...minute, cost: 1 },
        { key: `rpm:project:${PROJECT}`, limit: 11, ...minute, cost: 1 },
        { key: `rpm:account:${ORG}`, limit: 13, ...minute, cost: 1 },
      ],
      leases: [
        { key: `conc:key:${KEY}`, limit: 2 },
        { key: `conc:key:${MAKER}`, limit: 3 },
        { key: `conc:account:${ORG}`, limit: 4 },
      ],
      leaseId: undefined,
      leaseTtlMs: 60_000,
      tokens: [
        { key: `tpm:key:${KEY}`, limit: 1000, ...minute, cost: 30 },
        { key: `tpm:project:${PROJECT}`, limit: 2000, ...minute, cost: 30 },
      ],
      takes: [
        { key: CREDIT, amount: 50, shrink: true },
        { key: capCounterKey('key', KEY, 'day', now), amount: 50, shrink: false, headroom: 500 },
        { key: capCounterKey('project', PROJECT, 'month', now), amount: 50, shrink: false, headroom: 700 },
        { key: capCounterKey('account', ORG, 'total', now), amount: 50, shrink: false, headroom: 800 },
      ],
      counterTtlMs: 120_000,
    },
    "the maker's alert-only cap takes nothing; a limit the maker leaves unset falls back to the keys' default",
  );
  const prefix = first!.leaseId.split(':')[0];
  t.match(prefix, /^[0-9a-f-]{36}$/, 'lease ids carry a per-process random prefix');
  t.same([...new Set(h.admits.map((asked) => asked.leaseId))], [`${prefix}:1`, `${prefix}:2`], 'and a sequence number counting up');
});

t.test("a session's call counts against its account only", async (t) => {
  const h = harness({
    settings: { project: { requestsPerMinute: 11, tokensPerMinute: null, concurrency: null }, account: { requestsPerMinute: 13, tokensPerMinute: null, concurrency: null } },
  });
  const admitted = await h.admission.admit(h.request(h.session));
  t.same(h.admits[0]!.requests, [{ key: `rpm:account:${ORG}`, limit: 13, periodMs: 60_000, cost: 1 }]);
  t.same([...h.recorded.holdings!().outstanding.keys()], [`account:${ORG}`], 'held in flight under the account alone');
  admitted.finish(served(1, 1));
});

t.test('a model without prices and a unit its model has no price for are refused before anything is taken', async (t) => {
  const h = harness();
  t.match(await refusalOf(h.admission.admit(h.request(h.session, { model: 'unpriced' }))), {
    code: 'model_not_priced',
    message: 'Model unpriced has no prices; refusing to serve it unmetered',
  });
  const refused = await refusalOf(h.admission.admit(h.request(h.session, { model: 'tokens-only', estimate: { inputTokens: 1, maxOutputTokens: 1, units: { characters: 5 } } })));
  t.match(refused, { code: 'unit_not_priced', message: 'Model tokens-only has no price per character', param: 'input' });
  t.same(h.admits, [], 'the gate was not asked');
});

t.test('an admitted call is journalled before it runs: its counted input and input units, at the price of what it counted', async (t) => {
  const h = harness();
  const credential = h.key();
  const estimate = { inputTokens: 100, maxOutputTokens: 20, units: { characters: 4, audioSeconds: 2.5, webSearches: 1 } };
  await h.admission.admit(h.request(credential, { countedInputTokens: 7, estimate }));
  await h.admission.admit(h.request(credential, { countedInputTokens: 8, estimate: { inputTokens: 1, maxOutputTokens: 1, units: { characters: 2 } } }));
  await h.admission.admit(h.request(credential, { countedInputTokens: 9, estimate: { inputTokens: 1, maxOutputTokens: 1, units: { audioSeconds: 1 } } }));
  await h.admission.admit(h.request(credential, { countedInputTokens: 6, estimate: { inputTokens: 1, maxOutputTokens: 1, units: { webSearches: 2 } } }));
  await h.admission.admit(h.request(credential, { countedInputTokens: 5 }));
  const context = { organizationId: ORG, projectId: PROJECT, keyId: KEY, endpoint: '/v1/chat/completions', model: 'priced', priceVersion: LIVE.version, streamed: false };
  const createdAt = h.clock();
  t.same(h.provisional, [
    // 7 input tokens (7 µ$), 4 characters (12 µ$), 3 billed seconds of audio (300 µ$); the search is output.
    { id: 'request-1', context, inputTokens: 7, units: { characters: 4, audioSeconds: 3 }, costMicros: 319n, unitsCostMicros: 312n, createdAt },
    { id: 'request-2', context, inputTokens: 8, units: { characters: 2 }, costMicros: 14n, unitsCostMicros: 6n, createdAt },
    { id: 'request-3', context, inputTokens: 9, units: { audioSeconds: 1 }, costMicros: 109n, unitsCostMicros: 100n, createdAt },
    { id: 'request-4', context, inputTokens: 6, units: undefined, costMicros: 6n, unitsCostMicros: undefined, createdAt },
    { id: 'request-5', context, inputTokens: 5, units: undefined, costMicros: 5n, unitsCostMicros: undefined, createdAt },
  ]);
  t.notOk('unitsCostMicros' in h.provisional[4]! && h.provisional[4]!.unitsCostMicros !== undefined, 'no units: no units cost');
});

t.test('calls share one journal context per endpoint, model, stream flag and batch price', async (t) => {
  const h = harness();
  const credential = h.key();
  await h.admission.admit(h.request(credential));
  await h.admission.admit(h.request(credential));
  await h.admission.admit(h.request(credential, { stream: true }));
  await h.admission.admit(h.request(credential, { model: 'tokens-only' }));
  await h.admission.admit(h.request(credential, { endpoint: '/v1/responses' }));
  await h.admission.admit(h.request(credential, { hold: { holdId: 'hold-1', batchId: 'batch-1' } }));
  const [a, b, streamed, other, responses, batch] = h.provisional.map((call) => call.context);
  t.equal(a, b, 'the same object for the same kind of call');
  t.match(streamed, { streamed: true, model: 'priced' });
  t.match(other, { model: 'tokens-only', priceVersion: TOKENS_ONLY.version });
  t.match(responses, { endpoint: '/v1/responses' });
  t.match(batch, { priceVersion: BATCH.version });
  t.equal(new Set([a, streamed, other, responses, batch]).size, 5, 'each different kind of call its own');
  const sessionCall = await h.admission.admit(h.request(h.session));
  t.strictSame(h.provisional.at(-1)!.context, {
    organizationId: ORG,
    projectId: null,
    keyId: null,
    endpoint: '/v1/chat/completions',
    model: 'priced',
    priceVersion: LIVE.version,
    streamed: false,
  });
  sessionCall.finish(served(1, 1));
});

t.test('a call is admitted even when journalling it fails; the failure is logged', async (t) => {
  const h = harness();
  h.writer.admitted = () => {
    throw new Error('disk full');
  };
  const admitted = await h.admission.admit(h.request(h.session));
  t.match(h.errors(), [{ msg: 'journaling an admitted call failed', requestId: 'request-1', err: { message: 'disk full' } }]);
  admitted.finish(served(1, 1));
});

t.test("a finished call's row records the call: who, what it used and cost, how it went, when it was admitted", async (t) => {
  const h = harness({ requestLogging: true });
  const credential = h.key({}, null, [{ keyId: MAKER, spendCap: null, rateLimits: NO_LIMITS }]);
  const admitted = await h.admission.admit(h.request(credential, { stream: true }));
  const createdAt = h.clock();
  h.clock.advance(5_000);
  const bodies = { request: { prompt: 'hi' }, response: { text: 'hello' } };
  admitted.finish({
    status: 502,
    errorCode: 'upstream_error',
    usage: { inputTokens: 10, outputTokens: 4, cachedInputTokens: 2, cacheWriteTokens: 1, reasoningTokens: 3, estimated: true },
    units: { webSearches: 2, images: { count: 1, size: '1024x1024', quality: 'high' }, characters: 5, audioSeconds: 1.2 },
    provider: 'fake',
    upstreamModel: 'upstream-priced',
    attempts: 2,
    latencyMs: 40,
    ttftMs: 12,
    bodies,
  });
  await h.admission.idle();
  // Tokens: 7 plain input + 1 cached (0.5) + 1 cache write + 4 output (8) = 16.5 µ$, rounded up once with the units;
  // units: 2 searches 2,000 µ$, an image 40,000 µ$, 5 characters 15 µ$, 2 billed seconds 200 µ$.
  t.strictSame(h.enqueued, [
    {
      id: 'request-1',
      organizationId: ORG,
      projectId: PROJECT,
      keyId: KEY,
      makerKeyIds: [MAKER],
      endpoint: '/v1/chat/completions',
      model: 'priced',
      provider: 'fake',
      upstreamModel: 'upstream-priced',
      statusCode: 502,
      errorCode: 'upstream_error',
      inputTokens: 10,
      cachedInputTokens: 2,
      cacheWriteTokens: 1,
      outputTokens: 4,
      reasoningTokens: 3,
      usageEstimated: true,
      units: { webSearches: 2, images: { count: 1, size: '1024x1024', quality: 'high' }, characters: 5, audioSeconds: 2 },
      costMicros: 42_232n,
      unitsCostMicros: 42_215n,
      priceVersion: LIVE.version,
      latencyMs: 40,
      ttftMs: 12,
      streamed: true,
      attempts: 2,
      createdAt,
      bodies,
    },
  ]);
});

t.test("a session's row has no key, project or makers; a call without usage or units records zeros and no units", async (t) => {
  const h = harness({ requestLogging: true });
  const admitted = await h.admission.admit(h.request(h.session));
  admitted.finish({ ...served(0, 0), usage: null, units: { images: { count: 0, size: '1024x1024', quality: null }, audioSeconds: 0, characters: 0, webSearches: 0 } });
  await h.admission.idle();
  t.strictSame(h.enqueued, [
    {
      id: 'request-1',
      organizationId: ORG,
      projectId: null,
      keyId: null,
      makerKeyIds: [],
      endpoint: '/v1/chat/completions',
      model: 'priced',
      provider: 'fake',
      upstreamModel: 'upstream-priced',
      statusCode: 200,
      errorCode: null,
      inputTokens: 0,
      cachedInputTokens: 0,
      cacheWriteTokens: 0,
      outputTokens: 0,
      reasoningTokens: 0,
      usageEstimated: false,
      units: undefined,
      costMicros: 0n,
      unitsCostMicros: 0n,
      priceVersion: LIVE.version,
      latencyMs: 5,
      ttftMs: null,
      streamed: false,
      attempts: 1,
      createdAt: h.clock(),
      bodies: null,
    },
  ]);
  t.equal(h.enqueued[0]!.units, undefined, 'units used none of: no units');
});

t.test('bodies are kept only where the account logs them and the call has them', async (t) => {
  const bodies = { request: { prompt: 'hi' }, response: { text: 'hello' } };
  const off = harness({ requestLogging: false });
  const quiet = await off.admission.admit(off.request(off.session));
  t.equal(quiet.logBodies, false);
  quiet.finish(served(1, 1, { bodies }));
  const on = harness({ requestLogging: true });
  const loud = await on.admission.admit(on.request(on.session));
  t.equal(loud.logBodies, true);
  loud.finish(served(1, 1));
  t.same([off.enqueued[0]!.bodies, on.enqueued[0]!.bodies], [null, null]);
});

t.test('settling gives back what was reserved beyond the real cost and corrects the token estimate, in one gate step', async (t) => {
  const h = harness({ balance: 1000n });
  const credential = h.key({ tokensPerMinute: 1000, concurrency: 1 }, { limitMicros: 5000n, period: 'day', mode: 'blocking' });
  const cap = capCounterKey('key', KEY, 'day', h.clock());
  const admitted = await h.admission.admit(h.request(credential));
  t.same([await h.counter(CREDIT), await h.counter(cap)], [950, -50], 'the estimate (50 µ$) reserved');
  t.match(await h.admission.peekHeaders(credential), { 'x-ratelimit-remaining-tokens': '970' });
  await admitted.finish(served(5, 5));
  t.same(h.settles, [
    {
      leaseKeys: [`conc:key:${KEY}`],
      leaseId: h.admits[0]!.leaseId,
      gives: [
        { key: CREDIT, amount: 35 },
        { key: cap, amount: 35 },
      ],
      counterTtlMs: 120_000,
      tokens: [{ key: `tpm:key:${KEY}`, limit: 1000, periodMs: 60_000, cost: -20 }],
    },
  ]);
  t.same([await h.counter(CREDIT), await h.counter(cap)], [985, -15], 'the real cost (15 µ$) stays taken');
  t.match(await h.admission.peekHeaders(credential), { 'x-ratelimit-remaining-tokens': '990' }, 'the 10 tokens used stay taken');
  t.same(h.charged, [['priced', 15n]]);
  t.same(h.errors(), [], 'every unit was priced: nothing logged');
});

t.test('a call that used units its model has no price for is billed nothing for them, and that is logged', async (t) => {
  const h = harness();
  const admitted = await h.admission.admit(h.request(h.session, { model: 'tokens-only' }));
  admitted.finish(served(1, 1, { units: { characters: 5 } }));
  await h.admission.idle();
  t.equal(h.enqueued[0]!.costMicros, 3n);
  t.match(h.errors(), [{ msg: 'a call used units its model has no price for; they were billed nothing', requestId: 'request-1', model: 'tokens-only', units: ['characters'] }]);
});

t.test('an error code no catalogue names is stored as internal_error and logged', async (t) => {
  const h = harness();
  (await h.admission.admit(h.request(h.session))).finish(served(0, 0, { status: 500, errorCode: 'no_such_code' }));
  await h.admission.idle();
  t.equal(h.enqueued[0]!.errorCode, 'internal_error');
  t.match(h.errors(), [{ msg: 'a call ended with an error code no catalogue names; logged as internal_error', requestId: 'request-1', errorCode: 'no_such_code' }]);
});

t.test('a call refused before admission gets a row of its own: its status and code, no usage, no cost, no bodies', async (t) => {
  const h = harness({ requestLogging: true });
  h.admission.refused({ credential: h.key(), requestId: 'refused-1', endpoint: '/v1/chat/completions', model: 'priced', status: 400, errorCode: 'guardrail_blocked' });
  h.admission.refused({ credential: h.session, requestId: 'refused-2', endpoint: '/v1/embeddings', model: 'unknown-model', status: 400, errorCode: 'no_such_code' });
  const common = {
    provider: null,
    upstreamModel: null,
    inputTokens: 0,
    cachedInputTokens: 0,
    cacheWriteTokens: 0,
    outputTokens: 0,
    reasoningTokens: 0,
    usageEstimated: false,
    costMicros: 0n,
    latencyMs: 0,
    ttftMs: null,
    streamed: false,
    attempts: 0,
    createdAt: h.clock(),
    bodies: null,
  };
  t.strictSame(h.enqueued, [
    {
      id: 'refused-1',
      organizationId: ORG,
      projectId: PROJECT,
      keyId: KEY,
      endpoint: '/v1/chat/completions',
      model: 'priced',
      statusCode: 400,
      errorCode: 'guardrail_blocked',
      priceVersion: LIVE.version,
      ...common,
    },
    {
      id: 'refused-2',
      organizationId: ORG,
      projectId: null,
      keyId: null,
      endpoint: '/v1/embeddings',
      model: 'unknown-model',
      statusCode: 400,
      errorCode: 'internal_error',
      priceVersion: null,
      ...common,
    },
  ]);
  t.match(h.errors(), [{ requestId: 'refused-2', errorCode: 'no_such_code' }]);
});

t.test('requests per minute: the refusal says when a request fits again, in whole seconds', async (t) => {
  const h = harness();
  const credential = h.key({ requestsPerMinute: 2 });
  (await h.admission.admit(h.request(credential))).finish(served(1, 1));
  (await h.admission.admit(h.request(credential))).finish(served(1, 1));
  const refused = await refusalOf(h.admission.admit(h.request(credential)));
  t.match(refused, { code: 'rate_limit_exceeded', status: 429, message: 'Too many requests per minute for this key, project or account; retry after the time in retry-after' });
  t.same(refused.headers, { 'x-ratelimit-limit-requests': '2', 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': '1m0s', 'retry-after': '30' });
  h.coordinationNow.ms += 29_500;
  t.equal((await refusalOf(h.admission.admit(h.request(credential)))).headers!['retry-after'], '1', 'half a second left rounds up to one');
  t.same(h.rejected, ['requests', 'requests']);
});

t.test('tokens per minute: only a call larger than every limit allows is told to lower max_tokens', async (t) => {
  const h = harness({ settings: { project: { requestsPerMinute: null, tokensPerMinute: 1000, concurrency: null } } });
  const credential = h.key({ tokensPerMinute: 100 });
  const tooBig = await refusalOf(h.admission.admit(h.request(credential, { estimate: { inputTokens: 50, maxOutputTokens: 51 } })));
  t.match(tooBig, { code: 'rate_limit_exceeded', message: 'This request may use up to 101 tokens, more than the tokens-per-minute limit allows at once; lower max_tokens' });
  (await h.admission.admit(h.request(credential, { estimate: { inputTokens: 5, maxOutputTokens: 5 } }))).finish(served(5, 5));
  const wait = await refusalOf(h.admission.admit(h.request(credential, { estimate: { inputTokens: 50, maxOutputTokens: 50 } })));
  t.match(
    wait,
    { code: 'rate_limit_exceeded', message: 'Too many tokens per minute for this key, project or account; retry after the time in retry-after' },
    'exactly the limit fits a full bucket',
  );
  t.same(wait.headers, { 'x-ratelimit-limit-tokens': '100', 'x-ratelimit-remaining-tokens': '90', 'x-ratelimit-reset-tokens': '6s', 'retry-after': '6' });
  t.same(h.rejected, ['tokens', 'tokens']);
});

t.test('credit used up: 402 insufficient_credit with the rate headers, and no cap alert', async (t) => {
  const h = harness({ balance: 0n });
  const credential = h.key({ requestsPerMinute: 5 }, { limitMicros: 1000n, period: 'day', mode: 'blocking' });
  const refused = await refusalOf(h.admission.admit(h.request(credential)));
  t.match(refused, { code: 'insufficient_credit', status: 402 });
  t.equal(refused.message, 'The account’s credit balance is used up; top up to continue (GET /client/credits shows the balance)', "the catalogue's message");
  t.match(refused.headers, { 'x-ratelimit-limit-requests': '5' });
  t.same(h.rejected, ['credit']);
  t.same(h.alertsRecorded, [], 'a cap did not refuse');
});

t.test("a blocking cap's refusal records budget.cap_reached once per period, with what its period spent", async (t) => {
  const h = harness();
  const cap: SpendCap = { limitMicros: 100n, period: 'day', mode: 'blocking' };
  h.spent.set(`key:${KEY}`, { ...WINDOWS_ZERO, todayMicros: 80n });
  const credential = h.key({}, cap);
  t.match(await refusalOf(h.admission.admit(h.request(credential))), { code: 'budget_exceeded' });
  t.match(await refusalOf(h.admission.admit(h.request(credential))), { code: 'budget_exceeded' });
  t.same(h.alertsRecorded, [{ scope: 'key', scopeId: KEY, organizationId: ORG, projectId: PROJECT, cap, spentMicros: 80n, now: h.clock() }]);
});

t.test('a budget refusal names the cap that refused among several, and carries the rate headers', async (t) => {
  const h = harness({ projectCap: { limitMicros: 40n, period: 'month', mode: 'blocking' } });
  const refused = await refusalOf(h.admission.admit(h.request(h.key({ requestsPerMinute: 5 }, { limitMicros: 1000n, period: 'day', mode: 'blocking' }))));
  t.match(refused, { code: 'budget_exceeded', message: /^The project spend cap of \$0.00004 per month is used up for a request of this size/ });
  t.match(refused.headers, { 'x-ratelimit-limit-requests': '5', 'x-ratelimit-remaining-requests': '5' });
});

t.test("an account cap's cap_reached names no project; a cap overspent counts as exactly used up", async (t) => {
  const cap: SpendCap = { limitMicros: 100n, period: 'month', mode: 'blocking' };
  const h = harness({ accountCap: cap });
  h.spent.set(`account:${ORG}`, { ...WINDOWS_ZERO, monthMicros: 130n });
  t.match(await refusalOf(h.admission.admit(h.request(h.key()))), {
    code: 'budget_exceeded',
    message: 'The account spend cap of $0.0001 per month is used up. GET /client/budget shows every cap.',
  });
  t.same(h.alertsRecorded, [{ scope: 'account', scopeId: ORG, organizationId: ORG, projectId: null, cap, spentMicros: 100n, now: h.clock() }]);
});

t.test("a project cap's cap_reached names the calling key's project", async (t) => {
  const cap: SpendCap = { limitMicros: 100n, period: 'week', mode: 'blocking' };
  const h = harness({ projectCap: cap });
  h.spent.set(`project:${PROJECT}`, { ...WINDOWS_ZERO, weekMicros: 100n });
  await refusalOf(h.admission.admit(h.request(h.key())));
  t.match(h.alertsRecorded, [{ scope: 'project', scopeId: PROJECT, projectId: PROJECT, spentMicros: 100n }]);
});

t.test('a refusal stands when budget.cap_reached cannot be recorded; the failure is logged', async (t) => {
  const h = harness();
  h.spent.set(`key:${KEY}`, { ...WINDOWS_ZERO, todayMicros: 100n });
  h.alertFailure.next = new Error('database down');
  t.match(await refusalOf(h.admission.admit(h.request(h.key({}, { limitMicros: 100n, period: 'day', mode: 'blocking' })))), { code: 'budget_exceeded' });
  t.match(h.errors(), [{ msg: 'a spend cap refused a call but budget.cap_reached could not be recorded', scope: 'key', scopeId: KEY, err: { message: 'database down' } }]);
});

t.test('a gate that keeps asking for counters or windows is answered three times, then 503 metering_unavailable', async (t) => {
  const windows = harness();
  const credential = windows.key({ requestsPerMinute: 5 });
  windows.steer.admit = async () => ({ ok: false, refused: 'unseeded', keys: [`rpm:key:${KEY}`], requests: [], tokens: [] });
  t.match(await refusalOf(windows.admission.admit(windows.request(credential))), { code: 'metering_unavailable', status: 503 });
  t.equal(windows.admits.length, 4);
  t.equal(windows.seededWindows.length, 3);
  t.match(await refusalOf(windows.admission.chargeRequest(credential)), { code: 'metering_unavailable' });
  t.equal(windows.admits.length, 8, 'chargeRequest gives up the same way');

  const money = harness();
  money.steer.admit = async () => ({ ok: false, refused: 'money', allowance: { ok: false, reason: 'missing', keys: [CREDIT] }, requests: [], tokens: [] });
  t.match(await refusalOf(money.admission.admit(money.request(money.session))), { code: 'metering_unavailable', status: 503 });
  t.equal(money.admits.length, 4);
  t.same(money.accountsEnsured, [
    [ORG, 1_000_000n],
    [ORG, 1_000_000n],
    [ORG, 1_000_000n],
  ]);
  t.same(money.rejected, []);
});

t.test('a rate window the store lost is re-seeded from its last minute: the request log, calls in flight and rows not stored here, and other replicas', async (t) => {
  const h = harness();
  const credential = h.key({ requestsPerMinute: 100, tokensPerMinute: 1000 });
  const running = await h.admission.admit(h.request(credential));
  (await h.admission.admit(h.request(credential))).finish(served(4, 6));
  h.others.set(`key:${KEY}`, { micros: 0, requests: 2, tokens: 40 });
  h.recent.set(`key:${KEY}`, { requests: 5, tokens: 100 });
  let lost = true;
  h.steer.admit = async (request) => {
    if (!lost) return h.memory.gate.admit(request);
    lost = false;
    return { ok: false, refused: 'unseeded', keys: [`rpm:key:${KEY}`, `tpm:key:${KEY}`, 'rpm:key:someone-else'], requests: [], tokens: [] };
  };
  const clockAt = h.clock().getTime();
  (await h.admission.admit(h.request(credential))).finish(served(1, 1));
  t.same(h.seededWindows, [
    { key: `rpm:key:${KEY}`, limit: 100, periodMs: 60_000, cost: 1 + 1 + 2 + 5 },
    { key: `tpm:key:${KEY}`, limit: 1000, periodMs: 60_000, cost: 30 + 10 + 40 + 100 },
  ]);
  t.same(
    h.recentSince.map((since) => since.getTime()),
    [clockAt - 60_000, clockAt - 60_000],
    'read from one minute back',
  );
  running.finish(served(1, 1));
});

t.test('chargeRequest takes one request and nothing else, answering with the rate headers', async (t) => {
  const h = harness({ settings: { leaseTtlMs: 30_000, counterTtlMs: 90_000 } });
  const credential = h.key({ requestsPerMinute: 2, tokensPerMinute: 100, concurrency: 1 });
  t.same(await h.admission.chargeRequest(credential), {
    'x-ratelimit-limit-requests': '2',
    'x-ratelimit-remaining-requests': '1',
    'x-ratelimit-reset-requests': '30s',
    'x-ratelimit-limit-tokens': '100',
    'x-ratelimit-remaining-tokens': '100',
    'x-ratelimit-reset-tokens': '0ms',
  });
  t.same(h.admits, [
    { requests: [{ key: `rpm:key:${KEY}`, limit: 2, periodMs: 60_000, cost: 1 }], leases: [], leaseId: '', leaseTtlMs: 30_000, tokens: [], takes: [], counterTtlMs: 90_000 },
  ]);
  t.equal(await h.counter(CREDIT), null, 'no money taken');
  (await h.admission.admit(h.request(credential, { estimate: { inputTokens: 1, maxOutputTokens: 1 } }))).finish(served(1, 1));
  const refused = await refusalOf(h.admission.chargeRequest(credential));
  t.match(refused, { code: 'rate_limit_exceeded', message: /^Too many requests per minute/ });
  t.match(refused.headers, { 'retry-after': '30', 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-remaining-tokens': '98' });
});

t.test('chargeRequest for a credential with only a request limit answers the request headers alone', async (t) => {
  const h = harness();
  t.strictSame(await h.admission.chargeRequest(h.key({ requestsPerMinute: 2 })), {
    'x-ratelimit-limit-requests': '2',
    'x-ratelimit-remaining-requests': '1',
    'x-ratelimit-reset-requests': '30s',
  });
});

t.test('chargeRequest re-seeds the request windows a lost store asks for', async (t) => {
  const h = harness();
  const credential = h.key({ requestsPerMinute: 10 });
  h.recent.set(`key:${KEY}`, { requests: 3, tokens: 0 });
  let lost = true;
  h.steer.admit = async (request) => {
    if (!lost) return h.memory.gate.admit(request);
    lost = false;
    return { ok: false, refused: 'unseeded', keys: [`rpm:key:${KEY}`], requests: [], tokens: [] };
  };
  t.match(await h.admission.chargeRequest(credential), { 'x-ratelimit-remaining-requests': '9' });
  t.same(h.seededWindows, [{ key: `rpm:key:${KEY}`, limit: 10, periodMs: 60_000, cost: 3 }]);
  t.equal(h.admits.length, 2);
});

t.test('chargeRequest without a request limit takes nothing and answers what peekHeaders does', async (t) => {
  const h = harness();
  const credential = h.key({ tokensPerMinute: 100 });
  t.same(await h.admission.chargeRequest(credential), { 'x-ratelimit-limit-tokens': '100', 'x-ratelimit-remaining-tokens': '100', 'x-ratelimit-reset-tokens': '0ms' });
  t.same(h.admits, []);
});

t.test('peekHeaders reads each family that has a limit, and nothing for a credential without limits', async (t) => {
  const h = harness();
  t.same(await h.admission.peekHeaders(h.key()), {});
  t.same(await h.admission.peekHeaders(h.session), {});
  t.same(await h.admission.peekHeaders(h.key({ requestsPerMinute: 3 }, null, [], 'requests-only')), {
    'x-ratelimit-limit-requests': '3',
    'x-ratelimit-remaining-requests': '3',
    'x-ratelimit-reset-requests': '0ms',
  });
  t.same(await h.admission.peekHeaders(h.key({ tokensPerMinute: 7 }, null, [], 'tokens-only')), {
    'x-ratelimit-limit-tokens': '7',
    'x-ratelimit-remaining-tokens': '7',
    'x-ratelimit-reset-tokens': '0ms',
  });
});

t.test('a credit counter that idled out is re-seeded from the ledger less calls in flight, rows not stored, other replicas and spend holds', async (t) => {
  const holds = fakeHolds({ outstanding: { [`account:${ORG}`]: 5 } });
  const h = harness({ balance: 1000n, holds });
  const running = await h.admission.admit(h.request(h.session));
  await (await h.admission.admit(h.request(h.session))).finish(served(5, 5));
  h.others.set(`account:${ORG}`, { micros: 7, requests: 0, tokens: 0 });
  await h.memory.allowances.delete([CREDIT]);
  await (await h.admission.admit(h.request(h.session))).finish(served(0, 0, { usage: null }));
  // 1000 µ$ less 50 in flight, 15 not stored, 7 held elsewhere and 5 in holds = 923; the new call took 50 and gave it back.
  t.equal(await h.counter(CREDIT), 923);
  running.finish(served(0, 0, { usage: null }));
});

t.test('cap counters that idled out are re-seeded from their period of the request log less everything it does not know yet', async (t) => {
  const holds = fakeHolds({ outstanding: { [`key:${KEY}`]: 1, [`key:${MAKER}`]: 2, [`project:${PROJECT}`]: 3, [`account:${ORG}`]: 4 } });
  const h = harness({
    holds,
    projectCap: { limitMicros: 1_000_000n, period: 'month', mode: 'blocking' },
    accountCap: { limitMicros: 1_000_000n, period: 'total', mode: 'blocking' },
  });
  const windows = (base: bigint): SpendWindows => ({ todayMicros: base + 1n, weekMicros: base + 2n, monthMicros: base + 3n, totalMicros: base + 4n });
  h.spent.set(`key:${KEY}`, windows(100n));
  h.spent.set(`key:${MAKER}`, windows(200n));
  h.spent.set(`project:${PROJECT}`, windows(300n));
  h.spent.set(`account:${ORG}`, windows(400n));
  h.others.set(`key:${KEY}`, { micros: 10, requests: 0, tokens: 0 });
  h.others.set(`key:${MAKER}`, { micros: 20, requests: 0, tokens: 0 });
  h.others.set(`project:${PROJECT}`, { micros: 30, requests: 0, tokens: 0 });
  h.others.set(`account:${ORG}`, { micros: 40, requests: 0, tokens: 0 });
  const credential = h.key({}, { limitMicros: 1_000_000n, period: 'day', mode: 'blocking' }, [
    { keyId: MAKER, spendCap: { limitMicros: 1_000_000n, period: 'week', mode: 'blocking' }, rateLimits: NO_LIMITS },
  ]);
  const now = h.clock();
  const counters = [
    capCounterKey('key', KEY, 'day', now),
    capCounterKey('key', MAKER, 'week', now),
    capCounterKey('project', PROJECT, 'month', now),
    capCounterKey('account', ORG, 'total', now),
  ];
  const running = await h.admission.admit(h.request(credential));
  await (await h.admission.admit(h.request(credential))).finish(served(5, 5));
  await h.memory.allowances.delete(counters);
  await (await h.admission.admit(h.request(credential))).finish(served(0, 0, { usage: null }));
  // Each: minus (its period's spend + 50 in flight + 15 not stored + other replicas + holds).
  t.same(await h.memory.allowances.peek(counters), [-(101 + 65 + 10 + 1), -(202 + 65 + 20 + 2), -(303 + 65 + 30 + 3), -(404 + 65 + 40 + 4)]);
  running.finish(served(0, 0, { usage: null }));
});

t.test("an alert-only cap records budget.threshold_reached once spending, the writer's queue included, reaches it", async (t) => {
  const keyCap: SpendCap = { limitMicros: 40n, period: 'day', mode: 'alert' };
  const accountCap: SpendCap = { limitMicros: 40n, period: 'day', mode: 'alert' };
  const h = harness({ accountCap });
  h.spent.set(`key:${KEY}`, { ...WINDOWS_ZERO, todayMicros: 25n });
  h.spent.set(`account:${ORG}`, { ...WINDOWS_ZERO, todayMicros: 24n });
  const credential = h.key({}, keyCap);
  (await h.admission.admit(h.request(credential))).finish(served(5, 5));
  await h.admission.idle();
  // The key: 25 stored + 15 queued = 40, exactly its cap; the account: 39, not yet.
  t.same(h.alertsRecorded, [{ scope: 'key', scopeId: KEY, organizationId: ORG, projectId: PROJECT, cap: keyCap, spentMicros: 40n, now: h.clock() }]);
  (await h.admission.admit(h.request(credential))).finish(served(1, 0));
  await h.admission.idle();
  t.same(
    h.alertsRecorded.map((alert) => [alert['scope'], alert['projectId'], alert['spentMicros']]),
    [
      ['key', PROJECT, 40n],
      ['account', null, 40n],
    ],
    'the account reached next; the key, already recorded, is not checked again',
  );
});

t.test('alert-only caps are not checked after a call that cost nothing, and blocking caps never alert', async (t) => {
  const h = harness();
  h.spent.set(`key:${KEY}`, { ...WINDOWS_ZERO, todayMicros: 50n });
  (await h.admission.admit(h.request(h.key({}, { limitMicros: 40n, period: 'day', mode: 'alert' })))).finish(served(0, 0, { usage: null }));
  await h.admission.idle();
  t.same(h.alertsRecorded, []);
  const blocking = harness();
  blocking.spent.set(`key:${KEY}`, { ...WINDOWS_ZERO, todayMicros: 40n });
  (await blocking.admission.admit(blocking.request(blocking.key({}, { limitMicros: 100n, period: 'day', mode: 'blocking' })))).finish(served(60, 0));
  await blocking.admission.idle();
  t.same(blocking.alertsRecorded, [], 'spent 100 of 100: the next call is refused, which records cap_reached');
});

t.test('what this replica reports after a loss: per scope its calls in flight, rows not stored and holds in transit, and its leases', async (t) => {
  const holds = fakeHolds({ transient: { [`project:${PROJECT}`]: 9, 'key:other': 4 } });
  const h = harness({ holds, settings: { leaseTtlMs: 45_000 } });
  const credential = h.key({ concurrency: 3 });
  const first = await h.admission.admit(h.request(credential));
  const second = await h.admission.admit(h.request(credential, { estimate: { inputTokens: 20, maxOutputTokens: 0 } }));
  await (await h.admission.admit(h.request(credential))).finish(served(5, 5));
  const report = h.recorded.holdings!();
  const inFlightAndQueued = { micros: 50 + 20 + 15, requests: 3, tokens: 30 + 20 + 10 };
  t.same(Object.fromEntries(report.outstanding), {
    [`key:${KEY}`]: inFlightAndQueued,
    [`project:${PROJECT}`]: { ...inFlightAndQueued, micros: 85 + 9 },
    [`account:${ORG}`]: inFlightAndQueued,
    'key:other': { micros: 4, requests: 0, tokens: 0 },
  });
  t.same(
    [...report.leases].map((lease) => lease.keys),
    [[`conc:key:${KEY}`], [`conc:key:${KEY}`]],
  );
  t.same(
    [...report.leases].map((lease) => lease.leaseId),
    [...new Set(h.admits.map((asked) => asked.leaseId))].slice(0, 2),
  );
  t.equal(report.leaseTtlMs, 45_000);
  t.same(Object.fromEntries(h.recorded.holdings!().outstanding), Object.fromEntries(report.outstanding), 'reporting changes nothing');
  first.finish(served(0, 0, { usage: null }));
  second.finish(served(0, 0, { usage: null }));
  await h.admission.idle();
  const queued = { micros: 15, requests: 3, tokens: 10 };
  t.same(
    Object.fromEntries(h.recorded.holdings!().outstanding),
    { [`key:${KEY}`]: queued, [`project:${PROJECT}`]: { ...queued, micros: 15 + 9 }, [`account:${ORG}`]: queued, 'key:other': { micros: 4, requests: 0, tokens: 0 } },
    'no call in flight: the rows not stored yet',
  );
  await h.writer.flush();
  t.same(
    Object.fromEntries(h.recorded.holdings!().outstanding),
    { [`project:${PROJECT}`]: { micros: 9, requests: 0, tokens: 0 }, 'key:other': { micros: 4, requests: 0, tokens: 0 } },
    'nothing in flight or queued',
  );
  t.same([...h.recorded.holdings!().leases], []);
});

t.test('a report still in force is refreshed each time the writer stores rows it had counted as pending', async (t) => {
  const h = harness();
  (await h.admission.admit(h.request(h.session))).finish(served(1, 1));
  await h.admission.idle();
  t.equal(h.recorded.refreshes, 0);
  await h.writer.flush();
  t.equal(h.recorded.refreshes, 1);
});

t.test('the heartbeat renews the leases of running calls and refreshes their counters, every third of the lease TTL', async (t) => {
  mock.timers.enable({ apis: ['setInterval'] });
  t.teardown(() => mock.timers.reset());
  const h = harness({ settings: { leaseTtlMs: 6_000 } });
  const cap = capCounterKey('key', KEY, 'day', h.clock());
  const leased = await h.admission.admit(h.request(h.key({ concurrency: 1 }, { limitMicros: 10_000n, period: 'day', mode: 'blocking' })));
  const unleased = await h.admission.admit(h.request(h.session));
  h.admission.start();
  h.admission.start();
  mock.timers.tick(1_999);
  t.same([h.renewals, h.refreshes], [[], []]);
  mock.timers.tick(1);
  t.same(h.renewals, [[[`conc:key:${KEY}`], h.admits[0]!.leaseId, 6_000]], 'one renewal (started twice, one timer), only for the call holding a lease');
  t.same(h.refreshes, [
    [
      [
        { key: CREDIT, amount: 0 },
        { key: cap, amount: 0 },
      ],
      120_000,
    ],
  ]);
  leased.finish(served(0, 0, { usage: null }));
  unleased.finish(served(0, 0, { usage: null }));
  await h.admission.idle();
  h.refreshes.length = 0;
  mock.timers.tick(2_000);
  t.same([h.renewals.length, h.refreshes], [1, []], 'nothing running: nothing renewed or refreshed');
  const again = await h.admission.admit(h.request(h.session));
  h.admission.stop();
  mock.timers.tick(10_000);
  t.same(h.refreshes, [], 'stopped');
  again.finish(served(0, 0, { usage: null }));
});

t.test('the heartbeat beats at least once a second', async (t) => {
  mock.timers.enable({ apis: ['setInterval'] });
  t.teardown(() => mock.timers.reset());
  const h = harness({ settings: { leaseTtlMs: 1_500 } });
  const running = await h.admission.admit(h.request(h.session));
  h.admission.start();
  t.teardown(() => h.admission.stop());
  mock.timers.tick(999);
  t.equal(h.refreshes.length, 0);
  mock.timers.tick(1);
  t.equal(h.refreshes.length, 1);
  running.finish(served(0, 0, { usage: null }));
});

t.test('idle() resolves at once when nothing runs', async (t) => {
  const h = harness();
  let resolved = false;
  void h.admission.idle().then(() => (resolved = true));
  await Promise.resolve();
  t.equal(resolved, true);
});

t.test('idle() waits for every admitted call, and for every settlement begun', async (t) => {
  const h = harness();
  const settling = deferred();
  h.steer.settle = () => settling.promise;
  const first = await h.admission.admit(h.request(h.session));
  const second = await h.admission.admit(h.request(h.session));
  const woken: string[] = [];
  const waiting = [h.admission.idle().then(() => woken.push('a')), h.admission.idle().then(() => woken.push('b'))];
  const turn = () => new Promise((resolve) => setImmediate(resolve));
  first.finish(served(1, 1));
  await turn();
  t.same(woken, [], 'one call still runs');
  const finished = second.finish(served(1, 1));
  await turn();
  t.same(woken, [], 'its settlement still runs');
  t.equal(second.finish(served(1, 1)), undefined, 'finishing twice does nothing');
  settling.resolve();
  await Promise.all(waiting);
  await finished;
  t.same(woken, ['a', 'b'], 'every waiter');
});

t.test("idle() waits for a call still running after another call's settlement has ended", async (t) => {
  const h = harness();
  const first = await h.admission.admit(h.request(h.session));
  const second = await h.admission.admit(h.request(h.session));
  let idle = false;
  const waiting = h.admission.idle().then(() => (idle = true));
  await first.finish(served(1, 1));
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(idle, false);
  second.finish(served(1, 1));
  await waiting;
  t.equal(idle, true);
});

t.test('a call settles without a listener for charges', async (t) => {
  const h = harness({ onCharged: null });
  await (await h.admission.admit(h.request(h.session))).finish(served(1, 1));
  t.match(h.enqueued, [{ costMicros: 3n }]);
  t.same(h.errors(), []);
});

t.test('a settlement that fails is logged and still ends; finish never throws', async (t) => {
  const h = harness();
  h.steer.settle = async () => {
    throw new Error('store down');
  };
  const failing = (await h.admission.admit(h.request(h.session))).finish(served(1, 1));
  await h.admission.idle();
  await t.rejects(Promise.resolve(failing), { message: 'store down' }, 'what finish returned settles with the failure');
  t.match(h.errors(), [{ msg: 'settling a call failed', requestId: 'request-1', err: { message: 'store down' } }]);
  const throwing = harness({
    onCharged: () => {
      throw new Error('metrics broke');
    },
  });
  const admitted = await throwing.admission.admit(throwing.request(throwing.session));
  t.equal(admitted.finish(served(1, 1)), undefined, 'nothing to wait for');
  await throwing.admission.idle();
  t.match(throwing.errors(), [{ msg: 'settling a call failed', requestId: 'request-1', err: { message: 'metrics broke' } }]);
});

/** Spend holds as the tests set them. */
function fakeHolds(options: { open?: string[]; outstanding?: Record<string, number>; transient?: Record<string, number>; beyond?: bigint | Error } = {}) {
  const spent: Array<[string, string, bigint]> = [];
  const holds: HeldMoney & { spent: typeof spent } = {
    spent,
    outstanding: async (_organizationId, scope, id) => options.outstanding?.[`${scope}:${id}`] ?? 0,
    transient: () => new Map(Object.entries(options.transient ?? {})),
    isOpen: async (organizationId, holdId) => organizationId === ORG && (options.open ?? []).includes(holdId),
    spend: async (organizationId, holdId, micros) => {
      spent.push([organizationId, holdId, micros]);
      if (options.beyond instanceof Error) throw options.beyond;
      return options.beyond ?? 0n;
    },
  };
  return holds;
}

const HOLD = { holdId: 'hold-1', batchId: 'batch-1' };

t.test('a batch line against an open hold takes nothing from the gate and is spent from its hold at the batch price', async (t) => {
  const holds = fakeHolds({ open: ['hold-1'] });
  const h = harness({ holds, accountCap: { limitMicros: 100n, period: 'day', mode: 'blocking' } });
  const credential = h.key({ requestsPerMinute: 1, concurrency: 1 });
  const first = await h.admission.admit(h.request(credential, { hold: HOLD }));
  const second = await h.admission.admit(h.request(credential, { hold: HOLD }));
  t.same([first.headers, h.admits], [{}, []], 'no rate window, slot or money taken');
  t.strictSame(h.provisional[0]!.context, {
    organizationId: ORG,
    projectId: PROJECT,
    keyId: KEY,
    endpoint: '/v1/chat/completions',
    model: 'priced',
    priceVersion: BATCH.version,
    streamed: false,
    holdId: 'hold-1',
    batchId: 'batch-1',
  });
  t.same(Object.fromEntries(h.recorded.holdings!().outstanding), {}, 'nothing in flight outside the hold');
  t.strictSame(
    [...h.recorded.holdings!().leases].map((lease) => [lease.keys, lease.leaseId]),
    [
      [[], ''],
      [[], ''],
    ],
    'and no lease',
  );
  await first.finish(served(10, 10));
  second.finish(served(0, 0, { usage: null, status: 500, errorCode: 'no_such_code' }));
  await h.admission.idle();
  t.same(holds.spent, [
    [ORG, 'hold-1', 15n],
    [ORG, 'hold-1', 0n],
  ]);
  t.same(h.settles, [], 'the hold covered it all');
  t.match(h.enqueued, [
    { id: 'request-1', costMicros: 15n, priceVersion: BATCH.version, holdId: 'hold-1', batchId: 'batch-1' },
    { id: 'request-2', costMicros: 0n },
  ]);
  t.strictSame(
    h.enqueued.map((row) => row.errorCode),
    [null, 'internal_error'],
    'an error code no catalogue names is stored as internal_error',
  );
  t.same(h.charged, [
    ['priced', 15n],
    ['priced', 0n],
  ]);
});

t.test('what a hold no longer covers is taken from the credit and every blocking cap', async (t) => {
  const holds = fakeHolds({ open: ['hold-1'], beyond: 7n });
  const h = harness({ holds, accountCap: { limitMicros: 100n, period: 'day', mode: 'blocking' }, settings: { counterTtlMs: 70_000 } });
  const credential = h.key({}, { limitMicros: 100n, period: 'week', mode: 'alert' });
  await (await h.admission.admit(h.request(credential, { hold: HOLD }))).finish(served(10, 10));
  t.same(h.settles, [
    {
      leaseKeys: [],
      leaseId: '',
      gives: [
        { key: CREDIT, amount: -7 },
        { key: capCounterKey('account', ORG, 'day', h.clock()), amount: -7 },
      ],
      counterTtlMs: 70_000,
      tokens: [],
    },
  ]);
});

t.test('a batch line whose hold cannot be charged is logged and its row still queued', async (t) => {
  const holds = fakeHolds({ open: ['hold-1'], beyond: new Error('database down') });
  const h = harness({ holds });
  await (await h.admission.admit(h.request(h.session, { hold: HOLD }))).finish(served(10, 10));
  t.match(h.errors(), [{ msg: 'a batch line could not be charged to its spend hold; its cost counts as spent when its row is stored', requestId: 'request-1', holdId: 'hold-1' }]);
  t.match(h.enqueued, [{ id: 'request-1', costMicros: 15n, holdId: 'hold-1' }]);
  t.same(h.settles, []);
});

t.test("a batch line's alert-only caps are checked once it cost something; blocking caps never alert", async (t) => {
  const holds = fakeHolds({ open: ['hold-1'] });
  const h = harness({ holds, accountCap: { limitMicros: 10n, period: 'day', mode: 'blocking' } });
  h.spent.set(`key:${KEY}`, { ...WINDOWS_ZERO, weekMicros: 40n });
  h.spent.set(`account:${ORG}`, { ...WINDOWS_ZERO, todayMicros: 40n });
  const cap: SpendCap = { limitMicros: 40n, period: 'week', mode: 'alert' };
  const credential = h.key({}, cap);
  await (await h.admission.admit(h.request(credential, { hold: HOLD }))).finish(served(0, 0, { usage: null }));
  t.same(h.alertsRecorded, [], 'free: not checked, though the period has reached the cap');
  await (await h.admission.admit(h.request(credential, { hold: HOLD }))).finish(served(10, 10));
  t.same(
    h.alertsRecorded.map((alert) => [alert['scope'], alert['scopeId'], alert['spentMicros'], alert['projectId']]),
    [['key', KEY, 55n, PROJECT]],
  );
});

t.test('a batch line whose hold is not open is admitted like any call, at the batch price', async (t) => {
  const holds = fakeHolds({ open: [] });
  const h = harness({ holds });
  const credential = h.key({ requestsPerMinute: 3 });
  const admitted = await h.admission.admit(h.request(credential, { hold: HOLD }));
  t.match(admitted.headers, { 'x-ratelimit-remaining-requests': '2' });
  t.same(h.admits[0]!.takes, [{ key: CREDIT, amount: 25, shrink: true }], 'the batch estimate: 10 input at 0.5, 20 output at 1');
  await admitted.finish(served(10, 10));
  await h.admission.idle();
  t.same(holds.spent, []);
  t.match(h.enqueued, [{ costMicros: 15n, priceVersion: BATCH.version, batchId: 'batch-1' }]);
  t.notOk('holdId' in h.enqueued[0]!, 'the row names no hold');
});

t.test('without spend holds a batch line is admitted like any call; without batch prices, at the live price', async (t) => {
  const h = harness({ batchPrices: false });
  const admitted = await h.admission.admit(h.request(h.session, { hold: HOLD }));
  await admitted.finish(served(10, 10));
  t.same(h.admits[0]!.takes, [{ key: CREDIT, amount: 50, shrink: true }]);
  t.match(h.enqueued, [{ costMicros: 30n, priceVersion: LIVE.version, batchId: 'batch-1' }]);
});

t.test('takeHeld takes the whole amount from the credit and every blocking cap, and names the counters', async (t) => {
  const h = harness({ balance: 1000n, projectCap: { limitMicros: 500n, period: 'month', mode: 'blocking' }, settings: { leaseTtlMs: 30_000, counterTtlMs: 90_000 } });
  const credential = h.key({ requestsPerMinute: 1, concurrency: 1 }, { limitMicros: 5000n, period: 'day', mode: 'alert' });
  const now = h.clock();
  const project = capCounterKey('project', PROJECT, 'month', now);
  t.same(await h.admission.takeHeld(credential, 300), [CREDIT, project]);
  t.same(h.admits.at(-1), {
    requests: [],
    leases: [],
    leaseId: '',
    leaseTtlMs: 30_000,
    tokens: [],
    takes: [
      { key: CREDIT, amount: 300, shrink: false },
      { key: project, amount: 300, shrink: false, headroom: 500 },
    ],
    counterTtlMs: 90_000,
  });
  t.same([await h.counter(CREDIT), await h.counter(project)], [700, -300]);
});

t.test('takeHeld refuses an amount the credit cannot hold, saying what is free', async (t) => {
  const h = harness({ balance: 200n });
  const refused = await refusalOf(h.admission.takeHeld(h.session, 300));
  t.match(refused, {
    code: 'insufficient_credit',
    status: 402,
    message: 'The credit balance cannot hold $0.0003 for these calls ($0.0002 is free); top up (GET /client/credits shows the balance) or ask for less',
  });
  const capped = harness({ balance: 200n, accountCap: { limitMicros: 100_000n, period: 'day', mode: 'blocking' } });
  await refusalOf(capped.admission.takeHeld(capped.session, 300));
  t.same(capped.alertsRecorded, [], 'the credit refused, not the cap');
  const broke = harness({ balance: -5n });
  t.match(await refusalOf(broke.admission.takeHeld(broke.session, 300)), { message: /\(\$0 is free\)/ });
  t.same(h.rejected, ['credit']);
});

t.test('takeHeld refuses an amount a blocking cap cannot hold, saying what is left, and records cap_reached', async (t) => {
  const cap: SpendCap = { limitMicros: 100n, period: 'day', mode: 'blocking' };
  const h = harness();
  h.spent.set(`key:${KEY}`, { ...WINDOWS_ZERO, todayMicros: 50n });
  const refused = await refusalOf(h.admission.takeHeld(h.key({}, cap), 300));
  t.match(refused, {
    code: 'budget_exceeded',
    status: 402,
    message: 'The key spend cap of $0.0001 per day cannot hold $0.0003 for these calls: $0.00005 is left. GET /client/budget shows every cap.',
  });
  t.match(h.alertsRecorded, [{ scope: 'key', spentMicros: 50n }]);
  t.same(h.rejected, ['budget']);
  h.spent.set(`key:${KEY}`, { ...WINDOWS_ZERO, todayMicros: 130n });
  await h.memory.allowances.delete([capCounterKey('key', KEY, 'day', h.clock())]);
  t.match(await refusalOf(h.admission.takeHeld(h.key({}, cap), 300)), { message: /: \$0 is left\./ });
});

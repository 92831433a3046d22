import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { confinedProjectOf, type Credential } from '../../core/identity/credential.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { Admission, AdmissionRequest, CallHold, CallOutcome, InferenceAdmission, MeteredUnits, RefusedCall } from '../../core/gateway/inference-admission.ts';
import { microsToUsd } from '../../core/vocabulary/money.ts';
import type { AllowanceTake, Coordination, GateRequest, GateResult, Holdings, LeaseEntry, Outstanding, RateDecision, RateEntry } from '../../core/ports/coordination.ts';
import type { KeyRateLimits, SpendCap, SpendPeriod, SpendReader } from '../../core/ports/identity.ts';
import type { CreditLedger, RequestLogErrorCode, RequestLogRow } from '../../core/ports/metering.ts';
import { requestLogErrorCode } from './request-log-error-codes.ts';
import { estimatedUsage } from '../../core/gateway/provider.ts';
import { periodStart } from '../../core/vocabulary/periods.ts';
import type { CapPolicies } from './cap-policies.ts';
import { billedAudioSeconds, callCost, type CallCost, estimateCostMicros, type PriceSheet, unpricedUnit } from './pricing.ts';
import { rateLimitHeaders } from './rate-limit-headers.ts';
import type { RequestLogWriter } from './request-log-writer.ts';
import type { BudgetAlerts } from './budget-alerts.ts';
import type { CallContext } from './billing-journal.ts';
import { creditCounterKey } from './credit-grants.ts';
import type { HeldMoney } from './spend-holds.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './metering-errors.ts';

/** A scope's rate limits; null means no limit. */
export type LimitSet = KeyRateLimits;

export interface GovernanceSettings {
  /** For keys that set none of their own. */
  keyDefaults: LimitSet;
  /** Shared by all keys of one project. */
  project: LimitSet;
  /** Shared by the whole account. */
  account: LimitSet;
  /** A concurrency lease lives this long unless renewed (streams renew it). */
  leaseTtlMs: number;
  /** Money counters idle this long are re-read from the ledger. */
  counterTtlMs: number;
  initialCreditMicros: bigint;
}

export interface GovernanceDeps {
  coordination: Coordination;
  ledger: CreditLedger;
  spend: SpendReader;
  policies: CapPolicies;
  writer: RequestLogWriter;
  alerts: BudgetAlerts;
  prices: ReadonlyMap<string, PriceSheet>;
  /** What a batch line (a call against a spend hold) is billed with; absent: the live prices. */
  batchPrices?: ReadonlyMap<string, PriceSheet>;
  /** Spend holds (spend-holds.ts): counter seeding subtracts what they hold, batch lines spend from them. */
  holds?: HeldMoney;
  clock: () => Date;
  logger: FastifyBaseLogger;
  settings: GovernanceSettings;
  onRejected?(kind: 'requests' | 'tokens' | 'concurrency' | 'credit' | 'budget'): void;
  onCharged?(model: string, micros: bigint): void;
}

export type ScopeKind = 'key' | 'project' | 'account';

/**
 * A spend cap's counter. The period and its start are part of the name, the cap's size is not (it
 * is the take's headroom): a new period starts a fresh counter, a changed cap keeps every reservation.
 */
export function capCounterKey(scope: ScopeKind, id: string, period: SpendPeriod, now: Date): string {
  return `cap:${scope}:${id}:${period}:${periodStart(period, now).getTime()}`;
}

/**
 * The counters a credential's calls touch, named once per credential (the authenticator hands out
 * the same credential object while it is cached) instead of once per call. Entries are shared by
 * every call: adapters never change them.
 */
interface ScopePlan {
  /** Requests-per-minute buckets, cost 1. */
  requests: RateEntry[];
  /** Tokens-per-minute buckets; each call supplies its estimate as the cost. */
  tokenBuckets: Array<Omit<RateEntry, 'cost'>>;
  leases: LeaseEntry[];
  leaseKeys: string[];
  creditKey: string;
  /** Outstanding scopes of this credential's calls (see GovernedAdmission.inflight). */
  scopes: string[];
  /** Its calls' journal contexts, by endpoint, model and whether streamed (see callContext). */
  contexts: Map<string, CallContext>;
  /** Each rate bucket's scope and unit, to re-seed it after the coordination store lost its data. */
  windows: Map<string, RateWindow>;
}

interface RateWindow {
  entry: Omit<RateEntry, 'cost'>;
  scope: ScopeKind;
  id: string;
  counts: 'requests' | 'tokens';
}

interface CapEntry {
  scope: ScopeKind;
  id: string;
  cap: SpendCap;
  counter: string;
}

/** What admit took for one call, kept until it is settled. */
interface AdmittedCall {
  /** The scopes (`key:<id>`, `project:<id>`, `account:<id>`) whose outstanding amounts hold this call. */
  scopes: string[];
  /** What the reservation counts as outstanding in each of them until the call is settled. */
  reserved: number;
  request: AdmissionRequest;
  /** What its journal records share with the credential's other calls to the model. */
  context: CallContext;
  sheet: PriceSheet;
  takes: AllowanceTake[];
  taken: number[];
  tokens: RateEntry[];
  tokenEstimate: number;
  leaseKeys: string[];
  leaseId: string;
  caps: CapEntry[];
  headers: Record<string, string>;
  logBodies: boolean;
  /** A batch line's marks in the request log: its batch, and its hold when the hold covered it (then `spends` too). */
  batchLine?: { holdId?: string; batchId: string };
  /** The call spends from its spend hold rather than from what it took (nothing). */
  spendsHold?: boolean;
}

const PERIOD_WINDOW = { day: 'todayMicros', week: 'weekMicros', month: 'monthMicros', total: 'totalMicros' } as const;
const MINUTE = 60_000;
/** Seeding a missing counter and asking again: more rounds than this means the counters keep vanishing. */
const SEED_ROUNDS = 3;

const tooMany = (message: string, retryAfterMs: number, headers: Record<string, string>) =>
  new ApiError('rate_limit_exceeded', message, {
    headers: { ...headers, 'retry-after': String(Math.max(1, Math.ceil(retryAfterMs / 1000))) },
  });

/**
 * Admission for /v1 calls, in the order requests/min (GCRA) → concurrency lease → tokens/min →
 * money (the credit balance and every blocking cap), all taken together or not at all by the
 * coordination gate in one step. finish() settles with the real cost in one more step (gives back
 * what was reserved beyond it, releases the lease, corrects the token estimate) and queues the
 * request-log row.
 */
export class GovernedAdmission implements InferenceAdmission {
  /**
   * Calls still running: one timer renews their leases (long streams keep their slot) and keeps
   * their money counters from idling out while they hold a reservation in them.
   */
  private readonly live = new Set<{ keys: string[]; leaseId: string; counters: string[] }>();
  /**
   * Calls in flight per scope: their count, reserved micro-USD and token estimates. Seeding a
   * missing counter adds the money (with what the request-log writer has not stored yet), so a
   * counter re-created while calls run (idle expiry, a cap's new period, a coordination store that
   * lost its data) still holds their reservations; the counts and tokens re-seed rate windows after
   * a loss. The gate reports all of it to other replicas when its store loses its data.
   */
  private readonly inflight = new Map<string, Outstanding>();
  private heartbeat: NodeJS.Timeout | null = null;
  /** Settlements still running: the gate call and, with an alert-only cap, the alert check. */
  private settlingCount = 0;
  private readonly settledOne = (): void => {
    this.settlingCount -= 1;
    this.wakeIdle();
  };
  /** Waiting in idle() for the moment no call is live and nothing is settling. */
  private idleWaiters: Array<() => void> = [];
  /** Lease ids: unique per process (random prefix) without a random draw per call. */
  private readonly leasePrefix = randomUUID();
  private leaseSequence = 0;
  private readonly plans = new WeakMap<Credential, ScopePlan>();

  constructor(private readonly deps: GovernanceDeps) {
    deps.coordination.gate.recovery.setHoldingsSource(() => this.holdings());
    // Rows reported as pending and now stored would otherwise be counted twice by a re-seed after a loss.
    deps.writer.afterStore(() => deps.coordination.gate.recovery.refresh());
  }

  /** Starts renewing live leases and counters; a crashed process's leases lapse on their own TTL. */
  start(): void {
    const { coordination, settings } = this.deps;
    this.heartbeat ??= setInterval(
      () => {
        const counters = new Set<string>();
        for (const call of this.live) {
          if (call.keys.length > 0) void coordination.leases.renew(call.keys, call.leaseId, settings.leaseTtlMs).catch(() => undefined);
          for (const counter of call.counters) counters.add(counter);
        }
        // Giving nothing refreshes a counter's TTL: one that idled out mid-call would be re-seeded without other replicas' reservations.
        if (counters.size > 0)
          void coordination.allowances
            .give(
              [...counters].map((key) => ({ key, amount: 0 })),
              settings.counterTtlMs,
            )
            .catch(() => undefined);
      },
      Math.max(1000, Math.floor(settings.leaseTtlMs / 3)),
    );
    this.heartbeat.unref();
  }

  /** What this replica holds: per scope, calls in flight plus rows not yet in the request log; the leases of calls in flight. */
  private holdings(): Holdings {
    const totals = new Map<string, Outstanding>();
    for (const [scope, held] of this.inflight) totals.set(scope, { ...held });
    this.deps.writer.forEachPending((scope, id, rows) => {
      const key = `${scope}:${id}`;
      const total = totals.get(key) ?? { micros: 0, requests: 0, tokens: 0 };
      total.micros += Number(rows.micros);
      total.requests += rows.requests;
      total.tokens += rows.tokens;
      totals.set(key, total);
    });
    // Holds being placed or released here, which the database does not show as they are yet.
    for (const [key, micros] of this.deps.holds?.transient() ?? []) {
      const total = totals.get(key) ?? { micros: 0, requests: 0, tokens: 0 };
      total.micros += micros;
      totals.set(key, total);
    }
    return { outstanding: totals, leases: this.live, leaseTtlMs: this.deps.settings.leaseTtlMs };
  }

  stop(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
  }

  /**
   * Resolves once no admitted call is running and every settlement begun has ended (alert-only
   * caps' alerts included): what a test awaits instead of sleeping until background work is done.
   * The rows those calls queued are then the request-log writer's to store (its flush()).
   */
  idle(): Promise<void> {
    if (this.live.size === 0 && this.settlingCount === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private wakeIdle(): void {
    if (this.idleWaiters.length === 0 || this.live.size > 0 || this.settlingCount > 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }

  async peekHeaders(credential: Credential): Promise<Record<string, string>> {
    const plan = this.planOf(credential);
    const { rateLimiter } = this.deps.coordination;
    const [requests, tokens] = await Promise.all([plan.requests.length > 0 ? rateLimiter.peek(plan.requests) : [], plan.tokenBuckets.length > 0 ? rateLimiter.peek(plan.tokenBuckets) : []]);
    return rateLimitHeaders(requests, tokens);
  }

  async chargeRequest(credential: Credential): Promise<Record<string, string>> {
    const plan = this.planOf(credential);
    if (plan.requests.length === 0) return this.peekHeaders(credential);
    const { gate, rateLimiter } = this.deps.coordination;
    // Only the request buckets: the gate's order and its re-seeding of windows a lost store dropped, nothing else taken.
    const request: GateRequest = {
      requests: plan.requests,
      leases: [],
      leaseId: '',
      leaseTtlMs: this.deps.settings.leaseTtlMs,
      tokens: [],
      takes: [],
      counterTtlMs: this.deps.settings.counterTtlMs,
    };
    let result = await gate.admit(request);
    for (let round = 0; round < SEED_ROUNDS && !result.ok && result.refused === 'unseeded'; round += 1) {
      const { keys } = result;
      await Promise.all(keys.map((key) => this.seedWindow(plan.windows.get(key))));
      result = await gate.admit(request);
    }
    const tokens = plan.tokenBuckets.length > 0 ? await rateLimiter.peek(plan.tokenBuckets) : [];
    const headers = rateLimitHeaders(result.requests, tokens);
    if (!result.ok) throw this.refusal(result, { headers, tokens: [], tokenEstimate: 0, caps: [], estimate: 0 });
    return headers;
  }

  /** A refusal before admit (a guardrail block): a row of its own in the request log, no body, nothing charged. */
  refused(call: RefusedCall): void {
    const { credential } = call;
    this.deps.writer.enqueue({
      id: call.requestId,
      organizationId: credential.organizationId,
      projectId: credential.kind === 'key' ? credential.projectId : null,
      keyId: credential.kind === 'key' ? credential.keyId : null,
      endpoint: call.endpoint,
      model: call.model,
      provider: null,
      upstreamModel: null,
      statusCode: call.status,
      errorCode: this.typedErrorCode(call.errorCode, call.requestId),
      inputTokens: 0,
      cachedInputTokens: 0,
      cacheWriteTokens: 0,
      outputTokens: 0,
      reasoningTokens: 0,
      usageEstimated: false,
      costMicros: 0n,
      priceVersion: this.deps.prices.get(call.model)?.version ?? null,
      latencyMs: 0,
      ttftMs: null,
      streamed: false,
      attempts: 0,
      createdAt: this.deps.clock(),
      bodies: null,
    });
  }

  async admit(request: AdmissionRequest): Promise<Admission> {
    const { settings, policies } = this.deps;
    const { credential } = request;
    const sheet = (request.hold ? (this.deps.batchPrices ?? this.deps.prices) : this.deps.prices).get(request.model);
    if (!sheet) throw new ApiError('model_not_priced', `Model ${request.model} has no prices; refusing to serve it unmetered`);
    const unpriced = unpricedUnit(request.estimate.units, sheet);
    if (unpriced) throw new ApiError('unit_not_priced', unpriced.message, { param: unpriced.param });
    const plan = this.planOf(credential);
    // A batch line spends from its hold; one whose hold has ended is admitted as any call is (at the batch price).
    if (request.hold) {
      const held = await this.heldAdmission(request, request.hold, sheet, plan);
      if (held) return held;
    }
    const tokenEstimate = request.estimate.inputTokens + request.estimate.maxOutputTokens;
    const tokens: RateEntry[] = plan.tokenBuckets.map((bucket) => ({ key: bucket.key, limit: bucket.limit, periodMs: bucket.periodMs, cost: tokenEstimate }));
    const estimate = Number(estimateCostMicros(request.estimate, sheet));
    const account = policies.accountIfCached(credential.organizationId) ?? (await policies.account(credential.organizationId));
    const pendingCaps = this.capsOf(credential, account.cap);
    const caps = pendingCaps instanceof Promise ? await pendingCaps : pendingCaps;
    const takes: AllowanceTake[] = [{ key: plan.creditKey, amount: estimate, shrink: true }];
    for (const entry of caps) if (entry.cap.mode === 'blocking') takes.push({ key: entry.counter, amount: estimate, shrink: false, headroom: Number(entry.cap.limitMicros) });
    const leaseId = `${this.leasePrefix}:${(this.leaseSequence += 1)}`;
    const gate: GateRequest = { requests: plan.requests, leases: plan.leases, leaseId, leaseTtlMs: settings.leaseTtlMs, tokens, takes, counterTtlMs: settings.counterTtlMs };

    // The first ask inline: admitSeeded's own promise only when something must be seeded.
    const first = await this.deps.coordination.gate.admit(gate);
    const result = needsSeed(first) ? await this.admitSeeded(gate, plan, caps, credential, first) : first;
    // Refusals report the token family too when a limit is set (absent means "not measured").
    const headers = rateLimitHeaders(result.requests, result.tokens);
    if (!result.ok) {
      const short = result.refused === 'money' && result.allowance.reason === 'insufficient' ? result.allowance : null;
      const refusingCap = short ? caps.find((entry) => entry.counter === short.key) : undefined;
      if (short && refusingCap) await this.capReached(refusingCap, short.remaining, credential);
      throw this.refusal(result, { headers, tokens, tokenEstimate, caps, estimate });
    }
    return this.admission({
      scopes: plan.scopes,
      reserved: estimate,
      request,
      context: this.callContext(plan, request, sheet),
      sheet,
      takes,
      taken: result.taken,
      tokens,
      tokenEstimate,
      leaseKeys: plan.leaseKeys,
      leaseId,
      caps,
      headers,
      logBodies: account.requestLogging,
      ...(request.hold ? { batchLine: { batchId: request.hold.batchId } } : {}),
    });
  }

  /**
   * The gate's answer, after seeding what it asked for: a counter idle past its TTL (or never used)
   * is re-read from the ledger or the request log; a rate window the coordination store lost, from
   * the request log's last minute. `firstAnswer`: the gate's answer to the first ask, when the
   * caller already has it.
   */
  private async admitSeeded(gate: GateRequest, plan: ScopePlan, caps: CapEntry[], credential: Credential, firstAnswer?: GateResult): Promise<GateResult> {
    const { coordination } = this.deps;
    let result = firstAnswer ?? (await coordination.gate.admit(gate));
    for (let round = 0; round < SEED_ROUNDS && needsSeed(result); round += 1) {
      if (result.refused === 'unseeded') await Promise.all(result.keys.map((key) => this.seedWindow(plan.windows.get(key))));
      else await Promise.all(result.allowance.keys.map((key) => this.seed(key, caps, credential)));
      result = await coordination.gate.admit(gate);
    }
    return result;
  }

  /**
   * A batch line whose spend hold is open: nothing taken (the hold has the money; no rate window,
   * no concurrency slot), settled against the hold. Null when the hold is not open (released, or
   * not this organisation's): the line is then admitted as any call is.
   */
  private async heldAdmission(request: AdmissionRequest, hold: CallHold, sheet: PriceSheet, plan: ScopePlan): Promise<Admission | null> {
    const { credential } = request;
    const holds = this.deps.holds;
    if (!holds || !(await holds.isOpen(credential.organizationId, hold.holdId))) return null;
    const { policies } = this.deps;
    const account = policies.accountIfCached(credential.organizationId) ?? (await policies.account(credential.organizationId));
    const caps = await this.capsOf(credential, account.cap);
    // The counters a cost beyond the hold is taken from, as a live call's would be.
    const counters = [plan.creditKey, ...caps.filter((entry) => entry.cap.mode === 'blocking').map((entry) => entry.counter)];
    const context = { ...this.callContext(plan, request, sheet), holdId: hold.holdId, batchId: hold.batchId };
    return this.admission({
      scopes: [],
      reserved: 0,
      request,
      context,
      sheet,
      takes: counters.map((key) => ({ key, amount: 0, shrink: false })),
      taken: counters.map(() => 0),
      tokens: [],
      tokenEstimate: 0,
      leaseKeys: [],
      leaseId: '',
      caps,
      headers: {},
      logBodies: account.requestLogging,
      batchLine: { holdId: hold.holdId, batchId: hold.batchId },
      spendsHold: true,
    });
  }

  /**
   * Takes `micros` from the credit balance (the whole amount, no overdraw) and from every blocking
   * cap of the credential in one gate step, seeding counters as admit does: what a spend hold holds
   * (spend-holds.ts). Refuses as admit does (402 insufficient_credit / budget_exceeded), naming the
   * amount. Resolves to the counters taken from.
   */
  async takeHeld(credential: Credential, micros: number): Promise<string[]> {
    const { policies, settings } = this.deps;
    const plan = this.planOf(credential);
    const account = policies.accountIfCached(credential.organizationId) ?? (await policies.account(credential.organizationId));
    const caps = await this.capsOf(credential, account.cap);
    const takes: AllowanceTake[] = [{ key: plan.creditKey, amount: micros, shrink: false }];
    for (const entry of caps) if (entry.cap.mode === 'blocking') takes.push({ key: entry.counter, amount: micros, shrink: false, headroom: Number(entry.cap.limitMicros) });
    const gate: GateRequest = { requests: [], leases: [], leaseId: '', leaseTtlMs: settings.leaseTtlMs, tokens: [], takes, counterTtlMs: settings.counterTtlMs };
    const result = await this.admitSeeded(gate, plan, caps, credential);
    if (!result.ok) {
      const short = result.refused === 'money' && result.allowance.reason === 'insufficient' ? result.allowance : null;
      const refusingCap = short ? caps.find((entry) => entry.counter === short.key) : undefined;
      if (short && refusingCap) await this.capReached(refusingCap, short.remaining, credential);
      throw this.refusal(result, { headers: {}, tokens: [], tokenEstimate: 0, caps, estimate: micros, held: true });
    }
    return takes.map((take) => take.key);
  }

  private refusal(
    result: Exclude<GateResult, { ok: true }>,
    context: { headers: Record<string, string>; tokens: RateEntry[]; tokenEstimate: number; caps: CapEntry[]; estimate: number; held?: boolean },
  ): ApiError {
    const { headers } = context;
    const reject = this.deps.onRejected ?? (() => undefined);
    switch (result.refused) {
      case 'unseeded':
        return new ApiError('metering_unavailable');
      case 'requests':
        reject('requests');
        return tooMany('Too many requests per minute for this key, project or account; retry after the time in retry-after', maxRetry(result.requests), headers);
      case 'concurrency':
        reject('concurrency');
        return tooMany('Too many requests in flight at once for this key, project or account', 1000, headers);
      case 'tokens': {
        reject('tokens');
        const tooBig = context.tokens.some((e) => e.cost > e.limit);
        return tooMany(
          tooBig
            ? `This request may use up to ${context.tokenEstimate} tokens, more than the tokens-per-minute limit allows at once; lower max_tokens`
            : 'Too many tokens per minute for this key, project or account; retry after the time in retry-after',
          maxRetry(result.tokens),
          headers,
        );
      }
      case 'money': {
        const refused = result.allowance;
        if (refused.reason === 'missing') return new ApiError('metering_unavailable');
        const left = Math.max(0, refused.remaining);
        if (refused.key.startsWith('credit:')) {
          reject('credit');
          if (context.held) {
            const message = `The credit balance cannot hold $${microsToUsd(BigInt(context.estimate))} for these calls ($${microsToUsd(BigInt(left))} is free); top up (GET /client/credits shows the balance) or ask for less`;
            return new ApiError('insufficient_credit', message, { headers });
          }
          return new ApiError('insufficient_credit', undefined, { headers });
        }
        reject('budget');
        const cap = context.caps.find((c) => c.counter === refused.key)!;
        if (context.held) {
          return new ApiError(
            'budget_exceeded',
            `The ${cap.scope} spend cap of $${microsToUsd(cap.cap.limitMicros)} per ${cap.cap.period} cannot hold $${microsToUsd(BigInt(context.estimate))} for these calls: ` +
              `$${microsToUsd(BigInt(left))} is left. GET /client/budget shows every cap.`,
            { headers },
          );
        }
        return new ApiError(
          'budget_exceeded',
          `The ${cap.scope} spend cap of $${microsToUsd(cap.cap.limitMicros)} per ${cap.cap.period} is used up` +
            (left > 0
              ? ` for a request of this size: $${microsToUsd(BigInt(left))} is left, and this request may cost up to $${microsToUsd(BigInt(context.estimate))}; lower max_tokens`
              : '') +
            '. GET /client/budget shows every cap.',
          { headers },
        );
      }
    }
  }

  private planOf(credential: Credential): ScopePlan {
    const known = this.plans.get(credential);
    if (known) return known;
    const { settings } = this.deps;
    const scopes: Array<{ kind: ScopeKind; id: string; limits: LimitSet }> = [];
    if (credential.kind === 'key') {
      const keyLimits = (own: LimitSet): LimitSet => ({
        requestsPerMinute: own.requestsPerMinute ?? settings.keyDefaults.requestsPerMinute,
        tokensPerMinute: own.tokensPerMinute ?? settings.keyDefaults.tokensPerMinute,
        concurrency: own.concurrency ?? settings.keyDefaults.concurrency,
      });
      scopes.push({ kind: 'key', id: credential.keyId, limits: keyLimits(credential.rateLimits) });
      // The keys that made this one: their buckets and leases count every call of every key they made.
      for (const maker of credential.ancestors) scopes.push({ kind: 'key', id: maker.keyId, limits: keyLimits(maker.rateLimits) });
      scopes.push({ kind: 'project', id: credential.projectId, limits: settings.project });
    }
    scopes.push({ kind: 'account', id: credential.organizationId, limits: settings.account });
    const plan: ScopePlan = {
      requests: [],
      tokenBuckets: [],
      leases: [],
      leaseKeys: [],
      creditKey: creditCounterKey(credential.organizationId),
      scopes: scopes.map(({ kind, id }) => `${kind}:${id}`),
      contexts: new Map(),
      windows: new Map(),
    };
    for (const { kind, id, limits } of scopes) {
      if (limits.requestsPerMinute) {
        const entry = { key: `rpm:${kind}:${id}`, limit: limits.requestsPerMinute, periodMs: MINUTE, cost: 1 };
        plan.requests.push(entry);
        plan.windows.set(entry.key, { entry, scope: kind, id, counts: 'requests' });
      }
      if (limits.tokensPerMinute) {
        const entry = { key: `tpm:${kind}:${id}`, limit: limits.tokensPerMinute, periodMs: MINUTE };
        plan.tokenBuckets.push(entry);
        plan.windows.set(entry.key, { entry, scope: kind, id, counts: 'tokens' });
      }
      if (limits.concurrency) plan.leases.push({ key: `conc:${kind}:${id}`, limit: limits.concurrency });
    }
    plan.leaseKeys = plan.leases.map((lease) => lease.key);
    this.plans.set(credential, plan);
    return plan;
  }

  /** Made once per credential, endpoint, model and stream flag: the journal encodes each once. */
  private callContext(plan: ScopePlan, request: AdmissionRequest, sheet: PriceSheet): CallContext {
    // A batch line's sheet is not the model's live one: its price version differs.
    const name = `${request.endpoint} ${request.model} ${request.stream}${request.hold ? ' batch' : ''}`;
    let context = plan.contexts.get(name);
    if (!context) {
      const { credential } = request;
      context = {
        organizationId: credential.organizationId,
        projectId: credential.kind === 'key' ? credential.projectId : null,
        keyId: credential.kind === 'key' ? credential.keyId : null,
        endpoint: request.endpoint,
        model: request.model,
        priceVersion: sheet.version,
        streamed: request.stream,
      };
      plan.contexts.set(name, context);
    }
    return context;
  }

  /** The credential's spend caps; at once (no promise) when its project's policy is cached, as on nearly every call. */
  private capsOf(credential: Credential, accountCap: SpendCap | null): CapEntry[] | Promise<CapEntry[]> {
    if (credential.kind !== 'key') return this.capEntries(credential, null, accountCap);
    const { policies } = this.deps;
    const project = policies.projectIfCached(credential.projectId);
    if (project) return this.capEntries(credential, project.cap, accountCap);
    return policies.project(credential.organizationId, credential.projectId).then((read) => this.capEntries(credential, read.cap, accountCap));
  }

  private capEntries(credential: Credential, projectCap: SpendCap | null, accountCap: SpendCap | null): CapEntry[] {
    const entries: CapEntry[] = [];
    const add = (scope: ScopeKind, id: string, cap: SpendCap | null) => {
      if (cap) entries.push({ scope, id, cap, counter: capCounterKey(scope, id, cap.period, this.deps.clock()) });
    };
    if (credential.kind === 'key') {
      add('key', credential.keyId, credential.spendCap);
      // A maker's cap counts what its descendants spend (SpendReader.forKey), so minting keys cannot multiply it.
      for (const maker of credential.ancestors) add('key', maker.keyId, maker.spendCap);
      add('project', credential.projectId, projectCap);
    }
    add('account', credential.organizationId, accountCap);
    return entries;
  }

  /**
   * Creates a missing counter from the durable store (ledger balance, or spend in the cap's
   * period) less everything it does not know yet: rows the writer has not stored, reservations of
   * calls in flight here, and what other replicas reported after the coordination store lost its
   * data. A cap's counter holds minus the spend; its take adds the cap as headroom.
   */
  private async seed(key: string, caps: CapEntry[], credential: Credential): Promise<void> {
    const { allowances, gate } = this.deps.coordination;
    const ttl = this.deps.settings.counterTtlMs;
    if (key.startsWith('credit:')) {
      await this.deps.ledger.ensureAccount(credential.organizationId, this.deps.settings.initialCreditMicros);
      // Outstanding first, then the ledger: a flush or a settlement in between is then counted
      // twice (the safe way round) rather than not at all.
      const scope = `account:${credential.organizationId}`;
      const outstanding =
        this.localOutstanding('account', credential.organizationId) +
        (await gate.recovery.othersOutstanding(scope)).micros +
        (await this.heldIn(credential.organizationId, 'account', credential.organizationId));
      const balance = (await this.deps.ledger.balance(credential.organizationId)) ?? 0n;
      await allowances.seed(key, Number(balance) - outstanding, ttl);
      return;
    }
    const cap = caps.find((c) => c.counter === key);
    if (!cap) return;
    const outstanding =
      this.localOutstanding(cap.scope, cap.id) + (await gate.recovery.othersOutstanding(`${cap.scope}:${cap.id}`)).micros + (await this.heldIn(credential.organizationId, cap.scope, cap.id));
    const spent = await this.durableSpentInPeriod(cap);
    await allowances.seed(key, -(Number(spent) + outstanding), ttl);
  }

  /** What spend holds in the scope still hold (none without holds). */
  private heldIn(organizationId: string, scope: ScopeKind, id: string): Promise<number> {
    return this.deps.holds?.outstanding(organizationId, scope, id) ?? Promise.resolve(0);
  }

  private localOutstanding(scope: ScopeKind, id: string): number {
    return (this.inflight.get(`${scope}:${id}`)?.micros ?? 0) + Number(this.deps.writer.pendingMicros(scope, id));
  }

  /**
   * Re-seeds a rate window the coordination store lost with what was admitted in its last period:
   * the request log's rows, this replica's calls in flight and unwritten rows, and what the other
   * replicas reported of theirs. Outstanding first, then the request log: a row stored in between
   * is counted twice (the safe way round) rather than not at all.
   */
  private async seedWindow(window: RateWindow | undefined): Promise<void> {
    if (!window) return;
    const { gate } = this.deps.coordination;
    const { entry, scope, id, counts } = window;
    const local = this.inflight.get(`${scope}:${id}`);
    const pending = this.deps.writer.pendingRows(scope, id);
    const others = await gate.recovery.othersOutstanding(`${scope}:${id}`);
    const logged = await this.deps.spend.recentCalls(scope, id, new Date(this.deps.clock().getTime() - entry.periodMs));
    const units = (local?.[counts] ?? 0) + (pending?.[counts] ?? 0) + others[counts] + logged[counts];
    await gate.recovery.seedWindow({ ...entry, cost: units });
  }

  private durableSpentInPeriod(cap: CapEntry): Promise<bigint> {
    const { spend, clock } = this.deps;
    const windows = cap.scope === 'key' ? spend.forKey(cap.id, clock()) : cap.scope === 'project' ? spend.forProject(cap.id, clock()) : spend.forOrganization(cap.id, clock());
    return windows.then((w) => w[PERIOD_WINDOW[cap.cap.period]]);
  }

  /** Spent in the cap's period, the writer's queue included. */
  private async spentInPeriod(cap: CapEntry): Promise<bigint> {
    // Pending before the database, for the same reason as the credit seed.
    const pending = this.deps.writer.pendingMicros(cap.scope, cap.id);
    return (await this.durableSpentInPeriod(cap)) + pending;
  }

  private admission(state: AdmittedCall): Admission {
    const { logger } = this.deps;
    const held = { keys: state.leaseKeys, leaseId: state.leaseId, counters: state.takes.map((take) => take.key) };
    this.live.add(held);
    this.reserve(state.scopes, state.reserved, state.tokenEstimate, 1);
    let finished = false;
    const createdAt = this.deps.clock();
    // Before the call can reach the upstream: from here a process death still bills it (its input;
    // the upstream may have served it, and bills what it received).
    try {
      const inputTokens = state.request.countedInputTokens;
      const units = inputUnits(state.request.estimate.units);
      const cost = callCost(estimatedUsage(inputTokens, 0), units, state.sheet);
      this.deps.writer.admitted({
        id: state.request.requestId,
        context: state.context,
        inputTokens,
        units,
        costMicros: cost.costMicros,
        unitsCostMicros: units && cost.unitsCostMicros,
        createdAt,
      });
    } catch (error) {
      logger.error({ err: error, requestId: state.request.requestId }, 'journaling an admitted call failed');
    }
    return {
      headers: state.headers,
      logBodies: state.logBodies,
      finish: (outcome: CallOutcome) => {
        if (finished) return undefined;
        finished = true;
        this.live.delete(held);
        // Synchronously with the row's enqueue in settle: the money moves from in flight to pending in one turn.
        this.reserve(state.scopes, state.reserved, state.tokenEstimate, -1);
        // finish never throws (the contract): a synchronous failure is reported like a rejected one.
        let settling: Promise<void> | undefined;
        try {
          settling = this.settle(state, outcome, createdAt);
          this.settlingCount += 1;
          // One reaction per call, as before idle() existed: a counter, not a set of promises.
          settling.then(this.settledOne, (error: unknown) => {
            logger.error({ err: error, requestId: state.request.requestId }, 'settling a call failed');
            this.settledOne();
          });
        } catch (error) {
          logger.error({ err: error, requestId: state.request.requestId }, 'settling a call failed');
        }
        this.wakeIdle();
        // Handled above, so a caller that ignores it leaves no unhandled rejection; its reactions run after
        // settledOne's, so whoever reacts to it sees the call settled.
        return settling;
      },
    };
  }

  /** Counts a call in flight in each of its scopes (sign 1) or no longer (sign -1). */
  private reserve(scopes: string[], micros: number, tokens: number, sign: 1 | -1): void {
    for (const scope of scopes) {
      const held = this.inflight.get(scope);
      if (!held) {
        this.inflight.set(scope, { micros: sign * micros, requests: sign, tokens: sign * tokens });
        continue;
      }
      held.micros += sign * micros;
      held.requests += sign;
      held.tokens += sign * tokens;
      if (held.requests === 0) this.inflight.delete(scope);
    }
  }

  /** Not an async function: most calls have no alert cap to check, and then settling is one gate call. */
  private settle(state: AdmittedCall, outcome: CallOutcome, createdAt: Date): Promise<void> {
    const { coordination, settings } = this.deps;
    const { request, sheet, takes, taken } = state;
    const usage = outcome.usage;
    const bill = callCost(usage, outcome.units, sheet);
    if (bill.unpriced.length > 0) {
      this.deps.logger.error({ requestId: request.requestId, model: request.model, units: bill.unpriced }, 'a call used units its model has no price for; they were billed nothing');
    }
    const cost = bill.costMicros;
    this.deps.onCharged?.(request.model, cost);
    if (state.spendsHold) return this.settleHeld(state, outcome, bill, createdAt);
    // Give back what was reserved beyond the real cost (or take the rest if it cost more).
    const spent = Number(cost);
    const gives = takes.map((take, i) => ({ key: take.key, amount: taken[i]! - spent }));
    const used = usage ? usage.inputTokens + usage.outputTokens : 0;
    const tokens = state.tokens.map((entry) => ({ key: entry.key, limit: entry.limit, periodMs: entry.periodMs, cost: used - state.tokenEstimate }));
    const settled = coordination.gate.settle({ leaseKeys: state.leaseKeys, leaseId: state.leaseId, gives, counterTtlMs: settings.counterTtlMs, tokens });
    const credential = request.credential;
    const errorCode = outcome.errorCode === null ? null : this.typedErrorCode(outcome.errorCode, request.requestId);
    this.deps.writer.enqueue(requestLogRow(state, outcome, bill, errorCode, createdAt));
    const alerting = cost > 0n ? state.caps.filter((entry) => entry.cap.mode === 'alert') : [];
    return alerting.length === 0 ? settled : settled.then(() => this.alertIfReached(alerting, credential.organizationId, confinedProjectOf(credential)));
  }

  /**
   * A batch line: its cost is spent from its hold, and only what the hold no longer covers is taken
   * from the counters it would have reserved from (normally nothing). The row is queued after the
   * hold is charged, whatever the charge's fate: the hold's outstanding amount counts it until then.
   */
  private settleHeld(state: AdmittedCall, outcome: CallOutcome, bill: CallCost, createdAt: Date): Promise<void> {
    const { request } = state;
    const credential = request.credential;
    const holdId = state.batchLine!.holdId!;
    const charged = this.deps.holds!.spend(credential.organizationId, holdId, bill.costMicros).catch((error: unknown) => {
      this.deps.logger.error({ err: error, requestId: request.requestId, holdId }, 'a batch line could not be charged to its spend hold; its cost counts as spent when its row is stored');
      return 0n;
    });
    return charged.then(async (beyond: bigint) => {
      const errorCode = outcome.errorCode === null ? null : this.typedErrorCode(outcome.errorCode, request.requestId);
      this.deps.writer.enqueue(requestLogRow(state, outcome, bill, errorCode, createdAt));
      if (beyond > 0n) {
        const gives = state.takes.map((take) => ({ key: take.key, amount: -Number(beyond) }));
        await this.deps.coordination.gate.settle({ leaseKeys: [], leaseId: '', gives, counterTtlMs: this.deps.settings.counterTtlMs, tokens: [] });
      }
      const alerting = bill.costMicros > 0n ? state.caps.filter((entry) => entry.cap.mode === 'alert') : [];
      if (alerting.length > 0) await this.alertIfReached(alerting, credential.organizationId, confinedProjectOf(credential));
    });
  }

  /** A call's error code as the request log types it; a code no catalogue names is logged and stored as internal_error. */
  private typedErrorCode(code: string, requestId: string): RequestLogErrorCode {
    const typed = requestLogErrorCode(code);
    if (typed) return typed;
    this.deps.logger.error({ requestId, errorCode: code }, 'a call ended with an error code no catalogue names; logged as internal_error');
    return 'internal_error';
  }

  /**
   * A blocking cap refused a call: record it (once per period and cap, see BudgetAlerts) as
   * budget.cap_reached. The refusal stands whatever happens here; a failure to record is logged.
   */
  private async capReached(cap: CapEntry, remaining: number, credential: Credential): Promise<void> {
    const now = this.deps.clock();
    if (this.deps.alerts.alreadyRecorded(cap.scope, cap.id, cap.cap, now)) return;
    const spentMicros = cap.cap.limitMicros - BigInt(Math.max(0, Math.floor(remaining)));
    const projectId = cap.scope === 'account' ? null : confinedProjectOf(credential);
    try {
      await this.deps.alerts.record({ scope: cap.scope, scopeId: cap.id, organizationId: credential.organizationId, projectId, cap: cap.cap, spentMicros, now });
    } catch (error) {
      this.deps.logger.error({ err: error, scope: cap.scope, scopeId: cap.id }, 'a spend cap refused a call but budget.cap_reached could not be recorded');
    }
  }

  /** Alert-only caps: record (once per period and cap, see BudgetAlerts) that spending reached one. */
  private async alertIfReached(caps: CapEntry[], organizationId: string, projectId: string | null): Promise<void> {
    for (const cap of caps) {
      // Once this period's alert exists, summing the period's spend again would only confirm it.
      if (this.deps.alerts.alreadyRecorded(cap.scope, cap.id, cap.cap, this.deps.clock())) continue;
      const spent = await this.spentInPeriod(cap);
      if (spent >= cap.cap.limitMicros) {
        // A key's and a project's caps are those of the calling key's project; an account cap has none.
        const capProject = cap.scope === 'account' ? null : projectId;
        await this.deps.alerts.record({ scope: cap.scope, scopeId: cap.id, organizationId, projectId: capProject, cap: cap.cap, spentMicros: spent, now: this.deps.clock() });
      }
    }
  }
}

const NO_MAKERS: readonly string[] = [];

/** A call's request-log row: what it cost and how it went. */
function requestLogRow(state: AdmittedCall, outcome: CallOutcome, bill: CallCost, errorCode: RequestLogErrorCode | null, createdAt: Date): RequestLogRow {
  const { request } = state;
  const { credential } = request;
  const usage = outcome.usage;
  return {
    id: request.requestId,
    organizationId: credential.organizationId,
    projectId: credential.kind === 'key' ? credential.projectId : null,
    keyId: credential.kind === 'key' ? credential.keyId : null,
    makerKeyIds: credential.kind === 'key' && credential.ancestors.length > 0 ? credential.ancestors.map((maker) => maker.keyId) : NO_MAKERS,
    endpoint: request.endpoint,
    model: request.model,
    provider: outcome.provider,
    upstreamModel: outcome.upstreamModel,
    statusCode: outcome.status,
    errorCode,
    inputTokens: usage?.inputTokens ?? 0,
    cachedInputTokens: usage?.cachedInputTokens ?? 0,
    cacheWriteTokens: usage?.cacheWriteTokens ?? 0,
    outputTokens: usage?.outputTokens ?? 0,
    reasoningTokens: usage?.reasoningTokens ?? 0,
    usageEstimated: usage?.estimated ?? false,
    units: billedUnits(outcome.units),
    costMicros: bill.costMicros,
    unitsCostMicros: bill.unitsCostMicros,
    priceVersion: state.sheet.version,
    latencyMs: outcome.latencyMs,
    ttftMs: outcome.ttftMs,
    streamed: request.stream,
    attempts: outcome.attempts,
    createdAt,
    ...state.batchLine,
    bodies: state.logBodies && outcome.bodies ? outcome.bodies : null,
  };
}

/**
 * The units of a call's estimate that are its input, counted from the request before the call
 * (speech characters, seconds of audio to transcribe): billed with its input if its process dies.
 * Images and web searches are output, unknown until the upstream answers, like output tokens.
 */
function inputUnits(units: MeteredUnits | undefined): MeteredUnits | undefined {
  if (!units || (units.characters === undefined && units.audioSeconds === undefined)) return undefined;
  return billedUnits({ characters: units.characters, audioSeconds: units.audioSeconds });
}

/** Units as the request log stores them: only those used, audio in the whole seconds billed. */
function billedUnits(units: MeteredUnits | undefined): MeteredUnits | undefined {
  if (!units) return undefined;
  const stored: MeteredUnits = {};
  if (units.webSearches) stored.webSearches = units.webSearches;
  if (units.images && units.images.count > 0) stored.images = { count: units.images.count, size: units.images.size, quality: units.images.quality };
  if (units.characters) stored.characters = units.characters;
  const seconds = billedAudioSeconds(units.audioSeconds ?? 0);
  if (seconds > 0) stored.audioSeconds = seconds;
  return Object.keys(stored).length > 0 ? stored : undefined;
}

type SeedRefusal = Extract<GateResult, { refused: 'unseeded' }> | (Extract<GateResult, { refused: 'money' }> & { allowance: { reason: 'missing'; keys: string[] } });

/** The gate asks for counters or rate windows to be seeded before it can decide. */
function needsSeed(result: GateResult): result is SeedRefusal {
  return !result.ok && (result.refused === 'unseeded' || (result.refused === 'money' && result.allowance.reason === 'missing'));
}

function maxRetry(decisions: RateDecision[]): number {
  return decisions.reduce((max, d) => Math.max(max, d.retryAfterMs), 0);
}

import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Credential } from '../credential.ts';
import { ApiError } from '../errors.ts';
import type { Admission, AdmissionRequest, CallOutcome, InferenceAdmission } from '../inference-admission.ts';
import { microsToUsd } from '../money.ts';
import type { AllowanceResult, AllowanceTake, Coordination, LeaseEntry, RateDecision, RateEntry } from '../ports/coordination.ts';
import type { SpendCap, SpendReader, SpendWindows } from '../ports/identity.ts';
import type { CreditLedger } from '../ports/metering.ts';
import { periodStart } from '../time-windows.ts';
import type { CapPolicies } from './cap-policies.ts';
import { costMicros, estimateCostMicros, type PriceSheet } from './pricing.ts';
import { rateLimitHeaders } from './rate-limit-headers.ts';
import type { RequestLogWriter } from './request-log-writer.ts';
import type { BudgetAlerts } from './budget-alerts.ts';

export interface LimitSet {
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
  concurrency: number | null;
}

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
  clock: () => Date;
  logger: FastifyBaseLogger;
  settings: GovernanceSettings;
  onRejected?(kind: 'requests' | 'tokens' | 'concurrency' | 'credit' | 'budget'): void;
  onCharged?(model: string, micros: bigint): void;
}

type ScopeKind = 'key' | 'project' | 'account';

interface Scope {
  kind: ScopeKind;
  id: string;
  limits: LimitSet;
}

interface CapEntry {
  scope: ScopeKind;
  id: string;
  cap: SpendCap;
  counter: string;
}

const PERIOD_WINDOW = { day: 'todayMicros', week: 'weekMicros', month: 'monthMicros', total: 'totalMicros' } as const;
const MINUTE = 60_000;

const tooMany = (message: string, retryAfterMs: number, headers: Record<string, string>) =>
  new ApiError(429, 'rate_limit_exceeded', message, {
    type: 'rate_limit_error',
    headers: { ...headers, 'retry-after': String(Math.max(1, Math.ceil(retryAfterMs / 1000))) },
  });

/**
 * Admission for /v1 calls, cheapest check first, each undone if a later one refuses:
 * requests/min (GCRA) → concurrency lease → tokens/min → money (one all-or-nothing reservation
 * across the credit balance and every blocking cap). finish() settles with the real cost, gives
 * back what was reserved beyond it, releases the lease and queues the request-log row.
 */
export class GovernedAdmission implements InferenceAdmission {
  /** Leases of calls still running; one timer renews them all (long streams keep their slot). */
  private readonly live = new Set<{ keys: string[]; leaseId: string }>();
  private heartbeat: NodeJS.Timeout | null = null;
  /** Lease ids: unique per process (random prefix) without a random draw per call. */
  private readonly leasePrefix = randomUUID();
  private leaseSequence = 0;

  constructor(private readonly deps: GovernanceDeps) {}

  /** Starts renewing live leases; a crashed process's leases lapse on their own TTL. */
  start(): void {
    const { coordination, settings } = this.deps;
    this.heartbeat ??= setInterval(() => {
      for (const lease of this.live) void coordination.leases.renew(lease.keys, lease.leaseId, settings.leaseTtlMs).catch(() => undefined);
    }, Math.max(1000, Math.floor(settings.leaseTtlMs / 3)));
    this.heartbeat.unref();
  }

  stop(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
  }

  async peekHeaders(credential: Credential): Promise<Record<string, string>> {
    const scopes = this.scopesOf(credential);
    const rpm = scopes.flatMap((s) => (s.limits.requestsPerMinute ? [{ key: `rpm:${s.kind}:${s.id}`, limit: s.limits.requestsPerMinute, periodMs: MINUTE }] : []));
    const tpm = scopes.flatMap((s) => (s.limits.tokensPerMinute ? [{ key: `tpm:${s.kind}:${s.id}`, limit: s.limits.tokensPerMinute, periodMs: MINUTE }] : []));
    const [requests, tokens] = await Promise.all([
      rpm.length > 0 ? this.deps.coordination.rateLimiter.peek(rpm) : [],
      tpm.length > 0 ? this.deps.coordination.rateLimiter.peek(tpm) : [],
    ]);
    return rateLimitHeaders(requests, tokens);
  }

  async admit(request: AdmissionRequest): Promise<Admission> {
    const { coordination, settings } = this.deps;
    const { credential } = request;
    const sheet = this.deps.prices.get(request.model);
    if (!sheet) throw new ApiError(500, 'model_not_priced', `Model ${request.model} has no prices; refusing to serve it unmetered`);
    const scopes = this.scopesOf(credential);
    const tokenEstimate = request.estimate.inputTokens + request.estimate.maxOutputTokens;
    const rpm: RateEntry[] = scopes.flatMap((s) => (s.limits.requestsPerMinute ? [{ key: `rpm:${s.kind}:${s.id}`, limit: s.limits.requestsPerMinute, periodMs: MINUTE, cost: 1 }] : []));
    const tpm: RateEntry[] = scopes.flatMap((s) => (s.limits.tokensPerMinute ? [{ key: `tpm:${s.kind}:${s.id}`, limit: s.limits.tokensPerMinute, periodMs: MINUTE, cost: tokenEstimate }] : []));
    const leaseId = `${this.leasePrefix}:${(this.leaseSequence += 1)}`;
    const leases: LeaseEntry[] = scopes.flatMap((s) => (s.limits.concurrency ? [{ key: `conc:${s.kind}:${s.id}`, limit: s.limits.concurrency }] : []));
    const leaseKeys = leases.map((l) => l.key);
    const estimate = estimateCostMicros(request.estimate, sheet);
    const account = await this.deps.policies.account(credential.organizationId);
    const caps = await this.capsOf(credential, account.cap);
    const takes: AllowanceTake[] = [
      { key: `credit:${credential.organizationId}`, amount: Number(estimate), shrink: true },
      ...caps.filter((c) => c.cap.mode === 'blocking').map((c) => ({ key: c.counter, amount: Number(estimate), shrink: false })),
    ];

    // The four checks are issued together: on Redis they travel in one pipelined round trip, and
    // each is atomic on its own. Whatever was granted is given back if any other check refuses, in
    // the order of the admission rules (requests/min, concurrency, tokens/min, money).
    const [rpmResult, lease, tpmResult, firstTake] = await Promise.all([
      coordination.rateLimiter.consume(rpm),
      leases.length > 0 ? coordination.leases.acquire(leases, leaseId, settings.leaseTtlMs) : Promise.resolve({ acquired: true }),
      tpm.length > 0 ? coordination.rateLimiter.consume(tpm) : Promise.resolve({ allowed: true, decisions: [] as RateDecision[] }),
      coordination.allowances.take(takes, settings.counterTtlMs),
    ]);
    const undo: Array<() => Promise<unknown>> = [];
    if (rpmResult.allowed) undo.push(() => coordination.rateLimiter.adjust(rpm.map((e) => ({ ...e, cost: -1 }))));
    if (lease.acquired && leases.length > 0) undo.push(() => coordination.leases.release(leaseKeys, leaseId));
    if (tpmResult.allowed && tpm.length > 0) undo.push(() => coordination.rateLimiter.adjust(tpm.map((e) => ({ ...e, cost: -e.cost }))));
    if (firstTake.ok) {
      const taken = firstTake.taken;
      undo.push(() => coordination.allowances.give(takes.map((take, i) => ({ key: take.key, amount: taken[i]! })), settings.counterTtlMs));
    }

    try {
      // Refusals report the token family too when a limit is set (absent means "not measured").
      const tokenDecisions = tpmResult.decisions;
      if (!rpmResult.allowed) {
        this.deps.onRejected?.('requests');
        throw tooMany('Too many requests per minute for this key, project or account; retry after the time in retry-after', maxRetry(rpmResult.decisions), rateLimitHeaders(rpmResult.decisions, tokenDecisions));
      }
      if (!lease.acquired) {
        this.deps.onRejected?.('concurrency');
        throw tooMany('Too many requests in flight at once for this key, project or account', 1000, rateLimitHeaders(rpmResult.decisions, tokenDecisions));
      }
      if (!tpmResult.allowed) {
        this.deps.onRejected?.('tokens');
        const tooBig = tpm.some((e) => e.cost > e.limit);
        throw tooMany(
          tooBig
            ? `This request may use up to ${tokenEstimate} tokens, more than the tokens-per-minute limit allows at once; lower max_tokens`
            : 'Too many tokens per minute for this key, project or account; retry after the time in retry-after',
          maxRetry(tpmResult.decisions),
          rateLimitHeaders(rpmResult.decisions, tpmResult.decisions),
        );
      }
      const headers = rateLimitHeaders(rpmResult.decisions, tokenDecisions);
      const taken = firstTake.ok ? firstTake.taken : await this.reserve(takes, caps, credential, headers, firstTake);
      return this.admission({ request, sheet, takes, taken, tpm, tokenEstimate, leaseKeys, leaseId, caps, headers, logBodies: account.requestLogging });
    } catch (error) {
      await Promise.allSettled(undo.reverse().map((step) => step()));
      throw error;
    }
  }

  private scopesOf(credential: Credential): Scope[] {
    const { settings } = this.deps;
    const scopes: Scope[] = [];
    if (credential.kind === 'key') {
      const own = credential.rateLimits;
      scopes.push({
        kind: 'key',
        id: credential.keyId,
        limits: {
          requestsPerMinute: own.requestsPerMinute ?? settings.keyDefaults.requestsPerMinute,
          tokensPerMinute: own.tokensPerMinute ?? settings.keyDefaults.tokensPerMinute,
          concurrency: own.concurrency ?? settings.keyDefaults.concurrency,
        },
      });
      scopes.push({ kind: 'project', id: credential.projectId, limits: settings.project });
    }
    scopes.push({ kind: 'account', id: credential.organizationId, limits: settings.account });
    return scopes;
  }

  private async capsOf(credential: Credential, accountCap: SpendCap | null): Promise<CapEntry[]> {
    const now = this.deps.clock();
    const entries: CapEntry[] = [];
    const add = (scope: ScopeKind, id: string, cap: SpendCap | null) => {
      if (!cap) return;
      // The limit and period start are part of the name: a new period or a changed cap starts a fresh counter.
      const start = periodStart(cap.period, now).getTime();
      entries.push({ scope, id, cap, counter: `cap:${scope}:${id}:${cap.period}:${start}:${cap.limitMicros}` });
    };
    if (credential.kind === 'key') {
      add('key', credential.keyId, credential.spendCap);
      add('project', credential.projectId, await this.deps.policies.project(credential.organizationId, credential.projectId));
    }
    add('account', credential.organizationId, accountCap);
    return entries;
  }

  /** `headers`: the rate-limit headers a refusal carries too (every gateway response has them). */
  private async reserve(
    takes: AllowanceTake[],
    caps: CapEntry[],
    credential: Credential,
    headers: Record<string, string>,
    first: AllowanceResult,
  ): Promise<number[]> {
    const { allowances } = this.deps.coordination;
    const ttl = this.deps.settings.counterTtlMs;
    let result = first;
    for (let round = 0; round < 3; round += 1) {
      if (round > 0) result = await allowances.take(takes, ttl);
      if (result.ok) return result.taken;
      if (result.reason === 'missing') {
        await Promise.all(result.keys.map((key) => this.seed(key, caps, credential)));
        continue;
      }
      const refused = result;
      if (refused.key.startsWith('credit:')) {
        this.deps.onRejected?.('credit');
        throw new ApiError(402, 'insufficient_credit', 'The account’s credit balance is used up; top up to continue (GET /client/credits shows the balance)', { headers });
      }
      this.deps.onRejected?.('budget');
      const cap = caps.find((c) => c.counter === refused.key)!;
      const left = Math.max(0, refused.remaining);
      throw new ApiError(
        402,
        'budget_exceeded',
        `The ${cap.scope} spend cap of $${microsToUsd(cap.cap.limitMicros)} per ${cap.cap.period} is used up` +
          (left > 0 ? ` for a request of this size: $${microsToUsd(BigInt(left))} is left, and this request may cost up to $${microsToUsd(BigInt(takes[0]!.amount))}; lower max_tokens` : '') +
          '. GET /client/budget shows every cap.',
        { headers },
      );
    }
    throw new ApiError(503, 'metering_unavailable', 'Spend counters could not be prepared; it is safe to retry');
  }

  /** Creates a missing counter from the durable store: ledger balance or spend in the cap's period. */
  private async seed(key: string, caps: CapEntry[], credential: Credential): Promise<void> {
    const { writer } = this.deps;
    const { allowances } = this.deps.coordination;
    const ttl = this.deps.settings.counterTtlMs;
    if (key.startsWith('credit:')) {
      await this.deps.ledger.ensureAccount(credential.organizationId, this.deps.settings.initialCreditMicros);
      // Pending first, then the ledger: a flush committing in between is then counted twice (the
      // safe way round) rather than not at all.
      const pending = writer.pendingMicros(`org:${credential.organizationId}`);
      const balance = (await this.deps.ledger.balance(credential.organizationId)) ?? 0n;
      await allowances.seed(key, Number(balance - pending), ttl);
      return;
    }
    const cap = caps.find((c) => c.counter === key);
    if (!cap) return;
    const spent = await this.spentInPeriod(cap);
    await allowances.seed(key, Number(cap.cap.limitMicros - spent), ttl);
  }

  private async spentInPeriod(cap: CapEntry): Promise<bigint> {
    const now = this.deps.clock();
    const read: Record<ScopeKind, (id: string, now: Date) => Promise<SpendWindows>> = {
      key: (id, at) => this.deps.spend.forKey(id, at),
      project: (id, at) => this.deps.spend.forProject(id, at),
      account: (id, at) => this.deps.spend.forOrganization(id, at),
    };
    // Pending before the database, for the same reason as the credit seed.
    const pendingScope = cap.scope === 'account' ? `org:${cap.id}` : `${cap.scope}:${cap.id}`;
    const pending = this.deps.writer.pendingMicros(pendingScope);
    const windows = await read[cap.scope](cap.id, now);
    return windows[PERIOD_WINDOW[cap.cap.period]] + pending;
  }

  private admission(state: {
    request: AdmissionRequest;
    sheet: PriceSheet;
    takes: AllowanceTake[];
    taken: number[];
    tpm: RateEntry[];
    tokenEstimate: number;
    leaseKeys: string[];
    leaseId: string;
    caps: CapEntry[];
    headers: Record<string, string>;
    logBodies: boolean;
  }): Admission {
    const { logger } = this.deps;
    const held = state.leaseKeys.length > 0 ? { keys: state.leaseKeys, leaseId: state.leaseId } : null;
    if (held) this.live.add(held);
    let finished = false;
    const createdAt = this.deps.clock();
    return {
      headers: state.headers,
      logBodies: state.logBodies,
      finish: (outcome: CallOutcome) => {
        if (finished) return;
        finished = true;
        if (held) this.live.delete(held);
        this.settle(state, outcome, createdAt).catch((error: unknown) => logger.error({ err: error, requestId: state.request.requestId }, 'settling a call failed'));
      },
    };
  }

  private async settle(
    state: Parameters<GovernedAdmission['admission']>[0],
    outcome: CallOutcome,
    createdAt: Date,
  ): Promise<void> {
    const { coordination, settings } = this.deps;
    const { request, sheet } = state;
    const cost = outcome.usage ? costMicros(outcome.usage, sheet) : 0n;
    this.deps.onCharged?.(request.model, cost);
    const work: Array<Promise<unknown>> = [];
    if (state.leaseKeys.length > 0) work.push(coordination.leases.release(state.leaseKeys, state.leaseId));
    // Give back what was reserved beyond the real cost (or take the rest if it cost more).
    work.push(coordination.allowances.give(state.takes.map((take, i) => ({ key: take.key, amount: state.taken[i]! - Number(cost) })), settings.counterTtlMs));
    if (state.tpm.length > 0) {
      const used = outcome.usage ? outcome.usage.inputTokens + outcome.usage.outputTokens : 0;
      work.push(coordination.rateLimiter.adjust(state.tpm.map((e) => ({ ...e, cost: used - state.tokenEstimate }))));
    }
    const credential = request.credential;
    this.deps.writer.enqueue({
      id: request.requestId,
      organizationId: credential.organizationId,
      projectId: credential.kind === 'key' ? credential.projectId : null,
      keyId: credential.kind === 'key' ? credential.keyId : null,
      endpoint: request.endpoint,
      model: request.model,
      provider: outcome.provider,
      upstreamModel: outcome.upstreamModel,
      statusCode: outcome.status,
      errorCode: outcome.errorCode,
      inputTokens: outcome.usage?.inputTokens ?? 0,
      cachedInputTokens: outcome.usage?.cachedInputTokens ?? 0,
      cacheWriteTokens: outcome.usage?.cacheWriteTokens ?? 0,
      outputTokens: outcome.usage?.outputTokens ?? 0,
      reasoningTokens: outcome.usage?.reasoningTokens ?? 0,
      usageEstimated: outcome.usage?.estimated ?? false,
      costMicros: cost,
      priceVersion: sheet.version,
      latencyMs: outcome.latencyMs,
      ttftMs: outcome.ttftMs,
      streamed: request.stream,
      attempts: outcome.attempts,
      createdAt,
      bodies: state.logBodies && outcome.bodies ? outcome.bodies : null,
    });
    await Promise.all(work);
    const alerting = state.caps.filter((c) => c.cap.mode === 'alert');
    if (cost > 0n && alerting.length > 0) {
      for (const cap of alerting) {
        const spent = await this.spentInPeriod(cap);
        if (spent >= cap.cap.limitMicros) {
          await this.deps.alerts.record({ scope: cap.scope, scopeId: cap.id, organizationId: credential.organizationId, cap: cap.cap, spentMicros: spent, now: this.deps.clock() });
        }
      }
    }
  }
}

function maxRetry(decisions: RateDecision[]): number {
  return decisions.reduce((max, d) => Math.max(max, d.retryAfterMs), 0);
}

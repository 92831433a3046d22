import { type AdmissionGate, type GateRecovery, type GateRequest, type GateResult, type GateSettlement, NOTHING_OUTSTANDING } from '../../core/ports/coordination.ts';
import type { MemoryAllowances } from './memory-allowances.ts';
import type { MemoryLeaseStore } from './memory-leases.ts';
import type { MemoryRateLimiter } from './memory-rate-limiter.ts';
import { wholeTtlMs } from './ttl.ts';

/**
 * The admission gate of one process: every check is worked out first and everything is written
 * only when all of them pass, in one synchronous pass, so nothing else runs in between.
 */
export class MemoryAdmissionGate implements AdmissionGate {
  /**
   * This process is the only replica and its state vanishes only by idling out: a new store is
   * always new, nobody else holds anything, and no rate bucket ever needs re-seeding.
   */
  readonly recovery: GateRecovery = {
    setHoldingsSource: () => undefined,
    refresh: () => undefined,
    othersOutstanding: async () => NOTHING_OUTSTANDING,
    seedWindow: async () => undefined,
    counts: () => ({ recoveries: 0, admissionsHeld: 0 }),
  };

  constructor(
    private readonly rates: MemoryRateLimiter,
    private readonly leases: MemoryLeaseStore,
    private readonly allowances: MemoryAllowances,
    private readonly now: () => number,
  ) {}

  async admit(request: GateRequest): Promise<GateResult> {
    const leaseTtl = wholeTtlMs(request.leaseTtlMs, 'gate lease');
    const counterTtl = wholeTtlMs(request.counterTtlMs, 'gate counter');
    const now = this.now();
    const requests = this.rates.check(request.requests, now);
    const tokens = this.rates.check(request.tokens, now);
    const refuse = () => ({
      requests: this.rates.decisions(request.requests, requests, false, now),
      tokens: this.rates.decisions(request.tokens, tokens, false, now),
    });
    if (!requests.allowed) return { ...refuse(), ok: false, refused: 'requests' };
    const fullKey = this.leases.firstFull(request.leases, request.leaseId, now);
    if (fullKey !== null) return { ...refuse(), ok: false, refused: 'concurrency', fullKey };
    if (!tokens.allowed) return { ...refuse(), ok: false, refused: 'tokens' };
    const money = this.allowances.check(request.takes, now);
    if (!money.result.ok) return { ...refuse(), ok: false, refused: 'money', allowance: money.result };

    this.rates.commit(requests, now);
    this.rates.commit(tokens, now);
    this.leases.grant(request.leases, request.leaseId, now + leaseTtl);
    this.allowances.commit(money.pending, now + counterTtl);
    return {
      ok: true,
      taken: money.result.taken,
      requests: this.rates.decisions(request.requests, requests, true, now),
      tokens: this.rates.decisions(request.tokens, tokens, true, now),
    };
  }

  async settle(settlement: GateSettlement): Promise<void> {
    const now = this.now();
    this.leases.releaseNow(settlement.leaseKeys, settlement.leaseId);
    this.allowances.giveNow(settlement.gives, wholeTtlMs(settlement.counterTtlMs, 'gate counter'), now);
    this.rates.adjustNow(settlement.tokens, now);
  }
}

import type { DomainEvents } from '../../core/events/domain-events.ts';
import type { Credential } from '../../core/identity/credential.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { addressBucket } from '../../core/net/address-bucket.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import { throttleAttempts } from '../../core/services/attempt-throttle.ts';
import type { RateEntry, RateLimiter } from '../../core/ports/coordination.ts';
import type { Database } from '../../core/ports/database.ts';
import type { CreditLedger, LedgerLine } from '../../core/ports/metering.ts';
import type { CreditGrants, InTransaction } from './credit-grants.ts';
import { type ClaimRefusal, type PromotionCode, SqlPromotionCodes } from './promotion-codes.ts';
// Declares credit.granted (core/events/event-catalogue.ts) and catalogues the codes thrown here.
import './credit-events.ts';
import './metering-errors.ts';

/** How many codes may be tried, per organisation and per client address, in each window. */
export interface RedemptionThrottle {
  attemptsPerOrganization: number;
  attemptsPerAddress: number;
  windowMs: number;
}

export interface RedemptionDeps {
  db: Database;
  ledger: CreditLedger;
  grants: CreditGrants;
  /** Emits credit.granted in the transaction of the ledger line. */
  events: DomainEvents;
  /** The coordination store's limiter, shared by every replica (as sign-in's throttling is). */
  rateLimiter: RateLimiter;
  clock: () => Date;
  throttle: RedemptionThrottle;
}

export interface Redeemed {
  code: PromotionCode;
  line: LedgerLine;
}

const REFUSALS: Record<ClaimRefusal, () => ApiError> = {
  already_redeemed: () => new ApiError('promotion_code_already_redeemed', undefined, { param: 'code' }),
  used_up: () => new ApiError('promotion_code_used_up', undefined, { param: 'code' }),
  expired: () => new ApiError('promotion_code_expired', undefined, { param: 'code' }),
  // A withdrawn code reads as one that never was: withdrawing a leaked code tells its finders nothing.
  revoked: () => new ApiError('promotion_code_not_found', undefined, { param: 'code' }),
};

/**
 * Redeeming a promotion code: every attempt, right or wrong, first takes one unit per organisation
 * and per client address from the rate limiter, so codes cannot be guessed at any useful pace.
 * Then the code is looked up and the credit granted (credit-grants.ts) with its redemption claimed
 * in the same transaction, which decides every race (promotion-codes.ts, claim).
 */
export class PromotionRedemptions {
  constructor(private readonly deps: RedemptionDeps) {}

  async redeem(input: { typed: string; credential: Credential; clientAddress: string | undefined; transaction: InTransaction }): Promise<Redeemed> {
    const { organizationId } = input.credential;
    await this.throttle(organizationId, input.clientAddress);
    const found = await new SqlPromotionCodes(this.deps.db).find(input.typed, organizationId);
    if (!found || found.code.revokedAt) throw REFUSALS.revoked();
    const { code } = found;
    const now = this.deps.clock();
    // Answered before any credit moves; the transaction below checks each again, for the races.
    if (code.expiresAt <= now) throw REFUSALS.expired();
    if (found.redeemed) throw REFUSALS.already_redeemed();
    if (code.maxRedemptions !== null && code.redemptions >= code.maxRedemptions) throw REFUSALS.used_up();
    const line = await this.deps.grants.grant(
      {
        organizationId,
        amountMicros: code.amountMicros,
        record: async (tx) => {
          const codes = new SqlPromotionCodes(tx);
          const refusal = await codes.claim(code.id, organizationId, now);
          if (refusal) throw REFUSALS[refusal]();
          // The reference is a second guard: the ledger takes one promotion line per code and organisation.
          const credit = { kind: 'promotion' as const, amountMicros: code.amountMicros, note: code.label, reference: `promotion:${code.id}` };
          const written = await this.deps.ledger.append(organizationId, credit, tx);
          if (!written) throw REFUSALS.already_redeemed();
          await codes.recordLine(code.id, organizationId, written.id);
          const data = {
            ledgerLineId: written.id,
            kind: 'promotion' as const,
            amountMicros: String(written.amountMicros),
            balanceAfterMicros: String(written.balanceAfterMicros),
            note: code.label,
            promotionCodeId: code.id,
          };
          await this.deps.events.emit(tx, { type: 'credit.granted', organizationId, subject: written.id, actor: actorOf(input.credential), data });
          return written;
        },
      },
      input.transaction,
    );
    // grant returns null only when record does, and record never does.
    return { code, line: line! };
  }

  private async throttle(organizationId: string, clientAddress: string | undefined): Promise<void> {
    const { attemptsPerOrganization, attemptsPerAddress, windowMs } = this.deps.throttle;
    const entries: RateEntry[] = [{ key: `redeem:org:${organizationId}`, limit: attemptsPerOrganization, periodMs: windowMs, cost: 1 }];
    if (clientAddress) entries.push({ key: `redeem:ip:${addressBucket(clientAddress)}`, limit: attemptsPerAddress, periodMs: windowMs, cost: 1 });
    await throttleAttempts(this.deps.rateLimiter, entries, 'too_many_redemption_attempts');
  }
}

import type { Coordination } from '../../core/ports/coordination.ts';
import type { Transaction } from '../../core/ports/database.ts';
import type { LedgerLine } from '../../core/ports/metering.ts';

/** The live counter admission reserves calls' money against: the credit balance, shared by every replica. */
export function creditCounterKey(organizationId: string): string {
  return `credit:${organizationId}`;
}

export interface CreditGrant {
  organizationId: string;
  /** What the ledger line will add; more than zero. */
  amountMicros: bigint;
  /**
   * Writes the credit's ledger line in `tx`, with whatever must commit with it (its event, a code's
   * redemption); null when nothing was recorded (a payment reference seen before). Throwing rolls
   * everything back and the grant with it.
   */
  record(tx: Transaction): Promise<LedgerLine | null>;
}

/** The operation's transaction (OperationContext.transaction), in which the grant is recorded. */
export type InTransaction = <T>(fn: (tx: Transaction) => Promise<T>) => Promise<T>;

/**
 * The one way credit is added to an organisation (a top-up's payment, a redeemed promotion code):
 * the ledger line and the admission counter move together. The counter is credited before the
 * ledger and the credit taken back if the line is not recorded (an error, or a repeat): a counter
 * re-seeded from the ledger in between then sees the credit once, never twice, and calls admitted
 * meanwhile at worst spend credit that the ledger is about to hold. A counter that does not exist
 * (idle, or never seeded) is left alone: its next seed reads the ledger, line included.
 */
export class CreditGrants {
  constructor(private readonly deps: { coordination: Coordination; counterTtlMs: number }) {}

  async grant(grant: CreditGrant, transaction: InTransaction): Promise<LedgerLine | null> {
    if (grant.amountMicros <= 0n) throw new Error(`a credit grant adds credit; got ${grant.amountMicros} µ$`);
    const counter = (amount: bigint) => this.deps.coordination.allowances.give([{ key: creditCounterKey(grant.organizationId), amount: Number(amount) }], this.deps.counterTtlMs);
    await counter(grant.amountMicros);
    let line: LedgerLine | null;
    try {
      line = await transaction((tx) => grant.record(tx));
    } catch (error) {
      await counter(-grant.amountMicros);
      throw error;
    }
    // What the ledger holds is what counts: nothing when the line was a repeat, its own amount otherwise.
    const recorded = line?.amountMicros ?? 0n;
    if (recorded !== grant.amountMicros) await counter(recorded - grant.amountMicros);
    return line;
  }
}

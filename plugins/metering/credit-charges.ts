import type { DomainEvents } from '../../core/events/domain-events.ts';
import type { Coordination } from '../../core/ports/coordination.ts';
import type { Database } from '../../core/ports/database.ts';
import type { CreditCharges, CreditLedger, LedgerLine, NewLedgerLine } from '../../core/ports/metering.ts';
import { emitCreditCrossings } from './credit-events.ts';
import { appendLine } from './credit-ledger-store.ts';
import { creditCounterKey } from './credit-grants.ts';

/**
 * Charges that are no gateway call (a day of app hosting, plugins/apps/hosting-billing.ts): the
 * ledger lines first, in one transaction with the caller's own writes and the credit crossings'
 * events, then the admission's live counter by what was recorded. In that order a counter re-seeded
 * in between reads the charge from the ledger and is then lowered again: it errs low (calls refused
 * a little early until it idles out), never high (money spent twice). A counter that does not exist
 * is left alone: its next seed reads the ledger, these lines included (CreditGrants is the mirror).
 */
export class LedgerCharges implements CreditCharges {
  constructor(
    private readonly deps: {
      db: Database;
      ledger: CreditLedger;
      events: DomainEvents;
      coordination: Coordination;
      counterTtlMs: number;
      /** The opening credit: an account first charged here still gets it (as its first read would). */
      initialCreditMicros: bigint;
    },
  ) {}

  async charge(organizationId: string, lines: readonly NewLedgerLine[], alsoInTransaction?: Parameters<CreditCharges['charge']>[2]): Promise<Array<LedgerLine | null>> {
    for (const line of lines) {
      if (line.amountMicros > 0n) throw new Error(`a charge takes credit; got ${line.amountMicros} µ$ (${line.kind})`);
    }
    await this.deps.ledger.ensureAccount(organizationId, this.deps.initialCreditMicros);
    const recorded = await this.deps.db.transaction(async (tx) => {
      const written: Array<LedgerLine | null> = [];
      for (const line of lines) {
        const appended = await appendLine(tx, organizationId, line);
        if (appended) await emitCreditCrossings(this.deps.events, tx, appended);
        written.push(appended);
      }
      await alsoInTransaction?.(tx);
      return written;
    });
    const taken = recorded.reduce((sum, line) => sum + (line?.amountMicros ?? 0n), 0n);
    if (taken !== 0n) {
      const key = creditCounterKey(organizationId);
      await this.deps.coordination.allowances.give([{ key, amount: Number(taken) }], this.deps.counterTtlMs);
    }
    return recorded;
  }

  async balance(organizationId: string): Promise<bigint | null> {
    return this.deps.ledger.balance(organizationId);
  }
}

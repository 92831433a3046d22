import { defineExtensionPoint } from '../../core/kernel/extension-points.ts';
import type { Queryable } from '../../core/ports/database.ts';
import type { CreditLedger, LedgerLine } from '../../core/ports/metering.ts';

/**
 * Where payments come from. Without a provider the metering plugin records what an operator says
 * was paid (manualPayments: bank transfer, invoice); a card processor's plugin provides its own,
 * confirming the charge before recording it.
 */
export interface PaymentProvider {
  /**
   * Records a settled payment as a ledger line in `tx` (the transaction that also records its
   * `payment.recorded` event); null when the reference was recorded before.
   */
  recordPayment(organizationId: string, payment: { amountMicros: bigint; reference: string | null; note: string | null }, tx: Queryable): Promise<LedgerLine | null>;
}

/** No default here: the fallback, manualPayments, writes to the metering plugin's ledger. */
export const PaymentProviderPoint = defineExtensionPoint<PaymentProvider>('PaymentProvider');

export function manualPayments(ledger: CreditLedger): PaymentProvider {
  return {
    recordPayment: (organizationId, payment, tx) =>
      ledger.append(organizationId, { kind: 'payment', amountMicros: payment.amountMicros, reference: payment.reference, note: payment.note ?? 'Manual payment' }, tx),
  };
}

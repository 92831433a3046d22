import { createToken } from '../../core/container.ts';
import type { CreditLedger, LedgerLine } from '../../core/ports/metering.ts';

/**
 * Where payments come from. The default records what an operator says was paid (bank transfer,
 * invoice); a card processor's plugin binds its own, confirming the charge before recording it.
 */
export interface PaymentProvider {
  /** Records a settled payment as a ledger line; null when the reference was recorded before. */
  recordPayment(organizationId: string, payment: { amountMicros: bigint; reference: string | null; note: string | null }): Promise<LedgerLine | null>;
}

export const PaymentProviderToken = createToken<PaymentProvider>('PaymentProvider');

export function manualPayments(ledger: CreditLedger): PaymentProvider {
  return {
    recordPayment: (organizationId, payment) =>
      ledger.append(organizationId, { kind: 'payment', amountMicros: payment.amountMicros, reference: payment.reference, note: payment.note ?? 'Manual payment' }),
  };
}

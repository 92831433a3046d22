import { z } from 'zod';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import { defineEventTypes, type PayloadsOf } from '../../core/events/event-catalogue.ts';
import type { Transaction } from '../../core/ports/database.ts';
import type { LedgerLine } from '../../core/ports/metering.ts';

/**
 * The balance under which credit is "low": $5. Enough warning for a small account to top up before
 * calls are refused (admission refuses a call its estimate cannot be paid for), small enough not
 * to alarm an account that keeps a few dollars on purpose.
 */
export const CREDIT_LOW_MICROS = 5_000_000n;

const micros = z
  .string()
  .regex(/^-?\d+$/)
  .describe('Integer micro-USD, as a string (events are JSON)');

export const CREDIT_EVENTS = defineEventTypes('metering', {
  'payment.recorded': {
    schema: z.object({
      ledgerLineId: z.string().describe('The payment line of the credit ledger'),
      amountMicros: micros,
      balanceAfterMicros: micros,
      reference: z.string().nullable().describe('The payment reference; a repeated reference records nothing and sends nothing'),
      note: z.string().nullable(),
    }),
    description: 'A payment was recorded and added to the credit balance',
    public: true,
    example: { ledgerLineId: '1042', amountMicros: '100000000', balanceAfterMicros: '112500000', reference: 'INV-2026-0042', note: 'Bank transfer' },
  },
  'credit.granted': {
    schema: z.object({
      ledgerLineId: z.string().describe('The credit line of the ledger'),
      kind: z.enum(['promotion']).describe('What granted it: a redeemed promotion code'),
      amountMicros: micros,
      balanceAfterMicros: micros,
      note: z.string().describe("The line's note: the promotion's label, never the code"),
      promotionCodeId: z.string().describe('The promotion code redeemed'),
    }),
    description: 'Credit was added that is not a payment (a promotion code redeemed): an adjustment in the credit summary',
    public: true,
    example: {
      ledgerLineId: '1187',
      kind: 'promotion',
      amountMicros: '25000000',
      balanceAfterMicros: '37500000',
      note: 'Launch week',
      promotionCodeId: '3c0e7b52-9d4f-4a8e-b1c2-6f5a4e3d2c1b',
    },
  },
  'credit.low': {
    schema: z.object({
      balanceMicros: micros.describe('The balance after the charge that took it under the threshold'),
      thresholdMicros: micros.describe('The low-credit threshold: $5'),
      ledgerLineId: z.string().describe('The charge that crossed it'),
    }),
    description: 'The credit balance fell under $5 (still above zero). Once per crossing: a top-up above $5 arms it again',
    public: true,
    example: { balanceMicros: '4210000', thresholdMicros: '5000000', ledgerLineId: '2291' },
  },
  'credit.exhausted': {
    schema: z.object({
      balanceMicros: micros.describe('The balance after the charge: zero or less'),
      ledgerLineId: z.string().describe('The charge that used it up'),
    }),
    description: 'The credit balance reached zero or less: paid calls are refused until a top-up. Once per crossing',
    public: true,
    example: { balanceMicros: '-120', ledgerLineId: '2377' },
  },
});

/**
 * Emits credit.low or credit.exhausted when a charge, just written as `line` in `tx`, took the
 * balance across a threshold (from above to below; a charge that stays under it says nothing
 * again). One that crosses both says only that credit is exhausted, which implies low.
 */
export async function emitCreditCrossings(events: DomainEvents, tx: Transaction, line: LedgerLine): Promise<void> {
  const after = line.balanceAfterMicros;
  const before = after - line.amountMicros;
  const common = { organizationId: line.organizationId, subject: line.id, actor: null };
  if (before > 0n && after <= 0n) {
    await events.emit(tx, { ...common, type: 'credit.exhausted', data: { balanceMicros: String(after), ledgerLineId: line.id } });
  } else if (before >= CREDIT_LOW_MICROS && after < CREDIT_LOW_MICROS && after > 0n) {
    const data = { balanceMicros: String(after), thresholdMicros: String(CREDIT_LOW_MICROS), ledgerLineId: line.id };
    await events.emit(tx, { ...common, type: 'credit.low', data });
  }
}

declare module '../../core/events/domain-events.ts' {
  interface EventCatalogue extends PayloadsOf<typeof CREDIT_EVENTS> {}
}

import { z } from 'zod';
import type { Coordination } from '../../core/ports/coordination.ts';
import { microsToUsd, usdAmount, usdToMicros } from '../../core/vocabulary/money.ts';
import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import { sequenceId } from '../../core/vocabulary/ids.ts';
import { listOf, listResponse, pageQuery } from '../../core/vocabulary/pagination.ts';
import { dateOrTimestampSchema, dayView, instantView } from '../../core/vocabulary/timestamps.ts';
import type { CreditLedger, LedgerKind, LedgerLine } from '../../core/ports/metering.ts';
import type { PaymentProvider } from './payment-provider.ts';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
// Declares payment.recorded (core/events/event-catalogue.ts).
import './credit-events.ts';

interface Deps {
  ledger: CreditLedger;
  /** Emits `payment.recorded` in the transaction of the ledger line. */
  events: DomainEvents;
  payments: PaymentProvider;
  coordination: Coordination;
  counterTtlMs: number;
  initialCreditMicros: bigint;
}

/** The wire views: named schemas of the OpenAPI document (`.meta({ id })`), declared once. */
const lineView = z
  .object({
    id: z.string(),
    kind: z.enum(['payment', 'adjustment', 'ai_usage', 'hosting', 'hosting_base_fee']),
    amountUsd: z.number().describe('Signed: credits positive, charges negative'),
    balanceAfterUsd: z.number(),
    note: z.string().nullable(),
    reference: z.string().nullable(),
    coversUtcDay: dayView.nullable().describe('The UTC day a daily charge covers'),
    coversEntries: z.number().nullable(),
    createdAt: instantView,
  })
  .meta({ id: 'LedgerEntry', description: 'One line of the credit ledger' });

const lineListView = listOf(lineView);

const balanceView = z
  .object({ object: z.literal('credits'), balanceUsd: z.number(), balanceMicros: z.string(), recent: z.array(lineView) })
  .meta({ id: 'CreditBalance', description: 'The credit balance (balanceMicros: exact integer micro-USD, as text) and the latest ledger lines' });

const summaryView = z
  .object({
    object: z.literal('credit_summary'),
    openingBalanceUsd: z.number(),
    paymentsUsd: z.number(),
    adjustmentsUsd: z.number(),
    hostingUsd: z.number(),
    aiUsd: z.number(),
    closingBalanceUsd: z.number(),
    micros: z.object({ opening: z.string(), payments: z.string(), adjustments: z.string(), hosting: z.string(), ai: z.string(), closing: z.string() }),
  })
  .meta({ id: 'CreditSummary', description: 'Opening + payments + adjustments − hosting − AI = closing; micros: the exact integers, as text' });

const paymentView = z
  .object({ object: z.literal('credit_payment'), duplicate: z.boolean(), line: lineView.nullable(), balanceUsd: z.number() })
  .meta({ id: 'CreditPayment', description: 'A payment recorded (or recognised as a repeat of its reference) and the balance after it' });

const toLineView = (line: LedgerLine): z.infer<typeof lineView> => ({
  id: line.id,
  kind: line.kind,
  amountUsd: microsToUsd(line.amountMicros),
  balanceAfterUsd: microsToUsd(line.balanceAfterMicros),
  note: line.note,
  reference: line.reference,
  coversUtcDay: line.coversUtcDay,
  coversEntries: line.coversEntries,
  createdAt: line.createdAt.toISOString(),
});

const FROM = 'Start, inclusive: YYYY-MM-DD (midnight UTC) or an ISO timestamp';
const TO = 'End, exclusive: YYYY-MM-DD (midnight UTC) or an ISO timestamp';

/** The spec's limits of GET /credits/statement. */
export const STATEMENT_PAGE_DEFAULT = 100;
export const STATEMENT_PAGE_MAX = 500;

const LENS_KINDS: Record<string, LedgerKind[]> = {
  payments: ['payment'],
  usage: ['ai_usage'],
  hosting: ['hosting', 'hosting_base_fee'],
};

export function creditOperations(deps: Deps): AnyOperation[] {
  const { ledger } = deps;
  const ensure = (organizationId: string) => ledger.ensureAccount(organizationId, deps.initialCreditMicros);

  const get = defineOperation({
    name: 'credits.get',
    method: 'GET',
    path: '/credits',
    summary: 'Credit balance and recent movements',
    description: 'Scope usage:read.',
    scope: 'usage:read',
    readOnly: true,
    output: balanceView,
    async handler(_input, { credential }) {
      await ensure(credential.organizationId);
      const balance = (await ledger.balance(credential.organizationId)) ?? 0n;
      const recent = await ledger.lines(credential.organizationId, { limit: 10 });
      return { object: 'credits' as const, balanceUsd: microsToUsd(balance), balanceMicros: balance.toString(), recent: recent.map(toLineView) };
    },
  });

  const statement = defineOperation({
    name: 'credits.statement',
    method: 'GET',
    path: '/credits/statement',
    summary: 'Ledger lines, newest first',
    description: 'Scope usage:read. lens narrows to payments, usage (AI) or hosting lines; `to` is exclusive. Pass nextCursor back as cursor, with the same filters, for the next page.',
    scope: 'usage:read',
    readOnly: true,
    query: pageQuery({ defaultLimit: STATEMENT_PAGE_DEFAULT, maxLimit: STATEMENT_PAGE_MAX, id: sequenceId }).extend({
      lens: z.enum(['payments', 'usage', 'hosting']).optional().describe('Only payment, AI usage or hosting lines'),
      from: dateOrTimestampSchema.optional().describe(FROM),
      to: dateOrTimestampSchema.optional().describe(TO),
    }),
    output: lineListView,
    async handler({ query }, { credential }) {
      await ensure(credential.organizationId);
      const page = await ledger.page(credential.organizationId, { kinds: query.lens ? LENS_KINDS[query.lens] : undefined, from: query.from, to: query.to }, query);
      return listResponse(page, toLineView);
    },
  });

  const summary = defineOperation({
    name: 'credits.summary',
    method: 'GET',
    path: '/credits/summary',
    summary: 'Ledger summary: opening + payments + adjustments − hosting − AI = closing, exactly',
    description: 'Scope usage:read. Without `from` the opening balance is zero; `to` is exclusive. The micros fields carry the exact integers.',
    scope: 'usage:read',
    readOnly: true,
    query: z.object({ from: dateOrTimestampSchema.optional().describe(FROM), to: dateOrTimestampSchema.optional().describe(TO) }),
    output: summaryView,
    async handler({ query }, { credential }) {
      await ensure(credential.organizationId);
      const s = await ledger.summary(credential.organizationId, { from: query.from, to: query.to });
      return {
        object: 'credit_summary' as const,
        openingBalanceUsd: microsToUsd(s.openingMicros),
        paymentsUsd: microsToUsd(s.paymentsMicros),
        adjustmentsUsd: microsToUsd(s.adjustmentsMicros),
        hostingUsd: microsToUsd(s.hostingMicros),
        aiUsd: microsToUsd(s.aiMicros),
        closingBalanceUsd: microsToUsd(s.closingMicros),
        micros: {
          opening: s.openingMicros.toString(),
          payments: s.paymentsMicros.toString(),
          adjustments: s.adjustmentsMicros.toString(),
          hosting: s.hostingMicros.toString(),
          ai: s.aiMicros.toString(),
          closing: s.closingMicros.toString(),
        },
      };
    },
  });

  const topup = defineOperation({
    name: 'credits.topup',
    method: 'POST',
    path: '/credits/topup',
    summary: 'Record a payment that adds credit (owner only)',
    description: 'Goes through the payment provider (by default a manual, operator-recorded payment). A repeated reference is not charged twice.',
    readOnly: false,
    scope: null,
    ownerOnly: true,
    body: z.strictObject({
      amountUsd: usdAmount.refine((v) => v > 0, 'must be more than zero'),
      reference: z.string().trim().min(1).max(200).optional().describe('Idempotency: the payment reference'),
      note: z.string().trim().max(500).optional(),
    }),
    output: paymentView,
    status: 201,
    async handler({ body }, { credential, transaction }) {
      await ensure(credential.organizationId);
      // The admission counter is credited before the ledger, and the credit taken back if the payment
      // is not recorded: a counter re-seeded from the ledger in between then sees the payment once.
      const amountMicros = usdToMicros(body.amountUsd);
      const counter = (amount: bigint) => deps.coordination.allowances.give([{ key: `credit:${credential.organizationId}`, amount: Number(amount) }], deps.counterTtlMs);
      await counter(amountMicros);
      let line: LedgerLine | null;
      try {
        line = await transaction(async (tx) => {
          const payment = { amountMicros, reference: body.reference ?? null, note: body.note ?? null };
          const recorded = await deps.payments.recordPayment(credential.organizationId, payment, tx);
          if (recorded) {
            await deps.events.emit(tx, {
              type: 'payment.recorded',
              organizationId: credential.organizationId,
              subject: recorded.id,
              actor: actorOf(credential),
              data: {
                ledgerLineId: recorded.id,
                amountMicros: String(recorded.amountMicros),
                balanceAfterMicros: String(recorded.balanceAfterMicros),
                reference: recorded.reference,
                note: recorded.note,
              },
            });
          }
          return recorded;
        });
      } catch (error) {
        await counter(-amountMicros);
        throw error;
      }
      if (!line) await counter(-amountMicros);
      const balance = (await ledger.balance(credential.organizationId)) ?? 0n;
      return { object: 'credit_payment' as const, duplicate: line === null, line: line ? toLineView(line) : null, balanceUsd: microsToUsd(balance) };
    },
  });

  return [get, statement, summary, topup];
}

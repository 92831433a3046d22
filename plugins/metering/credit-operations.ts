import { z } from 'zod';
import { microsToUsd, usdAmount, usdToMicros } from '../../core/vocabulary/money.ts';
import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import { sequenceId } from '../../core/vocabulary/ids.ts';
import { listOf, listResponse, pageQuery } from '../../core/vocabulary/pagination.ts';
import { dateOrTimestampSchema, dayView, instantView } from '../../core/vocabulary/timestamps.ts';
import type { CreditLedger, LedgerKind, LedgerLine } from '../../core/ports/metering.ts';
import type { PaymentProvider } from './payment-provider.ts';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import type { Transaction } from '../../core/ports/database.ts';
import type { CreditGrants } from './credit-grants.ts';
import type { PromotionRedemptions } from './promotion-redemption.ts';
// Declares payment.recorded (core/events/event-catalogue.ts) and catalogues the codes thrown here.
import './credit-events.ts';
import './metering-errors.ts';

interface Deps {
  ledger: CreditLedger;
  /** Emits `payment.recorded` in the transaction of the ledger line. */
  events: DomainEvents;
  payments: PaymentProvider;
  /** The one way credit is added: the ledger line and the admission counter together. */
  grants: CreditGrants;
  redemptions: PromotionRedemptions;
  initialCreditMicros: bigint;
}

/** The wire views: named schemas of the OpenAPI document (`.meta({ id })`), declared once. */
const lineView = z
  .object({
    id: z.string(),
    kind: z.enum(['payment', 'adjustment', 'promotion', 'ai_usage', 'hosting', 'hosting_base_fee']).describe('promotion: a redeemed promotion code'),
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

const redemptionView = z
  .object({
    object: z.literal('credit_redemption'),
    label: z.string().describe('What the promotion is called; the ledger line carries it as its note'),
    amountUsd: z.number(),
    line: lineView,
    balanceUsd: z.number(),
  })
  .meta({ id: 'CreditRedemption', description: 'A promotion code redeemed: its credit line and the balance after it' });

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

const LENS_KINDS = {
  payments: ['payment'],
  usage: ['ai_usage'],
  hosting: ['hosting', 'hosting_base_fee'],
} as const satisfies Record<string, readonly LedgerKind[]>;

/** The paging and window of the statement, which the hosting lines share. */
const statementWindow = pageQuery({ defaultLimit: STATEMENT_PAGE_DEFAULT, maxLimit: STATEMENT_PAGE_MAX, id: sequenceId }).extend({
  from: dateOrTimestampSchema.optional().describe(FROM),
  to: dateOrTimestampSchema.optional().describe(TO),
});

export function creditOperations(deps: Deps): AnyOperation[] {
  const { ledger } = deps;
  const ensure = (organizationId: string) => ledger.ensureAccount(organizationId, deps.initialCreditMicros);
  /** Ledger lines newest first, a page at a time, narrowed to a lens's kinds (all without one). */
  const statementPage = async (organizationId: string, lens: keyof typeof LENS_KINDS | undefined, query: z.output<typeof statementWindow>) => {
    await ensure(organizationId);
    const page = await ledger.page(organizationId, { kinds: lens ? [...LENS_KINDS[lens]] : undefined, from: query.from, to: query.to }, query);
    return listResponse(page, toLineView);
  };

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
    query: statementWindow.extend({
      lens: z.enum(['payments', 'usage', 'hosting']).optional().describe('Only payment, AI usage or hosting lines'),
    }),
    output: lineListView,
    handler: ({ query }, { credential }) => statementPage(credential.organizationId, query.lens, query),
  });

  const hosting = defineOperation({
    name: 'credits.hosting',
    method: 'GET',
    path: '/credits/hosting',
    summary: 'Hosting charge lines, newest first',
    description: [
      'Scope usage:read. The statement with lens=hosting: the same lines, paging and window (limit default 100, max',
      '500; `to` exclusive; pass nextCursor back as cursor). A day of metered hosting is one line carrying coversUtcDay',
      'and coversEntries; the per-day base fee is a line of its own with a note. Empty until apps are hosted.',
    ].join(' '),
    scope: 'usage:read',
    readOnly: true,
    query: statementWindow,
    output: lineListView,
    handler: ({ query }, { credential }) => statementPage(credential.organizationId, 'hosting', query),
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
      const payment = { amountMicros: usdToMicros(body.amountUsd), reference: body.reference ?? null, note: body.note ?? null };
      const record = async (tx: Transaction) => {
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
      };
      const line = await deps.grants.grant({ organizationId: credential.organizationId, amountMicros: payment.amountMicros, record }, transaction);
      const balance = (await ledger.balance(credential.organizationId)) ?? 0n;
      return { object: 'credit_payment' as const, duplicate: line === null, line: line ? toLineView(line) : null, balanceUsd: microsToUsd(balance) };
    },
  });

  const redeem = defineOperation({
    name: 'credits.redeem',
    method: 'POST',
    path: '/credits/redeem',
    summary: 'Redeem a promotion code: its credit is added to the balance (owner only)',
    description: [
      'Codes are made by the operator (npm run cli -- credits codes create); each organisation redeems a code once,',
      'before it expires, and a code may limit its redemptions in total. Owner only, like a top-up: the credit is',
      'the organisation’s and a code is spent on the organisation the owner chooses. Case, spaces and dashes in the',
      'code do not matter. The ledger line is of kind promotion (an adjustment in the summary, not a payment) with',
      'the promotion’s label as its note, never the code. Tries are limited per organisation and per client address',
      '(429 too_many_redemption_attempts with retry-after), right or wrong. A withdrawn code answers as an unknown one',
      '(404). Sends credit.granted.',
    ].join(' '),
    readOnly: false,
    scope: null,
    ownerOnly: true,
    wide: true,
    body: z.strictObject({ code: z.string().trim().min(1).max(64).describe('The promotion code, e.g. 7KQ2-M9XD-4HTR-0BVA') }),
    errors: ['promotion_code_not_found', 'promotion_code_expired', 'promotion_code_already_redeemed', 'promotion_code_used_up', 'too_many_redemption_attempts'],
    output: redemptionView,
    status: 201,
    async handler({ body }, { credential, transaction, clientAddress }) {
      await ensure(credential.organizationId);
      const { code, line } = await deps.redemptions.redeem({ typed: body.code, credential, clientAddress, transaction });
      return {
        object: 'credit_redemption' as const,
        label: code.label,
        amountUsd: microsToUsd(code.amountMicros),
        line: toLineView(line),
        balanceUsd: microsToUsd(line.balanceAfterMicros),
      };
    },
  });

  return [get, statement, hosting, summary, topup, redeem];
}

import type { FastifyBaseLogger } from 'fastify';
import { defineSubscriber, type DomainEvents } from '../../core/events/domain-events.ts';
import { z } from 'zod';
import { defineEventTypes, type PayloadsOf } from '../../core/events/event-catalogue.ts';
import { defineExtensionPoint } from '../../core/kernel/extension-points.ts';
import { microsToUsd } from '../../core/vocabulary/money.ts';
import type { Database } from '../../core/ports/database.ts';
import type { SpendCap } from '../../core/ports/identity.ts';
import { periodStart } from '../../core/vocabulary/periods.ts';

export interface BudgetAlert {
  scope: 'key' | 'project' | 'account';
  scopeId: string;
  organizationId: string;
  /** The project of a key or project cap; null for an account cap. */
  projectId: string | null;
  cap: SpendCap;
  spentMicros: bigint;
  periodStart: Date;
}

const micros = z
  .string()
  .regex(/^-?\d+$/)
  .describe('Integer micro-USD, as a string (events are JSON)');

const budgetThresholdReached = z.object({
  scope: z.enum(['key', 'project', 'account']).describe('What the cap is set on'),
  scopeId: z.string().describe('The key, project or organisation id'),
  projectId: z.string().nullable().describe('The project of the key or project capped; null for an account cap'),
  capMicros: micros,
  period: z.enum(['day', 'week', 'month', 'total']),
  mode: z.enum(['alert', 'blocking']),
  spentMicros: micros,
  periodStart: z.string().describe('ISO 8601, UTC'),
});

/** Data of `budget.threshold_reached` and `budget.cap_reached`: a cap reached, once per cap value and period. */
export type BudgetThresholdReached = z.output<typeof budgetThresholdReached>;

const EXAMPLE_CAP = {
  scope: 'project' as const,
  scopeId: '0b5d7c7e-2f4e-4d0a-9a51-2f6f1c1f0a11',
  projectId: '0b5d7c7e-2f4e-4d0a-9a51-2f6f1c1f0a11',
  capMicros: '50000000',
  period: 'month' as const,
  spentMicros: '50012000',
  periodStart: '2026-11-01T00:00:00.000Z',
};

const BUDGET_EVENTS = defineEventTypes('metering', {
  'budget.threshold_reached': {
    schema: budgetThresholdReached,
    description: 'An alert-only spend cap was reached; calls continue. Once per cap value and period',
    public: true,
    example: { ...EXAMPLE_CAP, mode: 'alert' },
  },
  'budget.cap_reached': {
    schema: budgetThresholdReached,
    description:
      'A blocking spend cap refused a call: calls it covers are refused until the period ends or the cap is raised. ' +
      'Once per cap value and period; spentMicros counts what calls in flight had reserved too',
    public: true,
    example: { ...EXAMPLE_CAP, mode: 'blocking', spentMicros: '49990000' },
  },
});

declare module '../../core/events/domain-events.ts' {
  interface EventCatalogue extends PayloadsOf<typeof BUDGET_EVENTS> {}
}

/** Where alerts go once recorded: the metering plugin's log unless a plugin (webhooks) provides its own. */
export interface BudgetAlertSink {
  notify(alert: BudgetAlert): Promise<void>;
}

/** No default here: the fallback, loggingAlertSink, writes to the reading plugin's log. */
export const BudgetAlertSinkPoint = defineExtensionPoint<BudgetAlertSink>('BudgetAlertSink');

export function loggingAlertSink(logger: FastifyBaseLogger): BudgetAlertSink {
  return {
    async notify(alert) {
      logger.warn(
        { scope: alert.scope, scopeId: alert.scopeId, organizationId: alert.organizationId, capUsd: microsToUsd(alert.cap.limitMicros), spentUsd: microsToUsd(alert.spentMicros) },
        'spend cap reached (alert-only: requests continue)',
      );
    },
  };
}

/**
 * Records a cap being reached, once per scope, cap value and period across every replica (the
 * table's primary key decides), as an event in the same transaction: `budget.threshold_reached`
 * for an alert-only cap (spending went past it), `budget.cap_reached` for a blocking one (it
 * refused a call).
 */
export class BudgetAlerts {
  private readonly seen = new Set<string>();

  constructor(
    private readonly db: Database,
    private readonly events: DomainEvents,
  ) {}

  /** True once this replica knows the cap's alert for the current period exists: nothing left to check. */
  alreadyRecorded(scope: BudgetAlert['scope'], scopeId: string, cap: SpendCap, now: Date): boolean {
    return this.seen.has(memoOf(scope, scopeId, cap, periodStart(cap.period, now)));
  }

  async record(input: Omit<BudgetAlert, 'periodStart'> & { now: Date }): Promise<boolean> {
    const start = periodStart(input.cap.period, input.now);
    const memo = memoOf(input.scope, input.scopeId, input.cap, start);
    if (this.seen.has(memo)) return false;
    const recorded = await this.db.transaction(async (tx) => {
      const { rowCount } = await tx.query(
        `INSERT INTO budget_alerts (scope, scope_id, organization_id, period_start, cap_micros, spent_micros)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
        [input.scope, input.scopeId, input.organizationId, start, input.cap.limitMicros, input.spentMicros],
      );
      if (rowCount === 0) return false;
      await this.events.emit(tx, {
        type: input.cap.mode === 'alert' ? 'budget.threshold_reached' : 'budget.cap_reached',
        organizationId: input.organizationId,
        subject: input.scopeId,
        actor: null,
        data: {
          scope: input.scope,
          scopeId: input.scopeId,
          projectId: input.projectId,
          capMicros: String(input.cap.limitMicros),
          period: input.cap.period,
          mode: input.cap.mode,
          spentMicros: String(input.spentMicros),
          periodStart: start.toISOString(),
        },
      });
      return true;
    });
    this.seen.add(memo);
    return recorded;
  }
}

/** Hands each recorded alert to the sink (at least once: a sink that throws is retried). */
export function budgetAlertSubscriber(sink: BudgetAlertSink) {
  return defineSubscriber({
    name: 'budget-alert-sink',
    events: ['budget.threshold_reached'],
    async handle(event) {
      const { data } = event;
      await sink.notify({
        scope: data.scope,
        scopeId: data.scopeId,
        organizationId: event.organizationId!,
        projectId: data.projectId,
        cap: { limitMicros: BigInt(data.capMicros), period: data.period, mode: data.mode },
        spentMicros: BigInt(data.spentMicros),
        periodStart: new Date(data.periodStart),
      });
    },
  });
}

function memoOf(scope: BudgetAlert['scope'], scopeId: string, cap: SpendCap, start: Date): string {
  return `${scope}:${scopeId}:${start.getTime()}:${cap.limitMicros}`;
}

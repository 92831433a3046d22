import type { FastifyBaseLogger } from 'fastify';
import { defineSubscriber, type DomainEvents } from '../../core/events/domain-events.ts';
import { defineExtensionPoint } from '../../core/kernel/extension-points.ts';
import { microsToUsd } from '../../core/vocabulary/money.ts';
import type { Database } from '../../core/ports/database.ts';
import type { CapMode, SpendCap, SpendPeriod } from '../../core/ports/identity.ts';
import { periodStart } from '../../core/vocabulary/periods.ts';

export interface BudgetAlert {
  scope: 'key' | 'project' | 'account';
  scopeId: string;
  organizationId: string;
  cap: SpendCap;
  spentMicros: bigint;
  periodStart: Date;
}

/** Data of `budget.threshold_reached`: an alert-only cap reached, once per cap value and period. */
export interface BudgetThresholdReached {
  scope: BudgetAlert['scope'];
  scopeId: string;
  /** Integer micro-USD, as a string (events are JSON). */
  capMicros: string;
  period: SpendPeriod;
  mode: CapMode;
  spentMicros: string;
  /** ISO 8601, UTC. */
  periodStart: string;
}

declare module '../../core/events/domain-events.ts' {
  interface EventCatalogue {
    'budget.threshold_reached': BudgetThresholdReached;
  }
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
 * Records an alert-only cap being reached, once per scope and period across every replica (the
 * table's primary key decides), as a `budget.threshold_reached` event in the same transaction.
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
        type: 'budget.threshold_reached',
        organizationId: input.organizationId,
        subject: input.scopeId,
        actor: null,
        data: {
          scope: input.scope,
          scopeId: input.scopeId,
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

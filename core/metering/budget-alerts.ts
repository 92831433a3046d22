import type { FastifyBaseLogger } from 'fastify';
import { createToken } from '../container.ts';
import { microsToUsd } from '../money.ts';
import type { Queryable } from '../ports/database.ts';
import type { SpendCap } from '../ports/identity.ts';
import { periodStart } from '../time-windows.ts';

export interface BudgetAlert {
  scope: 'key' | 'project' | 'account';
  scopeId: string;
  organizationId: string;
  cap: SpendCap;
  spentMicros: bigint;
  periodStart: Date;
}

/** Where alerts go once recorded: the log by default; the webhooks plugin binds its own. */
export interface BudgetAlertSink {
  notify(alert: BudgetAlert): Promise<void>;
}

export const BudgetAlertSinkToken = createToken<BudgetAlertSink>('BudgetAlertSink');

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
 * table's primary key decides), and hands the first record to the sink.
 */
export class BudgetAlerts {
  private readonly seen = new Set<string>();

  constructor(
    private readonly db: Queryable,
    private readonly sink: () => BudgetAlertSink,
  ) {}

  /** True once this replica knows the cap's alert for the current period exists: nothing left to check. */
  alreadyRecorded(scope: BudgetAlert['scope'], scopeId: string, cap: SpendCap, now: Date): boolean {
    return this.seen.has(memoOf(scope, scopeId, cap, periodStart(cap.period, now)));
  }

  async record(input: Omit<BudgetAlert, 'periodStart'> & { now: Date }): Promise<boolean> {
    const start = periodStart(input.cap.period, input.now);
    const memo = memoOf(input.scope, input.scopeId, input.cap, start);
    if (this.seen.has(memo)) return false;
    const { rowCount } = await this.db.query(
      `INSERT INTO budget_alerts (scope, scope_id, organization_id, period_start, cap_micros, spent_micros)
       VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
      [input.scope, input.scopeId, input.organizationId, start, input.cap.limitMicros, input.spentMicros],
    );
    this.seen.add(memo);
    if (rowCount === 0) return false;
    const { now: _now, ...alert } = input;
    await this.sink().notify({ ...alert, periodStart: start });
    return true;
  }
}

function memoOf(scope: BudgetAlert['scope'], scopeId: string, cap: SpendCap, start: Date): string {
  return `${scope}:${scopeId}:${start.getTime()}:${cap.limitMicros}`;
}

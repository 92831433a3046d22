import type { OnboardingStep, OverviewFigure, OverviewFigureSource } from '../../core/kernel/account-contributions.ts';
import type { OrganizationEraser } from '../../core/kernel/organization-erasure.ts';
import type { Database } from '../../core/ports/database.ts';
import type { SpendReader, SpendWindows } from '../../core/ports/identity.ts';
import type { CreditLedger } from '../../core/ports/metering.ts';
import { microsToUsd } from '../../core/vocabulary/money.ts';
import { periodStart } from '../../core/vocabulary/periods.ts';
import { bigintOf, dateOrNull } from '../../adapters/sql/rows.ts';

const THIRTY_DAYS_MS = 30 * 86_400_000;

interface Deps {
  database: Database;
  ledger: CreditLedger;
  spend: SpendReader;
  /** The opening credit, which the balance starts from as GET /client/credits shows it. */
  initialCreditMicros: bigint;
}

/**
 * What metering tells the account overview (GET /client/overview): the balance from the ledger,
 * spend from the request log as the caps count it (SpendReader), and calls and errors today and
 * over the last 30 days. Calls a caller cannot see (other projects) are not counted; the balance is
 * the account's. An error rate of no calls is unknown, so it is left out.
 */
export function meteringFigures({ database, ledger, spend, initialCreditMicros }: Deps): OverviewFigureSource {
  return {
    source: 'metering',
    scope: 'usage:read',
    async figures({ organizationId, projectIds, now }) {
      await ledger.ensureAccount(organizationId, initialCreditMicros);
      const [balance, windows, calls] = await Promise.all([
        ledger.balance(organizationId),
        projectIds === null ? spend.forOrganization(organizationId, now) : sumWindows(await Promise.all(projectIds.map((id) => spend.forProject(id, now)))),
        callCounts(database, organizationId, projectIds, now),
      ]);
      const figures: OverviewFigure[] = [];
      if (balance !== null) figures.push({ id: 'balanceUsd', label: 'Credit balance', value: microsToUsd(balance), unit: 'usd', window: 'now' });
      figures.push(
        { id: 'spendTodayUsd', label: 'Spend today', value: microsToUsd(windows.todayMicros), unit: 'usd', window: 'today' },
        { id: 'spendMonthUsd', label: 'Spend this month', value: microsToUsd(windows.monthMicros), unit: 'usd', window: 'month' },
        { id: 'callsToday', label: 'Calls today', value: calls.today, unit: 'count', window: 'today' },
      );
      if (calls.today > 0) figures.push({ id: 'errorRateToday', label: 'Error rate today', value: calls.errorsToday / calls.today, unit: 'ratio', window: 'today' });
      figures.push({ id: 'calls30d', label: 'Calls, last 30 days', value: calls.last30Days, unit: 'count', window: 'last_30_days' });
      if (calls.last30Days > 0) {
        figures.push({ id: 'errorRate30d', label: 'Error rate, last 30 days', value: calls.errors30Days / calls.last30Days, unit: 'ratio', window: 'last_30_days' });
      }
      return figures;
    },
  };
}

/** The checklist steps the request log and the ledger decide. */
export function meteringSteps(database: Database): OnboardingStep[] {
  return [
    {
      id: 'first_call',
      title: 'Make your first call',
      description: 'Call the gateway with a key: POST /v1/chat/completions, with any OpenAI SDK pointed at {base_url}/v1.',
      order: 20,
      async doneAt(organizationId) {
        // Oldest first on the (organization_id, created_at) index: stops at the first success.
        const { rows } = await database.query('SELECT created_at FROM request_logs WHERE organization_id = $1 AND status_code BETWEEN 200 AND 299 ORDER BY created_at LIMIT 1', [
          organizationId,
        ]);
        return rows[0] ? dateOrNull(rows[0], 'created_at') : null;
      },
    },
    {
      id: 'add_credit',
      title: 'Add credit',
      description: 'Top up the credit balance that calls are billed against (a payment; the opening credit does not count).',
      order: 30,
      async doneAt(organizationId) {
        const { rows } = await database.query("SELECT min(created_at) AS first FROM credit_ledger WHERE organization_id = $1 AND kind = 'payment'", [organizationId]);
        return rows[0] ? dateOrNull(rows[0], 'first') : null;
      },
    },
  ];
}

/**
 * What an account deletion removes of metering's: the request log (with the stored bodies) and
 * budget alerts. The credit ledger and balance stay: payments and charges are accounting records.
 */
export function meteringErasers(): OrganizationEraser[] {
  return [
    {
      name: 'request logs',
      async erase(tx, organizationId) {
        const { rowCount } = await tx.query('DELETE FROM request_logs WHERE organization_id = $1', [organizationId]);
        return rowCount;
      },
    },
    {
      name: 'spend holds',
      async erase(tx, organizationId) {
        const { rowCount } = await tx.query('DELETE FROM spend_holds WHERE organization_id = $1', [organizationId]);
        return rowCount;
      },
    },
    {
      name: 'budget alerts',
      async erase(tx, organizationId) {
        const { rowCount } = await tx.query('DELETE FROM budget_alerts WHERE organization_id = $1', [organizationId]);
        return rowCount;
      },
    },
  ];
}

async function callCounts(database: Database, organizationId: string, projectIds: readonly string[] | null, now: Date) {
  const { rows } = await database.query(
    `SELECT count(*) FILTER (WHERE created_at >= $3)::bigint AS today,
            count(*) FILTER (WHERE created_at >= $3 AND status_code >= 400)::bigint AS errors_today,
            count(*)::bigint AS last_30_days,
            count(*) FILTER (WHERE status_code >= 400)::bigint AS errors_30_days
     FROM request_logs
     WHERE organization_id = $1 AND created_at >= $2 AND ($4::uuid[] IS NULL OR project_id = ANY($4::uuid[]))`,
    [organizationId, new Date(now.getTime() - THIRTY_DAYS_MS), periodStart('day', now), projectIds === null ? null : [...projectIds]],
  );
  const row = rows[0] ?? {};
  return {
    today: Number(bigintOf(row, 'today')),
    errorsToday: Number(bigintOf(row, 'errors_today')),
    last30Days: Number(bigintOf(row, 'last_30_days')),
    errors30Days: Number(bigintOf(row, 'errors_30_days')),
  };
}

function sumWindows(all: readonly SpendWindows[]): SpendWindows {
  return all.reduce(
    (sum, w) => ({
      totalMicros: sum.totalMicros + w.totalMicros,
      todayMicros: sum.todayMicros + w.todayMicros,
      weekMicros: sum.weekMicros + w.weekMicros,
      monthMicros: sum.monthMicros + w.monthMicros,
    }),
    { totalMicros: 0n, todayMicros: 0n, weekMicros: 0n, monthMicros: 0n },
  );
}

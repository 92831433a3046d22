import { defineSubscriber } from '../../core/events/domain-events.ts';
import type { MailMessage } from '../../core/ports/mail.ts';
import { mailActiveOwners, type OwnerMailDeps } from '../../core/services/owner-mail.ts';
import { microsToUsd } from '../../core/vocabulary/money.ts';
import type { BudgetThresholdReached } from './budget-alerts.ts';

const SCOPE_NAMES = { key: 'API key', project: 'project', account: 'account' } as const;
const PERIOD_NAMES = { day: 'day', week: 'week', month: 'month', total: 'all time' } as const;

/** The message an owner gets when an alert-only cap is reached. */
export function capAlertMessage(to: string, alert: BudgetThresholdReached): MailMessage {
  const cap = `$${microsToUsd(BigInt(alert.capMicros))} per ${PERIOD_NAMES[alert.period]}`;
  const what = `${SCOPE_NAMES[alert.scope]} ${alert.scopeId}`;
  return {
    to,
    subject: `Spend alert: the ${SCOPE_NAMES[alert.scope]} cap of ${cap} was reached`,
    text: [
      `The alert-only spend cap of ${cap} on ${what} was reached: $${microsToUsd(BigInt(alert.spentMicros))} spent since ${alert.periodStart}.`,
      '',
      'Calls continue: this cap only alerts. GET /client/budget shows every cap; an owner changes them with PATCH /client/budget or PATCH /client/keys/{id}.',
      '',
      'You receive this message because you are an owner of the organisation. It is sent once per cap and period.',
    ].join('\n'),
  };
}

/**
 * Mails every active owner of the organisation when an alert-only cap is reached. The event exists
 * once per cap and period (BudgetAlerts), and this subscriber runs once per event until it succeeds:
 * so once per cap and period, at least once to each owner (core/services/owner-mail.ts).
 */
export function budgetAlertMailSubscriber(deps: OwnerMailDeps) {
  return defineSubscriber({
    name: 'budget-alert-mail',
    events: ['budget.threshold_reached'],
    async handle(event) {
      if (event.organizationId === null) return;
      await mailActiveOwners(deps, event.organizationId, (to) => capAlertMessage(to, event.data), 'a spend alert');
    },
  });
}

import type { FastifyBaseLogger } from 'fastify';
import { defineSubscriber } from '../../core/events/domain-events.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import type { Mailer, MailMessage } from '../../core/ports/mail.ts';
import { MailDeliveryError } from '../../core/services/mail-messages.ts';
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
 * so once per cap and period, but for a retry after a mail server failed part-way, which may repeat
 * the message to the owners already mailed (at least once). An address the server refuses for good
 * is logged and skipped, so one bad address does not hold back the others.
 */
export function budgetAlertMailSubscriber(deps: { identity: IdentityStores; mailer: Mailer; logger: FastifyBaseLogger }) {
  return defineSubscriber({
    name: 'budget-alert-mail',
    events: ['budget.threshold_reached'],
    async handle(event) {
      if (event.organizationId === null) return;
      const memberships = await deps.identity.memberships.listForOrganization(event.organizationId);
      const owners = memberships.filter((membership) => membership.role === 'owner' && membership.status === 'active');
      for (const owner of owners) {
        const person = await deps.identity.people.get(owner.personId);
        if (!person) continue;
        try {
          await deps.mailer.send(capAlertMessage(person.email, event.data));
        } catch (error) {
          if (error instanceof MailDeliveryError && !error.retryable) {
            deps.logger.error({ err: error, personId: person.id }, 'a spend alert could not be mailed to an owner');
            continue;
          }
          throw error;
        }
      }
    },
  });
}

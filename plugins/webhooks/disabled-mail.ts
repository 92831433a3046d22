import { defineSubscriber } from '../../core/events/domain-events.ts';
import type { EventCatalogue } from '../../core/events/domain-events.ts';
import type { MailMessage } from '../../core/ports/mail.ts';
import { mailActiveOwners, type OwnerMailDeps } from '../../core/services/owner-mail.ts';
import './webhook-events.ts';

type Disabled = EventCatalogue['webhook.disabled'];

/**
 * The message an owner gets when an endpoint is switched off. It names the endpoint by id,
 * description and origin only: a URL's path and query may hold the receiver's own token.
 */
export function disabledEndpointMessage(to: string, disabled: Disabled): MailMessage {
  const described = disabled.description ? ` (${disabled.description})` : '';
  return {
    to,
    subject: `Webhook endpoint switched off: ${disabled.origin}`,
    text: [
      `The webhook endpoint ${disabled.webhookId}${described} at ${disabled.origin} was switched off because its deliveries kept failing.`,
      '',
      `${disabled.reason}.`,
      '',
      'Nothing is sent to it until it is switched on again: fix the receiver, then PATCH /client/webhooks/{id} with {"enabled": true}.',
      'GET /client/webhooks/{id}/deliveries shows every attempt and what the receiver answered; failed deliveries can be resent.',
      '',
      'You receive this message because you are an owner of the organisation.',
    ].join('\n'),
  };
}

/** Mails the organisation's active owners once per switched-off endpoint (at least once: core/services/owner-mail.ts). */
export function disabledMailSubscriber(deps: OwnerMailDeps) {
  return defineSubscriber({
    name: 'webhook-disabled-mail',
    events: ['webhook.disabled'],
    async handle(event) {
      if (event.organizationId === null) return;
      await mailActiveOwners(deps, event.organizationId, (to) => disabledEndpointMessage(to, event.data), 'a switched-off webhook endpoint');
    },
  });
}

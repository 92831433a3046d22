import { z } from 'zod';
import { defineSubscriber } from '../../core/events/domain-events.ts';
import { defineEventTypes, type PayloadsOf } from '../../core/events/event-catalogue.ts';
import type { MailMessage } from '../../core/ports/mail.ts';
import { mailActiveOwners, type OwnerMailDeps } from '../../core/services/owner-mail.ts';
import { microsToUsd } from '../../core/vocabulary/money.ts';

const micros = z
  .string()
  .regex(/^-?\d+$/)
  .describe('Integer micro-USD, as a string (events are JSON)');

export const HOSTING_EVENTS = defineEventTypes('apps', {
  'hosting.balance_exhausted': {
    schema: z.object({
      balanceMicros: micros.describe('The balance when it was seen at zero or less'),
      runningServices: z.number().int().describe('Services running when it was seen'),
      graceEndsAt: z.string().describe('ISO instant: the running services are stopped then unless the balance is above zero'),
    }),
    description: 'Apps run while the credit balance is zero or less: they are stopped at graceEndsAt unless credit is added. Once per crossing',
    public: true,
    example: { balanceMicros: '-35000', runningServices: 2, graceEndsAt: '2026-03-05T10:05:00.000Z' },
  },
  'hosting.services_stopped': {
    schema: z.object({
      balanceMicros: micros.describe('The balance when they were stopped'),
      serviceIds: z.array(z.string()).describe('The services stopped (paused: no charge); a top-up does not start them again'),
    }),
    description: 'The grace after a zero balance ended: the organisation’s running services were stopped',
    public: true,
    example: { balanceMicros: '-41000', serviceIds: ['9b3f6a52-1c4e-4d7a-8f0b-2e5d6c7a8b9c'] },
  },
});

declare module '../../core/events/domain-events.ts' {
  interface EventCatalogue extends PayloadsOf<typeof HOSTING_EVENTS> {}
}

type Exhausted = z.output<(typeof HOSTING_EVENTS)['hosting.balance_exhausted']['schema']>;
type Stopped = z.output<(typeof HOSTING_EVENTS)['hosting.services_stopped']['schema']>;

export function balanceExhaustedMessage(to: string, data: Exhausted): MailMessage {
  const services = `${data.runningServices} app service${data.runningServices === 1 ? '' : 's'}`;
  return {
    to,
    subject: `Your apps will be stopped on ${data.graceEndsAt}: the credit balance is used up`,
    text: [
      `The credit balance is $${microsToUsd(BigInt(data.balanceMicros))} while ${services} run.`,
      '',
      `Unless credit is added before ${data.graceEndsAt} (POST /client/credits/topup, or a promotion code),`,
      'every running app service is then stopped. Stopped services cost nothing and keep their deployments;',
      'they are not started again by a top-up: start them with POST /client/services/{id}/start.',
      '',
      'You receive this message because you are an owner of the organisation.',
    ].join('\n'),
  };
}

export function servicesStoppedMessage(to: string, data: Stopped): MailMessage {
  const count = data.serviceIds.length;
  return {
    to,
    subject: `${count} app service${count === 1 ? ' was' : 's were'} stopped: the credit balance is used up`,
    text: [
      `The credit balance is $${microsToUsd(BigInt(data.balanceMicros))} and the grace period has ended, so these`,
      `services were stopped: ${data.serviceIds.join(', ')}.`,
      '',
      'They cost nothing while stopped. Add credit, then start each with POST /client/services/{id}/start.',
      '',
      'You receive this message because you are an owner of the organisation.',
    ].join('\n'),
  };
}

/** Mails every active owner the warning, and again once services are stopped (core/services/owner-mail.ts). */
export function hostingMailSubscriber(deps: OwnerMailDeps) {
  return defineSubscriber({
    name: 'apps.hosting-mail',
    events: ['hosting.balance_exhausted', 'hosting.services_stopped'],
    async handle(event) {
      if (event.organizationId === null) return;
      if (event.type === 'hosting.balance_exhausted') {
        await mailActiveOwners(deps, event.organizationId, (to) => balanceExhaustedMessage(to, event.data), 'a hosting balance warning');
      } else {
        await mailActiveOwners(deps, event.organizationId, (to) => servicesStoppedMessage(to, event.data), 'a hosting stop notice');
      }
    },
  });
}

import { z } from 'zod';
import { defineEventTypes, type PayloadsOf } from '../../core/events/event-catalogue.ts';

const EXAMPLE_WEBHOOK = '5d0c2b7e-9a4f-4c1e-8b2d-3f6a7e8c9d01';

/**
 * The webhooks plugin's own types. `webhook.test` is never emitted as a domain event: it is the type
 * of the delivery `POST /client/webhooks/{id}/test` sends, declared so that receivers know its shape.
 */
export const WEBHOOK_EVENTS = defineEventTypes('webhooks', {
  'webhook.test': {
    schema: z.object({
      webhookId: z.string().describe('The endpoint the test was sent to'),
      projectId: z.string().nullable().describe("The endpoint's project; null for an endpoint of the whole organisation"),
      message: z.string(),
    }),
    description: 'A test delivery, sent only when asked for (POST /client/webhooks/{id}/test); it is never retried',
    public: true,
    example: { webhookId: EXAMPLE_WEBHOOK, projectId: null, message: 'A test delivery: your endpoint received and verified it.' },
  },
  'webhook.disabled': {
    schema: z.object({
      webhookId: z.string(),
      projectId: z.string().nullable().describe("The endpoint's project; null for an endpoint of the whole organisation"),
      origin: z.string().describe("The endpoint URL's scheme, host and port (its path and query may hold a token, so they are left out)"),
      description: z.string(),
      reason: z.string().describe('Why it was switched off'),
      failingSince: z.string().describe('ISO 8601, UTC: the first failed attempt since the last one that succeeded'),
    }),
    description:
      'A webhook endpoint was switched off because its deliveries kept failing: a delivery failed for good and no attempt had succeeded for 5 days. ' +
      "The organisation's owners are mailed too; PATCH the endpoint with enabled: true to switch it on again",
    public: true,
    example: {
      webhookId: EXAMPLE_WEBHOOK,
      projectId: '0b5d7c7e-2f4e-4d0a-9a51-2f6f1c1f0a11',
      origin: 'https://hooks.example.com',
      description: 'Billing sync',
      reason: 'No delivery attempt has succeeded since 2026-11-20T08:00:00.000Z; the last one failed with HTTP 500',
      failingSince: '2026-11-20T08:00:00.000Z',
    },
  },
});

declare module '../../core/events/domain-events.ts' {
  interface EventCatalogue extends PayloadsOf<typeof WEBHOOK_EVENTS> {}
}

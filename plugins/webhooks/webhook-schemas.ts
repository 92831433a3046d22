import { z } from 'zod';
import { listOf } from '../../core/vocabulary/pagination.ts';
import { instantView } from '../../core/vocabulary/timestamps.ts';

/** The wire views below are named schemas of the OpenAPI document (`.meta({ id })`), declared once here. */

const eventTypeList = z
  .array(z.string().min(1).max(100))
  .min(1)
  .max(100)
  .describe('Public event types (GET /client/events/types lists them), or ["*"] for every public type, those added later included');

const url = z.string().min(1).max(2048).describe('Where deliveries are POSTed: an absolute https URL on a public address; redirects are not followed');
const description = z.string().trim().max(500);

export const createWebhookRequest = z.strictObject({
  url,
  description: description.optional().describe('For people: what the endpoint is for'),
  eventTypes: eventTypeList,
  enabled: z.boolean().optional().describe('Default true'),
  projectId: z
    .uuid()
    .optional()
    .describe(
      "Only this project's events. Absent: every event of the organisation for an owner's or admin's session or a key holding projects:write; " +
        "the caller's own project for a key (or connector) confined to one",
    ),
});

export const updateWebhookRequest = z
  .strictObject({
    url: url.optional(),
    description: description.optional(),
    eventTypes: eventTypeList.optional(),
    enabled: z.boolean().optional().describe('false switches the endpoint off (nothing is sent, pending deliveries are cancelled); true switches it on again'),
  })
  .refine((body) => Object.keys(body).length > 0, 'send at least one field to change');

export const rotateSecretRequest = z.strictObject({
  overlapSeconds: z
    .number()
    .int()
    .min(0)
    .max(86_400)
    .optional()
    .describe('Keep signing with the current secret too for this long (at most 24 h), so receivers can switch without missing a delivery. Default 0: it stops at once'),
});

export const webhookView = z
  .object({
    object: z.literal('webhook_endpoint'),
    id: z.uuid(),
    url: z.string(),
    description: z.string(),
    eventTypes: z.array(z.string()),
    enabled: z.boolean(),
    projectId: z.uuid().nullable().describe('The project whose events it gets; null: every event of the organisation'),
    disabledReason: z.string().nullable().describe('Why it is switched off: by a person or key, or because its deliveries kept failing'),
    disabledAt: instantView.nullable(),
    secretRotatedAt: instantView.nullable(),
    previousSecretExpiresAt: instantView.nullable().describe("Until then deliveries are signed with the previous secret too (a rotation's overlap)"),
    createdAt: instantView,
    updatedAt: instantView,
  })
  .meta({ id: 'WebhookEndpoint', description: 'A webhook endpoint, without its signing secret' });

export const webhookListView = listOf(webhookView);

const signingSecret = z
  .string()
  .regex(/^whsec_[A-Za-z0-9+/=]+$/)
  .describe('The signing secret (Standard Webhooks: whsec_ and base64). Shown once: store it now');

export const createdWebhookView = webhookView
  .extend({ secret: signingSecret })
  .meta({ id: 'CreatedWebhookEndpoint', description: 'A new webhook endpoint with its signing secret, which is shown this once' });

export const rotatedSecretView = z
  .object({
    object: z.literal('webhook_secret'),
    webhookId: z.uuid(),
    secret: signingSecret,
    previousSecretExpiresAt: instantView.nullable().describe('Until when the previous secret still signs; null: it stopped at once'),
  })
  .meta({ id: 'WebhookSecret', description: "An endpoint's new signing secret, shown once" });

export const webhookRemovalView = z
  .object({ object: z.literal('ack'), ok: z.literal(true), id: z.uuid() })
  .meta({ id: 'WebhookRemoval', description: 'A webhook endpoint deleted, with its deliveries and secrets' });

export const ATTEMPT_ERROR_KINDS = ['http_status', 'redirect', 'timeout', 'connect', 'refused_address', 'too_large', 'protocol'] as const;

export const attemptView = z
  .object({
    attempt: z.number().int().describe("1 for the delivery's first attempt; a resend goes on counting"),
    attemptedAt: instantView.describe('Also the webhook-timestamp header of the attempt'),
    outcome: z.enum(['succeeded', 'failed']),
    statusCode: z.number().int().nullable().describe("The receiver's HTTP status; null when no answer came"),
    durationMs: z.number().int(),
    responseBody: z.string().nullable().describe("The start of the receiver's answer (UTF-8, a few KB at most)"),
    responseBodyTruncated: z.boolean(),
    errorKind: z
      .enum(ATTEMPT_ERROR_KINDS)
      .nullable()
      .describe('Why it failed: http_status (not 2xx), redirect (3xx: not followed), timeout, connect, refused_address (the name resolved to a private address), too_large, protocol'),
    error: z.string().nullable(),
    nextAttemptAt: instantView.nullable().describe('When it is tried again; null when this attempt ended the delivery'),
  })
  .meta({ id: 'WebhookAttempt', description: 'One attempt to deliver a message' });

/** The most recent attempts shown with each delivery. */
export const ATTEMPTS_SHOWN = 25;

export const deliveryView = z
  .object({
    object: z.literal('webhook_delivery'),
    id: z.uuid(),
    webhookId: z.uuid(),
    messageId: z.string().describe('The webhook-id header: the same on every attempt and resend; receivers deduplicate on it'),
    eventId: z.uuid().nullable().describe('The event delivered; null for a test delivery'),
    eventType: z.string(),
    test: z.boolean(),
    status: z.enum(['pending', 'succeeded', 'failed', 'cancelled']).describe('cancelled: the endpoint was switched off before it was sent'),
    attemptCount: z.number().int(),
    nextAttemptAt: instantView.nullable(),
    createdAt: instantView,
    finishedAt: instantView.nullable(),
    payload: z.record(z.string(), z.unknown()).describe('The body as sent: {id, type, timestamp, organizationId, projectId, data}'),
    attempts: z.array(attemptView).describe(`The latest attempts, newest first (at most ${ATTEMPTS_SHOWN})`),
  })
  .meta({ id: 'WebhookDelivery', description: 'One message to one endpoint, with its attempts' });

export const deliveryListView = listOf(deliveryView);

export const testResultView = z
  .object({
    object: z.literal('webhook_test'),
    succeeded: z.boolean().describe('The endpoint answered 2xx in time'),
    statusCode: z.number().int().nullable(),
    durationMs: z.number().int(),
    errorKind: z.enum(ATTEMPT_ERROR_KINDS).nullable(),
    error: z.string().nullable(),
    delivery: deliveryView,
  })
  .meta({ id: 'WebhookTestResult', description: 'What the endpoint answered to a test delivery' });

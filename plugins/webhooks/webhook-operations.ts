import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { isPublicEventType } from '../../core/events/event-catalogue.ts';
import { authorizedRecord, type RecordKind } from '../../core/identity/authorization.ts';
import { confinedProjectOf } from '../../core/identity/credential.ts';
import { reachesEveryProject, visibleProjectIds } from '../../core/identity/project-access.ts';
import type { JobQueue } from '../../core/jobs/job-queue.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { OutboundHttpError, type OutboundHttpClient } from '../../core/net/outbound-http-client.ts';
import { type AnyOperation, defineOperation } from '../../core/operations/operations.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import type { SecretVault } from '../../core/services/secret-vault.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { listResponse, pageQuery } from '../../core/vocabulary/pagination.ts';
import { sendAttempt } from './delivery-attempt.ts';
import type { DeliveryQueue } from './delivery-queue.ts';
import type { DeliveryStore, StoredAttempt, WebhookDelivery } from './delivery-store.ts';
import { EVERY_TYPE, type EndpointStore, type WebhookEndpoint } from './endpoint-store.ts';
import { forgetSecrets, rotateSecret, signingSecrets, storeNewSecret } from './signing-secrets.ts';
import type { WebhooksConfig } from './webhook-config.ts';
import { messageIdOf, testMessage } from './webhook-payload.ts';
import {
  ATTEMPTS_SHOWN,
  createdWebhookView,
  createWebhookRequest,
  deliveryListView,
  deliveryView,
  rotatedSecretView,
  rotateSecretRequest,
  testResultView,
  updateWebhookRequest,
  webhookListView,
  webhookRemovalView,
  webhookView,
} from './webhook-schemas.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './webhook-errors.ts';

export interface WebhookOperationDeps {
  endpoints: EndpointStore;
  deliveries: DeliveryStore;
  identity: IdentityStores;
  vault: SecretVault;
  http: OutboundHttpClient;
  jobs: JobQueue;
  queue: DeliveryQueue;
  clock: () => Date;
  config: WebhooksConfig;
  /** Plain http is accepted only where customer URLs may reach private networks (`outbound.allowPrivateNetwork`). */
  allowHttp: boolean;
}

export const WEBHOOKS_PAGE_DEFAULT = 50;
export const WEBHOOKS_PAGE_MAX = 200;

/** Webhook endpoints as a resource kind: reached through their project, or by those who reach every project. */
export function webhookRecordKind(endpoints: EndpointStore): RecordKind<WebhookEndpoint> {
  return {
    name: 'webhook endpoint',
    notFound: 'webhook_not_found',
    async find(organizationId, id) {
      const endpoint = await endpoints.get(organizationId, id);
      return endpoint ? { record: endpoint, projectId: endpoint.projectId } : null;
    },
  };
}

function toView(endpoint: WebhookEndpoint) {
  return {
    object: 'webhook_endpoint' as const,
    id: endpoint.id,
    url: endpoint.url,
    description: endpoint.description,
    eventTypes: endpoint.eventTypes,
    enabled: endpoint.enabled,
    projectId: endpoint.projectId,
    disabledReason: endpoint.disabledReason,
    disabledAt: endpoint.disabledAt?.toISOString() ?? null,
    secretRotatedAt: endpoint.secretRotatedAt?.toISOString() ?? null,
    previousSecretExpiresAt: endpoint.previousSecretExpiresAt?.toISOString() ?? null,
    createdAt: endpoint.createdAt.toISOString(),
    updatedAt: endpoint.updatedAt.toISOString(),
  };
}

function toAttemptView(attempt: StoredAttempt) {
  return {
    attempt: attempt.attempt,
    attemptedAt: attempt.attemptedAt.toISOString(),
    outcome: attempt.succeeded ? ('succeeded' as const) : ('failed' as const),
    statusCode: attempt.statusCode,
    durationMs: Math.round(attempt.durationMs),
    responseBody: attempt.responseBody,
    responseBodyTruncated: attempt.responseTruncated,
    errorKind: attempt.errorKind,
    error: attempt.errorMessage,
    nextAttemptAt: attempt.nextAttemptAt?.toISOString() ?? null,
  };
}

function toDeliveryView(delivery: WebhookDelivery & { attempts: StoredAttempt[] }) {
  return {
    object: 'webhook_delivery' as const,
    id: delivery.id,
    webhookId: delivery.endpointId,
    messageId: delivery.messageId,
    eventId: delivery.eventId,
    eventType: delivery.eventType,
    test: delivery.test,
    status: delivery.status,
    attemptCount: delivery.attemptCount,
    nextAttemptAt: delivery.nextAttemptAt?.toISOString() ?? null,
    createdAt: delivery.createdAt.toISOString(),
    finishedAt: delivery.finishedAt?.toISOString() ?? null,
    payload: JSON.parse(delivery.body) as Record<string, unknown>,
    attempts: delivery.attempts.map(toAttemptView),
  };
}

/** `["*"]` alone stands for every public type; otherwise each must be a public type of the catalogue. */
function checkedEventTypes(types: readonly string[]): string[] {
  if (types.includes(EVERY_TYPE)) return [EVERY_TYPE];
  types.forEach((type, index) => {
    if (!isPublicEventType(type)) {
      throw new ApiError('unknown_event_type', `'${type}' is not a public event type; GET /client/events/types lists them (or use "*" for every type)`, {
        param: `eventTypes.${index}`,
      });
    }
  });
  return [...new Set(types)];
}

/** `300` → `5 min`: how the documents speak of a wait. */
function durationText(seconds: number): string {
  if (seconds % 3_600 === 0) return `${seconds / 3_600} h`;
  if (seconds % 60 === 0) return `${seconds / 60} min`;
  return `${seconds} s`;
}

/** The retry schedule in words, as the operation's description gives it (it follows the deployment's settings). */
function scheduleText(waits: readonly number[]): string {
  if (waits.length === 0) return 'never (this deployment makes one attempt)';
  const each = waits.map(durationText);
  const list = each.length === 1 ? each[0] : `${each.slice(0, -1).join(', ')} and ${each[each.length - 1]}`;
  return `${list} later`;
}

const idParams = z.strictObject({ id: resourceId.describe('Webhook endpoint id') });
const deliveryParams = z.strictObject({ id: resourceId.describe('Webhook endpoint id'), deliveryId: resourceId.describe('Delivery id') });

export function webhookOperations(deps: WebhookOperationDeps): AnyOperation[] {
  const { endpoints, deliveries, identity, vault, http, jobs, queue, clock, config } = deps;
  const webhook = webhookRecordKind(endpoints);
  const readWebhook = { kind: webhook, access: 'read', in: 'path', field: 'id' } as const;
  const writeWebhook = { kind: webhook, access: 'write', in: 'path', field: 'id' } as const;

  /**
   * The URL as it will be called. The SSRF guard is the kernel's outbound client's, here at save
   * (it runs again on every connection): a name resolving to a private address is refused now; a name
   * that does not resolve yet is accepted, and its attempts fail `connect` until it does.
   */
  async function checkedUrl(raw: string): Promise<string> {
    const invalid = (message: string) => new ApiError('webhook_url_invalid', message, { param: 'url' });
    let parsed: URL;
    try {
      parsed = new URL(raw);
    } catch {
      throw invalid('The endpoint URL is not a valid absolute URL');
    }
    if (parsed.username || parsed.password) throw invalid('The endpoint URL may not carry a user name or password; put a token in its path or query instead');
    if (parsed.protocol !== 'https:' && !(parsed.protocol === 'http:' && deps.allowHttp)) throw invalid(`The endpoint URL must use https, not ${parsed.protocol.replace(/:$/, '')}`);
    try {
      await http.check(parsed);
    } catch (error) {
      if (!(error instanceof OutboundHttpError)) throw error;
      if (error.kind === 'refused_address' && error.reason === 'private_address') throw new ApiError('webhook_url_refused', error.message, { param: 'url' });
      if (error.kind === 'refused_address') throw invalid(error.message);
    }
    return parsed.href;
  }

  const list = defineOperation({
    name: 'webhooks.list',
    method: 'GET',
    path: '/webhooks',
    summary: 'List webhook endpoints, newest first (never their signing secrets)',
    description:
      "An endpoint belongs to one project (it gets that project's events) or to the whole organisation (every event). A key confined to its project, " +
      "a connector and a member's session see the endpoints of the projects they reach; the organisation's own endpoints only owners, admins and keys holding projects:write.",
    scope: 'webhooks:read',
    readOnly: true,
    query: pageQuery({ defaultLimit: WEBHOOKS_PAGE_DEFAULT, maxLimit: WEBHOOKS_PAGE_MAX, id: resourceId }).extend({
      projectId: resourceId.optional().describe('Only endpoints of this project'),
    }),
    resource: { kind: 'project', access: 'read', in: 'query', field: 'projectId' },
    output: webhookListView,
    async handler({ query }, { credential }) {
      const visible = await visibleProjectIds(identity, credential);
      const page = await endpoints.page({ organizationId: credential.organizationId, visibleProjectIds: visible, projectId: query.projectId }, query);
      return listResponse(page, toView);
    },
  });

  const create = defineOperation({
    name: 'webhooks.create',
    method: 'POST',
    path: '/webhooks',
    summary: 'Create a webhook endpoint; its signing secret is returned once',
    description:
      'Deliveries follow Standard Webhooks: POST with headers webhook-id (the same on every retry), webhook-timestamp and webhook-signature ' +
      '(v1, HMAC-SHA256 of id.timestamp.body with the secret), body {id, type, timestamp, organizationId, projectId, data}. ' +
      `A 2xx within ${durationText(config.timeoutMs / 1000)} is a success; anything else is retried ${scheduleText(config.retryScheduleSeconds)} ` +
      '(a longer retry-after postpones a retry). ' +
      'The URL must be https on a public address: one that is or resolves to a private, loopback or link-local address is refused (webhook_url_refused), now and on every attempt. ' +
      `eventTypes: public types of GET /client/events/types, or ["*"]. At most ${config.maxEndpointsPerOrganization} endpoints per organisation.`,
    scope: 'webhooks:write',
    readOnly: false,
    body: createWebhookRequest,
    resource: { kind: 'project', access: 'write', in: 'body', field: 'projectId' },
    errors: ['webhook_url_invalid', 'webhook_url_refused', 'unknown_event_type', 'webhook_limit_reached', 'project_required'],
    output: createdWebhookView,
    status: 201,
    async handler({ body }, { credential, transaction }) {
      let projectId = body.projectId ?? null;
      if (projectId === null && !reachesEveryProject(credential)) {
        // A key or connector confined to a project makes endpoints of that project.
        projectId = confinedProjectOf(credential);
        if (projectId === null) {
          throw new ApiError('project_required', 'Name the project: only owners, admins and keys holding projects:write make endpoints of the whole organisation', {
            param: 'projectId',
          });
        }
      }
      const url = await checkedUrl(body.url);
      const eventTypes = checkedEventTypes(body.eventTypes);
      const id = randomUUID();
      const made = await transaction(async (tx) => {
        if ((await endpoints.countLocked(tx, credential.organizationId)) >= config.maxEndpointsPerOrganization) {
          throw new ApiError('webhook_limit_reached', `This organisation has ${config.maxEndpointsPerOrganization} webhook endpoints, as many as it may; delete one first`);
        }
        const endpoint = await endpoints.create(
          tx,
          { id, organizationId: credential.organizationId, projectId, url, description: body.description ?? '', eventTypes, enabled: body.enabled ?? true },
          clock(),
        );
        return { endpoint, secret: await storeNewSecret(vault.within(tx), id) };
      });
      return { ...toView(made.endpoint), secret: made.secret };
    },
  });

  const get = defineOperation({
    name: 'webhooks.get',
    method: 'GET',
    path: '/webhooks/:id',
    summary: 'One webhook endpoint (never its signing secret)',
    scope: 'webhooks:read',
    readOnly: true,
    params: idParams,
    resource: readWebhook,
    output: webhookView,
    async handler(_input, { authorization }) {
      return toView(authorizedRecord(authorization, webhook).record);
    },
  });

  const update = defineOperation({
    name: 'webhooks.update',
    method: 'PATCH',
    path: '/webhooks/:id',
    summary: 'Change the URL, description or event types of a webhook endpoint, or switch it off or on',
    description:
      "An endpoint's project is fixed: make a new endpoint for another. Switching it off stops its deliveries: each pending one is cancelled when its next attempt comes due, " +
      'unless the endpoint is on again by then. Switching it on clears disabledReason and the failure streak that switches endpoints off.',
    scope: 'webhooks:write',
    readOnly: false,
    idempotent: true,
    params: idParams,
    body: updateWebhookRequest,
    resource: writeWebhook,
    errors: ['webhook_url_invalid', 'webhook_url_refused', 'unknown_event_type', 'webhook_not_found'],
    output: webhookView,
    async handler({ params, body }, { credential, transaction, authorization }) {
      const endpoint = authorizedRecord(authorization, webhook).record;
      const url = body.url === undefined ? undefined : await checkedUrl(body.url);
      const eventTypes = body.eventTypes === undefined ? undefined : checkedEventTypes(body.eventTypes);
      const enabled =
        body.enabled === undefined || body.enabled === endpoint.enabled
          ? undefined
          : body.enabled
            ? ({ enabled: true } as const)
            : ({ enabled: false, reason: `Switched off by ${credential.kind === 'key' ? `API key ${credential.keyName}` : credential.email}` } as const);
      const updated = await transaction(async (tx) => {
        const changed = await endpoints.update(tx, credential.organizationId, endpoint.id, { url, description: body.description, eventTypes, enabled }, clock());
        // Refused inside the transaction, so the call is recorded as the 404 it answers.
        if (!changed) throw new ApiError('webhook_not_found', `No webhook endpoint ${params.id}`, { param: 'id' });
        return changed;
      });
      return toView(updated);
    },
  });

  const remove = defineOperation({
    name: 'webhooks.delete',
    method: 'DELETE',
    path: '/webhooks/:id',
    summary: 'Delete a webhook endpoint with its deliveries and signing secrets',
    description: 'Nothing more is sent to it, retries included.',
    scope: 'webhooks:write',
    readOnly: false,
    destructive: true,
    idempotent: true,
    params: idParams,
    resource: writeWebhook,
    output: webhookRemovalView,
    async handler(_input, { credential, transaction, authorization }) {
      const endpoint = authorizedRecord(authorization, webhook).record;
      await transaction(async (tx) => {
        await endpoints.delete(tx, credential.organizationId, endpoint.id);
        await forgetSecrets(vault.within(tx), endpoint.id);
      });
      return { object: 'ack' as const, ok: true as const, id: endpoint.id };
    },
  });

  const rotate = defineOperation({
    name: 'webhooks.secret.rotate',
    method: 'POST',
    path: '/webhooks/:id/secret/rotate',
    summary: "Replace a webhook endpoint's signing secret; the new one is returned once",
    description:
      'With overlapSeconds, deliveries are signed with the new and the previous secret (two v1 signatures, space-separated, as Standard Webhooks allows) ' +
      'until the overlap ends, so a receiver can switch secrets without missing one. Without it the previous secret stops signing at once.',
    scope: 'webhooks:write',
    readOnly: false,
    params: idParams,
    body: rotateSecretRequest,
    bodyRequired: false,
    resource: writeWebhook,
    output: rotatedSecretView,
    async handler({ body }, { transaction, authorization }) {
      const endpoint = authorizedRecord(authorization, webhook).record;
      const overlapMs = (body?.overlapSeconds ?? 0) * 1000;
      const now = clock();
      const previousExpiresAt = overlapMs > 0 ? new Date(now.getTime() + overlapMs) : null;
      const secret = await transaction(async (tx) => {
        const fresh = await rotateSecret(vault.within(tx), endpoint.id, previousExpiresAt !== null);
        await endpoints.secretRotated(tx, endpoint.id, now, previousExpiresAt);
        return fresh;
      });
      return { object: 'webhook_secret' as const, webhookId: endpoint.id, secret, previousSecretExpiresAt: previousExpiresAt?.toISOString() ?? null };
    },
  });

  const test = defineOperation({
    name: 'webhooks.test',
    method: 'POST',
    path: '/webhooks/:id/test',
    summary: 'Send a webhook.test delivery now and answer what the endpoint answered',
    description:
      'Synchronous: the answer comes when the endpoint has answered (or the timeout passed), through the same guarded client as every delivery, and the delivery is kept ' +
      'in GET /webhooks/{id}/deliveries. It works whether the endpoint is on or off, so it can be checked before switching it on; it is never retried, and its failure ' +
      'does not count towards switching the endpoint off.',
    scope: 'webhooks:write',
    readOnly: false,
    params: idParams,
    resource: writeWebhook,
    output: testResultView,
    async handler(_input, { transaction, authorization }) {
      const endpoint = authorizedRecord(authorization, webhook).record;
      const now = clock();
      const id = randomUUID();
      const body = testMessage(endpoint, now);
      const messageId = messageIdOf(id);
      await transaction((tx) =>
        deliveries.create(tx, { id, endpointId: endpoint.id, organizationId: endpoint.organizationId, eventId: null, eventType: 'webhook.test', messageId, body, test: true }, now),
      );
      const secrets = await signingSecrets(vault, endpoint, now);
      const outcome = await sendAttempt(http, config, { url: endpoint.url, messageId, body, secrets }, now);
      await transaction((tx) => deliveries.recordAttempt(tx, id, { ...outcome, nextAttemptAt: null }));
      const delivery = await deliveries.one(endpoint.id, id, ATTEMPTS_SHOWN);
      if (!delivery) throw new ApiError('webhook_not_found', `No webhook endpoint ${endpoint.id}`, { param: 'id' });
      return {
        object: 'webhook_test' as const,
        succeeded: outcome.succeeded,
        statusCode: outcome.statusCode,
        durationMs: Math.round(outcome.durationMs),
        errorKind: outcome.errorKind,
        error: outcome.errorMessage,
        delivery: toDeliveryView(delivery),
      };
    },
  });

  const listDeliveries = defineOperation({
    name: 'webhooks.deliveries.list',
    method: 'GET',
    path: '/webhooks/:id/deliveries',
    summary: "A webhook endpoint's deliveries, newest first, each with its attempts",
    description:
      `Every attempt is kept: its time, outcome, status code, duration, the start of the answer (a few KB), why it failed and when the next comes. Each delivery shows its latest ` +
      `${ATTEMPTS_SHOWN} attempts; attemptCount counts them all. Deliveries are deleted ${config.retentionDays} days after they were made.`,
    scope: 'webhooks:read',
    readOnly: true,
    params: idParams,
    query: pageQuery({ defaultLimit: WEBHOOKS_PAGE_DEFAULT, maxLimit: WEBHOOKS_PAGE_MAX, id: resourceId }).extend({
      status: z.enum(['pending', 'succeeded', 'failed', 'cancelled']).optional().describe('Only deliveries in this state'),
      eventType: z.string().min(1).max(100).optional().describe('Only deliveries of this event type'),
    }),
    resource: readWebhook,
    output: deliveryListView,
    async handler({ query }, { authorization }) {
      const endpoint = authorizedRecord(authorization, webhook).record;
      const page = await deliveries.page({ endpointId: endpoint.id, status: query.status, eventType: query.eventType }, query, ATTEMPTS_SHOWN);
      return listResponse(page, toDeliveryView);
    },
  });

  const resend = defineOperation({
    name: 'webhooks.deliveries.resend',
    method: 'POST',
    path: '/webhooks/:id/deliveries/:deliveryId/resend',
    summary: 'Send a finished delivery again, with the same message id and body and a fresh retry schedule',
    description:
      'For a delivery that failed, was cancelled, or that the receiver lost. The webhook-id stays the same, so a receiver that deduplicates on it ignores a message it ' +
      'already processed. Attempts go on counting after the earlier ones. The endpoint must be on.',
    scope: 'webhooks:write',
    readOnly: false,
    params: deliveryParams,
    resource: writeWebhook,
    errors: ['delivery_not_found', 'delivery_pending', 'webhook_disabled'],
    output: deliveryView,
    status: 202,
    async handler({ params }, { transaction, authorization }) {
      const endpoint = authorizedRecord(authorization, webhook).record;
      if (!endpoint.enabled) throw new ApiError('webhook_disabled', `Webhook endpoint ${endpoint.id} is switched off; PATCH it with enabled: true first`);
      await transaction(async (tx) => {
        const reopened = await deliveries.reopen(tx, endpoint.id, params.deliveryId, clock());
        if (!reopened) {
          const existing = await deliveries.get(endpoint.id, params.deliveryId, tx);
          if (!existing) throw new ApiError('delivery_not_found', `No delivery ${params.deliveryId} of this endpoint`, { param: 'deliveryId' });
          throw new ApiError('delivery_pending', undefined, { param: 'deliveryId' });
        }
        await jobs.enqueue(queue, { deliveryId: reopened.id }, { tx });
      });
      const delivery = await deliveries.one(endpoint.id, params.deliveryId, ATTEMPTS_SHOWN);
      if (!delivery) throw new ApiError('delivery_not_found', `No delivery ${params.deliveryId} of this endpoint`, { param: 'deliveryId' });
      return toDeliveryView(delivery);
    },
  });

  return [list, create, get, update, remove, rotate, test, listDeliveries, resend];
}

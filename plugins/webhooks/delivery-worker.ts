import type { DomainEvents } from '../../core/events/domain-events.ts';
import { type Job, RetryJobAt } from '../../core/jobs/queue-definitions.ts';
import type { OutboundHttpClient } from '../../core/net/outbound-http-client.ts';
import type { Database, Transaction } from '../../core/ports/database.ts';
import type { SecretVault } from '../../core/services/secret-vault.ts';
import { type AttemptOutcome, attemptSummary, sendAttempt } from './delivery-attempt.ts';
import type { DeliveryStore, WebhookDelivery } from './delivery-store.ts';
import type { EndpointStore, WebhookEndpoint } from './endpoint-store.ts';
import { attemptsAllowed, nextAttemptAt } from './retry-schedule.ts';
import { signingSecrets } from './signing-secrets.ts';
import type { WebhooksConfig } from './webhook-config.ts';
import './webhook-events.ts';

export interface DeliveryWorkerDeps {
  database: Database;
  deliveries: DeliveryStore;
  endpoints: EndpointStore;
  vault: SecretVault;
  http: OutboundHttpClient;
  events: DomainEvents;
  clock: () => Date;
  config: WebhooksConfig;
}

/**
 * The handler of `webhooks.deliver`: one attempt per run.
 * - A 2xx: the delivery succeeded and the endpoint's failure streak ends (written through
 *   `job.complete`, so exactly once).
 * - A failure with the schedule not used up: the attempt is kept, and the job runs again when the
 *   schedule (or a longer retry-after) says, through RetryJobAt.
 * - The last failure: the delivery failed for good, and an endpoint that has had no successful
 *   attempt for `disableAfterFailingHours` is switched off, with a `webhook.disabled` event (its
 *   subscriber mails the owners), all in the job's completion.
 * The attempt number within the schedule is the job's run number: a run lost with its worker
 * counts as one, and is repeated with the same message id and body.
 */
export async function runDelivery(deps: DeliveryWorkerDeps, job: Job<{ deliveryId: string }>): Promise<void> {
  const found = await deps.deliveries.withEndpoint(job.payload.deliveryId);
  // Gone with its endpoint, or finished by an earlier run: nothing is left to do.
  if (found?.delivery.status !== 'pending') return;
  const { delivery, endpoint } = found;
  if (!endpoint.enabled) {
    await job.complete((tx) => deps.deliveries.cancel(tx, delivery.id, deps.clock()));
    return;
  }
  const at = deps.clock();
  const secrets = await signingSecrets(deps.vault, endpoint, at);
  const outcome = await sendAttempt(deps.http, deps.config, { url: endpoint.url, messageId: delivery.messageId, body: delivery.body, secrets }, at, job.signal);
  if (outcome.succeeded) {
    await job.complete(async (tx) => {
      await deps.deliveries.recordAttempt(tx, delivery.id, { ...outcome, nextAttemptAt: null });
      if (!delivery.test) await deps.endpoints.succeeded(tx, endpoint.id);
    });
    return;
  }
  const next = job.attempt < attemptsAllowed(deps.config) ? nextAttemptAt(deps.config, job.attempt, at, outcome.retryAfterMs) : null;
  if (next) {
    await deps.database.transaction(async (tx) => {
      await deps.deliveries.recordAttempt(tx, delivery.id, { ...outcome, nextAttemptAt: next });
      if (!delivery.test) await deps.endpoints.failed(tx, endpoint.id, at);
    });
    throw new RetryJobAt(next, `attempt failed (${attemptSummary(outcome)})`);
  }
  await job.complete(async (tx) => {
    await deps.deliveries.recordAttempt(tx, delivery.id, { ...outcome, nextAttemptAt: null });
    if (!delivery.test) await switchOffIfFailing(deps, tx, endpoint, delivery, outcome);
  });
}

async function switchOffIfFailing(deps: DeliveryWorkerDeps, tx: Transaction, endpoint: WebhookEndpoint, delivery: WebhookDelivery, outcome: AttemptOutcome): Promise<void> {
  const now = outcome.attemptedAt;
  const failingSince = await deps.endpoints.failed(tx, endpoint.id, now);
  if (!failingSince || now.getTime() - failingSince.getTime() < deps.config.disableAfterFailingHours * 3_600_000) return;
  const reason = `No delivery attempt has succeeded since ${failingSince.toISOString()}; the last one failed with ${attemptSummary(outcome)}`;
  if (!(await deps.endpoints.disable(tx, endpoint.id, reason, now))) return;
  await deps.events.emit(tx, {
    type: 'webhook.disabled',
    organizationId: delivery.organizationId,
    subject: endpoint.id,
    actor: null,
    data: {
      webhookId: endpoint.id,
      projectId: endpoint.projectId,
      origin: new URL(endpoint.url).origin,
      description: endpoint.description,
      reason,
      failingSince: failingSince.toISOString(),
    },
  });
}

import { randomUUID } from 'node:crypto';
import { type AnySubscriber, defineSubscriber, type EventType } from '../../core/events/domain-events.ts';
import { eventTypeEntries } from '../../core/events/event-catalogue.ts';
import type { JobQueue } from '../../core/jobs/job-queue.ts';
import type { DeliveryQueue } from './delivery-queue.ts';
import type { DeliveryStore } from './delivery-store.ts';
import type { EndpointStore } from './endpoint-store.ts';
import { eventMessage, messageIdOf, projectOfEvent } from './webhook-payload.ts';

export interface FanOutDeps {
  endpoints: EndpointStore;
  deliveries: DeliveryStore;
  jobs: JobQueue;
  queue: DeliveryQueue;
  clock: () => Date;
}

/**
 * One subscriber for every public event type (read from the catalogue when the plugin starts, so a
 * type a later plugin declares is covered as soon as that plugin is enabled): each event becomes one
 * delivery, with its own copy of the message, and one `webhooks.deliver` job per enabled endpoint of
 * the event's organisation that wants its type (or `*`) and its project (an endpoint of the whole
 * organisation gets every project's events). All of it is written through `job.complete`, so once
 * per event however often the subscriber's job runs; the unique (endpoint, event) pair says so again.
 */
export function fanOutSubscriber(deps: FanOutDeps): AnySubscriber {
  const publicTypes = eventTypeEntries()
    .filter(({ entry }) => entry.public)
    .map(({ type }) => type as EventType);
  return defineSubscriber({
    name: 'webhooks',
    events: publicTypes,
    concurrency: 4,
    maxAttempts: 10,
    async handle(event, job) {
      const organizationId = event.organizationId;
      if (organizationId === null) return;
      const body = eventMessage(event, organizationId);
      await job.complete(async (tx) => {
        const now = deps.clock();
        for (const endpoint of await deps.endpoints.subscribed(tx, organizationId, event.type, projectOfEvent(event.data))) {
          const id = randomUUID();
          const delivery = { id, endpointId: endpoint.id, organizationId, eventId: event.id, eventType: event.type, messageId: messageIdOf(id), body, test: false };
          if (await deps.deliveries.create(tx, delivery, now)) await deps.jobs.enqueue(deps.queue, { deliveryId: id }, { tx, idempotencyKey: id });
        }
      });
    },
  });
}

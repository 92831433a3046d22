import { randomUUID } from 'node:crypto';
import type { DomainEvent } from '../../core/events/domain-events.ts';

/**
 * What a receiver gets: Standard Webhooks' `{type, timestamp, data}` with our event id and where it
 * happened. `timestamp` is when the event occurred (the webhook-timestamp header is when the attempt
 * was made). The text is built once and stored with the delivery, so every attempt sends, and signs,
 * the same bytes.
 */
export interface WebhookMessage {
  id: string;
  type: string;
  timestamp: string;
  organizationId: string;
  projectId: string | null;
  data: unknown;
}

/** Every event about a project carries its projectId in its data (core/events/event-catalogue.ts). */
export function projectOfEvent(data: unknown): string | null {
  const projectId = (data as { projectId?: unknown } | null)?.projectId;
  return typeof projectId === 'string' ? projectId : null;
}

export function eventMessage(event: Pick<DomainEvent, 'id' | 'type' | 'occurredAt' | 'data'>, organizationId: string): string {
  const message: WebhookMessage = {
    id: event.id,
    type: event.type,
    timestamp: event.occurredAt.toISOString(),
    organizationId,
    projectId: projectOfEvent(event.data),
    data: event.data,
  };
  return JSON.stringify(message);
}

/** The message id, the webhook-id header: `msg_` and the delivery's id, so it is the same on every attempt. */
export function messageIdOf(deliveryId: string): string {
  return `msg_${deliveryId.replaceAll('-', '')}`;
}

export function testMessage(endpoint: { id: string; organizationId: string; projectId: string | null }, at: Date): string {
  const message: WebhookMessage = {
    id: randomUUID(),
    type: 'webhook.test',
    timestamp: at.toISOString(),
    organizationId: endpoint.organizationId,
    projectId: endpoint.projectId,
    data: { webhookId: endpoint.id, projectId: endpoint.projectId, message: 'A test delivery: your endpoint received and verified it.' },
  };
  return JSON.stringify(message);
}

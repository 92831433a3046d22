import { z } from 'zod';
import { defineOperation, type AnyOperation, type OperationOwner } from '../operations/operations.ts';
import { eventDataJsonSchema, eventTypeEntries } from './event-catalogue.ts';

const eventTypeView = z
  .object({
    object: z.literal('event_type'),
    type: z.string().describe('What a webhook subscribes to and a delivery names, e.g. key.created'),
    description: z.string(),
    schema: z.record(z.string(), z.unknown()).describe("The JSON Schema (draft 2020-12) of the event's data"),
    example: z.unknown().describe('An example of the data'),
  })
  .meta({ id: 'EventType', description: 'A public event type: what it means and the shape of its data' });

const eventTypeListView = z
  .object({ object: z.literal('list'), data: z.array(eventTypeView).describe('Every public type, by name') })
  .meta({ id: 'EventTypeList', description: 'Every public event type' });

/** The kernel serves the catalogue; this names it in the OpenAPI document's tags. */
export const EVENT_CATALOGUE_OWNER: OperationOwner = {
  name: 'events',
  description: 'The event catalogue: every public event type, its data and an example',
};

/**
 * `GET /client/events/types`: the public part of the event catalogue, for people writing a webhook
 * receiver and for tools choosing what to subscribe to. Scope webhooks:read, as it is read to
 * configure webhooks; it shows nothing of the account.
 */
export function eventTypeOperations(): AnyOperation[] {
  const list = defineOperation({
    name: 'events.types',
    method: 'GET',
    path: '/events/types',
    summary: 'Every public event type with its description, the JSON Schema of its data and an example',
    description: 'Scope webhooks:read. The types webhooks may subscribe to; the list is the same for every account.',
    scope: 'webhooks:read',
    readOnly: true,
    output: eventTypeListView,
    async handler() {
      const data = eventTypeEntries()
        .filter(({ entry }) => entry.public)
        .map(({ type, entry }) => ({
          object: 'event_type' as const,
          type,
          description: entry.description,
          schema: eventDataJsonSchema(entry),
          example: entry.example,
        }));
      return { object: 'list' as const, data };
    },
  });
  return [list];
}

import { z } from 'zod';

/**
 * Every domain event type, declared once at run time: the zod schema of its data (from which its
 * TypeScript type is inferred, so the two cannot drift), a sentence saying when it happens, an
 * example of its data (checked against the schema when declared), and whether it is public: a
 * public type is listed by `GET /client/events/types` and is what webhooks may subscribe to; the
 * others (the audit log's `management.operation`) stay inside the service.
 *
 * The kernel's types are below. A plugin declares its own next to the code that emits them, as it
 * catalogues its error codes: `defineEventTypes(plugin, { … })` registers them (refusing a type
 * another owner already has, so no type gets two meanings) and augmenting `EventCatalogue` with
 * `PayloadsOf<typeof THEM>` lets tsc type `events.emit` and subscribers:
 *
 *   const KEY_EVENTS = defineEventTypes('keys', { 'key.created': { schema, description, public: true, example } });
 *   declare module '../../core/events/domain-events.ts' {
 *     interface EventCatalogue extends PayloadsOf<typeof KEY_EVENTS> {}
 *   }
 *
 * Data is stored as JSON and handed to subscribers as read back: use strings for dates and for
 * bigint amounts.
 */
export interface EventTypeEntry<S extends z.ZodType = z.ZodType> {
  readonly schema: S;
  readonly description: string;
  readonly public: boolean;
  readonly example: z.output<S>;
}

/** The shape a set of event types adds to `EventCatalogue`: each type's data. */
export type PayloadsOf<T> = { [K in keyof T]: T[K] extends { readonly schema: infer S extends z.ZodType } ? z.output<S> : never };

interface Catalogued {
  readonly entry: EventTypeEntry;
  /** `core`, or the plugin that declared it. */
  readonly owner: string;
}

const catalogue = new Map<string, Catalogued>();

/** Event types are `noun.verb` (or `noun.past_participle`) in lower case, as webhook receivers switch on them. */
const TYPE_PATTERN = /^[a-z][a-z_]*(\.[a-z][a-z_]*)+$/;

/**
 * Declares event types (at module load, so they exist wherever the module that emits them is
 * imported) and returns them unchanged, for `PayloadsOf<typeof …>`. A type another owner already
 * declared is refused, as is an example that its own schema rejects (at load, so at boot and in
 * every test that imports the module).
 */
export function defineEventTypes<T extends Record<string, EventTypeEntry>>(owner: string, entries: T): T {
  for (const [type, entry] of Object.entries(entries) as Array<[string, EventTypeEntry]>) {
    if (!TYPE_PATTERN.test(type)) throw new Error(`Event type ${JSON.stringify(type)} of ${owner} is not of the form noun.verb`);
    const existing = catalogue.get(type);
    if (existing && existing.entry !== entry) throw new Error(`Event type ${type} of ${owner} is already declared by ${existing.owner}`);
    const example = entry.schema.safeParse(entry.example);
    if (!example.success) throw new Error(`The example of event type ${type} does not match its schema: ${example.error.message}`);
    catalogue.set(type, { entry, owner });
  }
  return entries;
}

/** The declaration of a type; throws for a type nothing declared (its module was not loaded). */
export function eventTypeEntry(type: string): EventTypeEntry {
  const found = catalogue.get(type);
  if (found === undefined) throw new Error(`Event type ${JSON.stringify(type)} is not declared: import the module that defines it (defineEventTypes)`);
  return found.entry;
}

/** Whether webhooks may subscribe to `type`: declared and public. */
export function isPublicEventType(type: string): boolean {
  return catalogue.get(type)?.entry.public === true;
}

/** Every declared type with its entry and owner, sorted by type. */
export function eventTypeEntries(): Array<{ type: string; owner: string; entry: EventTypeEntry }> {
  return [...catalogue].map(([type, { entry, owner }]) => ({ type, owner, entry })).sort((a, b) => (a.type < b.type ? -1 : a.type > b.type ? 1 : 0));
}

/** The JSON Schema of a type's data, as the catalogue operation and the README show it. */
export function eventDataJsonSchema(entry: EventTypeEntry): Record<string, unknown> {
  const { $schema: _dialect, ...schema } = z.toJSONSchema(entry.schema, { target: 'draft-2020-12', unrepresentable: 'any', io: 'output' }) as Record<string, unknown>;
  return schema;
}

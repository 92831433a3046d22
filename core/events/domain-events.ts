import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { Transaction } from '../ports/database.ts';
import type { EventActor, EventStore } from '../ports/events.ts';
import { SUBSCRIBER_QUEUE_PREFIX, type JobRegistry } from '../jobs/job-registry.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import { eventTypeEntry } from './event-catalogue.ts';
import { defineQueue, PermanentJobError, type Job, type QueueSettings, type QueueSpec } from '../jobs/queue-definitions.ts';

/**
 * Every event type and the TypeScript shape of its data, for tsc. Each type is declared at run time
 * with its schema by `defineEventTypes` (core/events/event-catalogue.ts), and its owner augments this
 * interface with `PayloadsOf<typeof THEM>`, so the type is inferred from the schema, never written twice.
 */
// biome-ignore lint/suspicious/noEmptyInterface: plugins add event types to this interface by declaration merging
export interface EventCatalogue {}

export type EventType = keyof EventCatalogue & string;

export interface DomainEvent<T extends EventType = EventType> {
  readonly id: string;
  readonly type: T;
  readonly organizationId: string | null;
  readonly subject: string | null;
  readonly data: EventCatalogue[T];
  readonly actor: EventActor | null;
  readonly occurredAt: Date;
}

/** One DomainEvent per type of the union, so a subscriber can switch on `event.type`. */
export type EventOf<T extends EventType> = T extends EventType ? DomainEvent<T> : never;

export interface NewEvent<T extends EventType> {
  type: T;
  organizationId: string | null;
  subject: string | null;
  data: EventCatalogue[T];
  actor: EventActor | null;
}

export interface SubscriberDefinition<T extends EventType = EventType> extends Partial<Omit<QueueSettings, 'backoff'>> {
  /** Unique among subscribers; names the subscriber's queue, `event.<name>`. */
  readonly name: string;
  readonly events: readonly T[];
  readonly backoff?: Partial<QueueSettings['backoff']>;
  /**
   * Runs once per event until it succeeds (retried with backoff like any job). Writes made
   * through `job.complete(tx => …)` happen exactly once per event; anything else (an HTTP call)
   * at least once, so pass `event.id` along for the receiver to deduplicate.
   */
  handle(event: EventOf<T>, job: Job<{ eventId: string }>): Promise<void>;
}

// Subscribers are stored heterogeneously; each is type-checked inside defineSubscriber.
// biome-ignore lint/suspicious/noExplicitAny: the element type varies per entry
export type AnySubscriber = SubscriberDefinition<any>;

export function defineSubscriber<T extends EventType>(definition: SubscriberDefinition<T>): SubscriberDefinition<T> {
  return definition;
}

const deliveryPayload = z.strictObject({ eventId: z.uuid() });

/**
 * The kernel's one emitter. `emit(tx, event)` writes the event to the outbox and, in the same
 * transaction, one job per subscriber of its type (queue `event.<subscriber>`, idempotency key
 * the event id). So an event whose transaction rolls back is never seen by anyone, and one that
 * commits reaches each subscriber through its own retried job: a crash anywhere after the commit
 * only delays a delivery, and the key keeps it to one job per (event, subscriber).
 */
export class DomainEvents {
  private readonly byType = new Map<string, Array<QueueSpec<typeof deliveryPayload>>>();
  private readonly names = new Set<string>();

  constructor(
    private readonly deps: {
      store: EventStore;
      jobs: JobQueue;
      registry: JobRegistry;
      clock: () => Date;
    },
  ) {}

  subscribe(subscriber: AnySubscriber): void {
    if (this.names.has(subscriber.name)) throw new Error(`subscriber ${subscriber.name} is declared twice`);
    if (subscriber.events.length === 0) throw new Error(`subscriber ${subscriber.name} lists no event types`);
    this.names.add(subscriber.name);
    const queue = defineQueue({
      name: SUBSCRIBER_QUEUE_PREFIX + subscriber.name,
      payload: deliveryPayload,
      ...(subscriber.concurrency === undefined ? {} : { concurrency: subscriber.concurrency }),
      ...(subscriber.maxAttempts === undefined ? {} : { maxAttempts: subscriber.maxAttempts }),
      ...(subscriber.leaseMs === undefined ? {} : { leaseMs: subscriber.leaseMs }),
      ...(subscriber.backoff === undefined ? {} : { backoff: subscriber.backoff }),
    });
    this.deps.registry.addQueue(
      queue.handle(async (job) => {
        const stored = await this.deps.store.get(job.payload.eventId);
        if (!stored) throw new PermanentJobError(`event ${job.payload.eventId} no longer exists (pruned before it was delivered)`);
        await subscriber.handle(stored as EventOf<EventType>, job);
      }),
      { kernel: true },
    );
    for (const type of subscriber.events) {
      const list = this.byType.get(type) ?? [];
      list.push(queue);
      this.byType.set(type, list);
    }
  }

  /**
   * Forgets an organisation's events in `tx` (its account's deletion): their data names its keys
   * and people. A subscriber's job still queued for one of them then ends as the pruned ones do,
   * without acting, so none writes about the organisation after its erasure (an audit entry, a
   * webhook delivery). Events emitted later in `tx` (`account.deleted`) are kept.
   */
  eraseForOrganization(tx: Transaction, organizationId: string): Promise<number> {
    return this.deps.store.eraseForOrganization(tx, organizationId);
  }

  /**
   * Records the event in `tx` (the transaction of the change it describes); returns its id. The data
   * is checked against the type's declared schema first: a type nothing declared, or data that does
   * not match, throws, and so rolls the change back rather than publish what receivers cannot read.
   */
  async emit<T extends EventType>(tx: Transaction, event: NewEvent<T>): Promise<string> {
    const checked = eventTypeEntry(event.type).schema.safeParse(event.data);
    if (!checked.success) throw new Error(`The data of a ${event.type} event does not match its schema: ${checked.error.message}`);
    const id = randomUUID();
    await this.deps.store.insert(tx, {
      id,
      type: event.type,
      organizationId: event.organizationId,
      subject: event.subject,
      data: event.data,
      actor: event.actor,
      occurredAt: this.deps.clock(),
    });
    for (const queue of this.byType.get(event.type) ?? []) {
      await this.deps.jobs.enqueue(queue, { eventId: id }, { tx, idempotencyKey: id });
    }
    return id;
  }
}

import type { Queryable } from './database.ts';

/** Who caused an event: a person (through a session), an API key, or the service itself. */
export type EventActor =
  | { kind: 'person'; id: string; label: string; credential: { kind: 'session' | 'connector'; id: string } }
  | { kind: 'key'; id: string; label: string; credential: { kind: 'key'; id: string } }
  | { kind: 'system'; id: string; label: string; credential: null };

/** One domain event as stored in the outbox (data is JSON). */
export interface StoredEvent {
  id: string;
  type: string;
  organizationId: string | null;
  /** The resource the event is about, e.g. an API key's id; null when it is about the account. */
  subject: string | null;
  data: unknown;
  actor: EventActor | null;
  occurredAt: Date;
}

/** The outbox: events are written in the transaction of the change they describe. */
export interface EventStore {
  insert(tx: Queryable, event: StoredEvent): Promise<void>;
  get(id: string): Promise<StoredEvent | null>;
  /** Forgets events that occurred before the given time. */
  prune(before: Date): Promise<number>;
  /** Forgets every event of an organisation whose data is being erased, in `tx`; returns how many went. */
  eraseForOrganization(tx: Queryable, organizationId: string): Promise<number>;
}

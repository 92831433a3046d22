import { z } from 'zod';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import type { Authenticator } from '../../core/identity/authenticator.ts';
import type { OrganizationEraser } from '../../core/kernel/organization-erasure.ts';
import { defineLongRunning, type LongRunningOperations } from '../../core/operations/long-running.ts';
import type { IdentityStoresFactory } from '../../core/ports/identity.ts';
import type { EventActor } from '../../core/ports/events.ts';
import type { QueueDefinition } from '../../core/jobs/queue-definitions.ts';
import { AccountStore } from './account-store.ts';
// Declares account.deleted (core/events/event-catalogue.ts).
import './account-events.ts';

/**
 * The deletion of an account, after its grace period: a durable job scheduled with `runAt` when an
 * owner asks (DELETE /client/account), so it survives restarts and runs on whichever replica is
 * free when it falls due. Retried for about a day if the database refuses it part-way.
 */
export const accountDeletion = defineLongRunning({
  kind: 'account.deletion',
  input: z.object({ organizationId: z.uuid() }),
  maxAttempts: 12,
  leaseMs: 120_000,
  backoff: { baseMs: 60_000, maxMs: 3 * 3_600_000 },
});

const DELETION_ACTOR: EventActor = { kind: 'system', id: 'account-deletion', label: 'Scheduled account deletion', credential: null };

interface Deps {
  longRunning: LongRunningOperations;
  identityFor: IdentityStoresFactory;
  /** Every plugin's eraser (core/kernel/organization-erasure.ts), this plugin's own included. */
  erasers: readonly OrganizationEraser[];
  events: DomainEvents;
  authenticator: Authenticator;
  clock: () => Date;
}

/**
 * Removes the organisation's data in one transaction: each plugin's rows (request logs, audit log,
 * guardrail rules, onboarding answers, …), then identity's (keys, projects, memberships, and the
 * people who belong nowhere else), then its other operations and its domain events. The organisation's row stays,
 * suspended, with the credit ledger and payments that name it: accounting records the law keeps.
 */
export function accountDeletionWorker({ longRunning, identityFor, erasers, events, authenticator, clock }: Deps): QueueDefinition {
  return longRunning.handle(accountDeletion, async ({ operation, input, complete }) => {
    const { organizationId } = input;
    const result = await complete(async (tx) => {
      const erased: Record<string, number> = {};
      for (const eraser of erasers) erased[eraser.name] = (erased[eraser.name] ?? 0) + (await eraser.erase(tx, organizationId));
      const identity = identityFor(tx);
      Object.assign(erased, await identity.organizations.eraseContents(organizationId));
      erased['operations'] = await longRunning.eraseForOrganization(tx, organizationId, [operation.id]);
      erased['events'] = await events.eraseForOrganization(tx, organizationId);
      // Nothing can sign in to it any more (no member is left); suspended says so to whatever reads the row.
      await identity.organizations.update(organizationId, { status: 'suspended' });
      await new AccountStore(tx).completeDeletion(operation.id, clock());
      await events.emit(tx, { type: 'account.deleted', organizationId, subject: organizationId, actor: DELETION_ACTOR, data: { operationId: operation.id, erased } });
      return { erased };
    });
    // Every replica forgets what it cached: keys made during the grace period, sessions acting here.
    await authenticator.invalidate({ kind: 'all' });
    return result;
  });
}

import { z } from 'zod';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import type { Authenticator } from '../../core/identity/authenticator.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { LongRunningOperations } from '../../core/operations/long-running.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import { UniqueViolation } from '../../core/ports/database.ts';
import type { ApiKey, IdentityStores, IdentityStoresFactory } from '../../core/ports/identity.ts';
import { keyEventData } from '../keys/key-events.ts';
import { accountDeletion } from './account-deletion.ts';
import { AccountStore } from './account-store.ts';
import { personCredential } from './caller.ts';
import { operationView, toOperationView } from './operation-view.ts';
// Declares the account.deletion_* events (core/events/event-catalogue.ts).
import './account-events.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './account-errors.ts';

interface Deps {
  identity: IdentityStores;
  identityFor: IdentityStoresFactory;
  longRunning: LongRunningOperations;
  authenticator: Authenticator;
  events: DomainEvents;
  clock: () => Date;
  /** `plugins.account.deletionGraceDays`, in milliseconds. */
  graceMs: number;
}

const deleteRequest = z.strictObject({
  confirm: z.string().max(500).describe("The organisation's exact name, as GET /client/whoami shows it under account.name"),
});

export function deletionOperations({ identity, identityFor, longRunning, authenticator, events, clock, graceMs }: Deps): AnyOperation[] {
  const graceDays = Math.round((graceMs / 86_400_000) * 100) / 100;

  const remove = defineOperation({
    name: 'account.delete',
    method: 'DELETE',
    path: '/account',
    summary: 'Delete the account: keys revoked now, data removed after a grace period',
    description:
      `An owner's act, confirmed by sending the organisation's exact name as \`confirm\`. Answers 202 with the operation that will remove the data (poll GET /client/operations/{id}): every API key of the organisation is revoked at once, on every replica, and the data is removed when the grace period (${graceDays} days here; \`plugins.account.deletionGraceDays\`) has passed, by a durable job that survives restarts. ` +
      'Until then the account is pending deletion: people still sign in, so an owner can cancel (POST /client/account/deletion/cancel); the revoked keys stay revoked. Keys created meanwhile are removed with the rest. ' +
      'What is removed: keys, projects and their members, memberships, the people who belong to no other organisation, request logs, the audit log, guardrail rules, onboarding answers and other operations. What is kept: the credit ledger and payments (accounting records the law requires to be kept) and the organisation’s name and id they refer to.',
    scope: null,
    ownerOnly: true,
    readOnly: false,
    destructive: true,
    wide: true,
    body: deleteRequest,
    status: 202,
    errors: ['account_not_found', 'confirmation_mismatch', 'deletion_already_scheduled'],
    output: operationView,
    async handler({ body }, { credential, transaction }) {
      const person = personCredential(credential);
      const organizationId = credential.organizationId;
      const organization = await identity.organizations.get(organizationId);
      if (!organization) throw new ApiError('account_not_found');
      if (body.confirm !== organization.name) throw new ApiError('confirmation_mismatch', undefined, { param: 'confirm' });
      const now = clock();
      const runsAt = new Date(now.getTime() + graceMs);
      const actor = actorOf(credential);
      const { operation, revoked } = await transaction(async (tx) => {
        const deletions = new AccountStore(tx);
        const scheduled = await deletions.scheduledDeletion(organizationId);
        if (scheduled) throw alreadyScheduled(scheduled.operationId);
        const started = await longRunning.start(tx, accountDeletion, { organizationId }, { organizationId, credential, runAt: runsAt });
        // Key revocation's own path (as DELETE /client/keys/{id}): the store, key.revoked, and each key dropped on every replica below.
        const keys = identityFor(tx).apiKeys;
        const revokedKeys: ApiKey[] = [];
        for (const key of await keys.list(organizationId)) {
          if (key.revokedAt !== null) continue;
          await keys.revoke(organizationId, key.id);
          revokedKeys.push(key);
          await events.emit(tx, { type: 'key.revoked', organizationId, subject: key.id, actor, data: { ...keyEventData(key), deleted: false } });
        }
        try {
          await deletions.scheduleDeletion({ operationId: started.id, organizationId, requestedByPersonId: person.personId, requestedAt: now, runsAt, revokedKeys: revokedKeys.length });
        } catch (error) {
          // Another owner's request committed first.
          if (error instanceof UniqueViolation) throw alreadyScheduled(null);
          throw error;
        }
        await events.emit(tx, {
          type: 'account.deletion_scheduled',
          organizationId,
          subject: organizationId,
          actor,
          data: { operationId: started.id, runsAt: runsAt.toISOString(), revokedKeys: revokedKeys.length },
        });
        return { operation: started, revoked: revokedKeys };
      });
      await Promise.all(revoked.map((key) => authenticator.invalidate({ kind: 'key', id: key.id })));
      return toOperationView(operation);
    },
  });

  const cancel = defineOperation({
    name: 'account.deletion.cancel',
    method: 'POST',
    path: '/account/deletion/cancel',
    summary: "Cancel the account's scheduled deletion",
    description:
      "An owner's act, while the grace period lasts. Answers the deletion's operation, now cancelled. The keys the deletion revoked stay revoked: create new ones. Once the removal has begun it can no longer be cancelled (409 `deletion_in_progress`).",
    scope: null,
    ownerOnly: true,
    readOnly: false,
    wide: true,
    errors: ['no_deletion_scheduled', 'deletion_in_progress'],
    output: operationView,
    async handler(_input, { credential, transaction }) {
      const person = personCredential(credential);
      const organizationId = credential.organizationId;
      const cancelled = await transaction(async (tx) => {
        const deletions = new AccountStore(tx);
        const scheduled = await deletions.scheduledDeletion(organizationId);
        if (!scheduled) throw new ApiError('no_deletion_scheduled');
        const outcome = await longRunning.cancel(tx, organizationId, scheduled.operationId, 'cancelled by an owner');
        if (!outcome.cancelled) throw new ApiError(outcome.reason === 'running' ? 'deletion_in_progress' : 'no_deletion_scheduled');
        await deletions.cancelDeletion(scheduled.operationId, person.personId, clock());
        await events.emit(tx, {
          type: 'account.deletion_cancelled',
          organizationId,
          subject: organizationId,
          actor: actorOf(credential),
          data: { operationId: scheduled.operationId },
        });
        return outcome.operation;
      });
      return toOperationView(cancelled);
    },
  });

  return [remove, cancel];
}

function alreadyScheduled(operationId: string | null): ApiError {
  const more = operationId ? `: operation ${operationId}; cancel it first with POST /client/account/deletion/cancel to schedule anew` : '';
  return new ApiError('deletion_already_scheduled', `This account’s deletion is already scheduled${more}`);
}

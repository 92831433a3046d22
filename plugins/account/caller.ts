import type { ConnectorCredential, Credential, SessionCredential } from '../../core/identity/credential.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { Authenticator } from '../../core/identity/authenticator.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './account-errors.ts';

/**
 * The person behind a credential (a session, or a connector acting for one), in an operation declared
 * `personOnly` (or `ownerOnly`): the kernel has refused API keys (403 `person_required`) before the handler.
 */
export function personCredential(credential: Credential): SessionCredential | ConnectorCredential {
  if (credential.kind === 'key') throw new Error('personCredential: the operation lets API keys in; declare it personOnly');
  return credential;
}

/** Who lists and hides progress items: the person, or the key itself. */
export function viewerOf(credential: Credential): string {
  return credential.kind === 'key' ? `key:${credential.keyId}` : `person:${credential.personId}`;
}

/**
 * Makes an organisation the one a person's sessions act in: only a session may (a key and a
 * connector are issued inside one organisation), only an organisation where the membership and
 * the organisation are both active. The session's cached credential is dropped on every replica.
 */
export async function chooseDefaultOrganization(
  deps: { identity: IdentityStores; authenticator: Authenticator },
  credential: Credential,
  organizationId: string,
  param: string,
): Promise<void> {
  if (credential.kind !== 'session') throw new ApiError('key_organization_fixed', undefined, { param });
  const membership = await deps.identity.memberships.get(organizationId, credential.personId);
  if (!membership) throw new ApiError('organization_not_found', `No organisation ${organizationId} among yours`, { param });
  if (membership.status !== 'active' || membership.organizationStatus !== 'active') throw new ApiError('organization_inactive', undefined, { param });
  await deps.identity.people.setDefaultOrganization(credential.personId, organizationId);
  await deps.authenticator.invalidate({ kind: 'session', id: credential.sessionId });
}

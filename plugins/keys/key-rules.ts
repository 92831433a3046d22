import type { Credential } from '../../core/credential.ts';
import { isOwner } from '../../core/credential.ts';
import { ApiError } from '../../core/errors.ts';
import { isManagementScope, type Scope } from '../../core/scopes.ts';
// Catalogues the codes this module answers with (core/error-catalogue.ts).
import './key-errors.ts';

/**
 * Granting a management scope needs an owner's session or a credential that already holds it;
 * `inference` is not a management scope and anyone who may write keys may grant it.
 */
export function assertNoEscalation(credential: Credential, requested: readonly Scope[]): void {
  if (isOwner(credential)) return;
  const beyond = requested.filter((scope) => isManagementScope(scope) && !credential.scopes.has(scope));
  if (beyond.length > 0) {
    throw new ApiError('scope_escalation', `Cannot grant scopes this credential does not hold: ${beyond.join(', ')}`, { param: 'scopes' });
  }
}

export function assertOwnerFor(credential: Credential, field: 'expiresAt' | 'spendCap' | 'rateLimits'): void {
  if (!isOwner(credential)) {
    const what = field === 'spendCap' ? 'a spend cap' : field === 'rateLimits' ? 'rate limits' : 'an expiry';
    throw new ApiError('owner_required', `Only an owner may set ${what} on a key`, { param: field });
  }
}

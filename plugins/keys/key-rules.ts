import type { Credential, KeyCredential } from '../../core/identity/credential.ts';
import { isOwner } from '../../core/identity/credential.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import type { ApiKey, KeyRateLimits, SpendCap } from '../../core/ports/identity.ts';
import { isManagementScope, type Scope } from '../../core/identity/scopes.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './key-errors.ts';

/*
 * A key only narrows. What an API key may do to keys, beyond what its scopes and project allow:
 * - it grants only scopes it holds itself (`inference` too) and only models it may use itself;
 * - a key it makes starts from its own restrictions (inheritedRestrictions) and cannot be given
 *   an expiry, spend cap or rate limits (owner only, as the spec says), so it is never wider;
 * - it cannot change its own restrictions (it may rename or pause itself);
 * - it resumes only keys that a key paused, never one a person paused.
 * The keys a key made also stay inside it after the fact: the authenticator narrows their scopes,
 * models and expiry by their makers' and refuses them when a maker is revoked or paused, and
 * admission applies their makers' caps and limits to their calls (core/identity/authenticator.ts,
 * plugins/metering/governed-admission.ts).
 */

/**
 * Granting a management scope needs an owner's session or a credential that already holds it;
 * `inference` is not a management scope and any person who may write keys may grant it, but a key
 * grants only what it holds.
 */
export function assertNoEscalation(credential: Credential, requested: readonly Scope[], param = 'scopes'): void {
  if (isOwner(credential)) return;
  const beyond = requested.filter((scope) => (credential.kind === 'key' || isManagementScope(scope)) && !credential.scopes.has(scope));
  if (beyond.length > 0) {
    throw new ApiError('scope_escalation', `Cannot grant scopes this credential does not hold: ${beyond.join(', ')}`, { param });
  }
}

export function assertOwnerFor(credential: Credential, field: 'expiresAt' | 'spendCap' | 'rateLimits'): void {
  if (!isOwner(credential)) {
    const what = field === 'spendCap' ? 'a spend cap' : field === 'rateLimits' ? 'rate limits' : 'an expiry';
    throw new ApiError('owner_required', `Only an owner may set ${what} on a key`, { param: field });
  }
}

/** A key may give a key only models it may use itself, and "every model" only when it has no list. */
export function assertModelsWithin(credential: Credential, models: readonly string[] | null, param = 'models'): void {
  if (credential.kind !== 'key' || credential.modelAllowList === null) return;
  const allowed = credential.modelAllowList;
  if (models === null) {
    throw new ApiError('limit_escalation', 'An API key limited to some models cannot give a key every model', { param });
  }
  const beyond = models.filter((model) => !allowed.has(model));
  if (beyond.length > 0) {
    throw new ApiError('limit_escalation', `An API key cannot give a key models it may not use itself: ${beyond.join(', ')}`, { param });
  }
}

export interface Restrictions {
  modelAllowList: string[] | null;
  expiresAt: Date | null;
  spendCap: SpendCap | null;
  rateLimits: KeyRateLimits;
}

/**
 * What a key made by `maker` starts with: the maker's model list (as narrowed by its project and
 * makers), its expiry (the earliest up its chain), and, field by field, the nearest spend cap and
 * rate limits up its chain. The makers' own caps and limits still count the new key's calls; these
 * copies make the new key's record show what bounds it.
 */
export function inheritedRestrictions(maker: KeyCredential): Restrictions {
  const chain = [{ spendCap: maker.spendCap, rateLimits: maker.rateLimits }, ...maker.ancestors];
  const nearest = <T>(pick: (link: (typeof chain)[number]) => T | null): T | null => {
    for (const link of chain) {
      const value = pick(link);
      if (value !== null) return value;
    }
    return null;
  };
  return {
    modelAllowList: maker.modelAllowList === null ? null : [...maker.modelAllowList].sort(),
    expiresAt: maker.expiresAt,
    spendCap: nearest((link) => link.spendCap),
    rateLimits: {
      requestsPerMinute: nearest((link) => link.rateLimits.requestsPerMinute),
      tokensPerMinute: nearest((link) => link.rateLimits.tokensPerMinute),
      concurrency: nearest((link) => link.rateLimits.concurrency),
    },
  };
}

/** The fields of an update that restrict a key, which a key may not change on itself. */
const OWN_RESTRICTIONS = ['scopes', 'models', 'expiresAt', 'spendCap', 'rateLimits'] as const;

export function assertNotOwnRestrictions(credential: Credential, key: ApiKey, body: Partial<Record<(typeof OWN_RESTRICTIONS)[number], unknown>>): void {
  if (credential.kind !== 'key' || credential.keyId !== key.id) return;
  const changed = OWN_RESTRICTIONS.find((field) => body[field] !== undefined);
  if (changed) throw new ApiError('key_cannot_change_itself', undefined, { param: changed });
}

/**
 * Pausing is recorded with who paused; a key resumes only a key that a key paused (a key paused
 * before pauses were recorded counts as paused by a person).
 */
export function assertMayResume(credential: Credential, key: ApiKey): void {
  if (credential.kind !== 'key' || !key.disabled || key.disabledBy?.kind === 'key') return;
  throw new ApiError('paused_by_person', undefined, { param: 'disabled' });
}

/**
 * Recreating a key hands the caller its new secret, so it gives the caller the whole key, and the
 * caller must be one who could have made it:
 * - itself, or a key it made (transitively; `makerIds` is the key's chain of makers): always, since
 *   those stay inside it at every use whatever their own records say;
 * - any other key of its reach: only one whose scopes and models it could grant (as for create and
 *   update), and only when it has no expiry, spend cap or rate limits of its own or up its chain
 *   (inheritedRestrictions): a key that is bounded could otherwise take a secret that outlives or
 *   outspends it;
 * - a person: the scopes rule of a grant (management scopes need the holder or an owner).
 */
export function assertMayRecreate(credential: Credential, key: ApiKey, makerIds: readonly string[]): void {
  if (credential.kind === 'key' && (key.id === credential.keyId || makerIds.includes(credential.keyId))) return;
  assertNoEscalation(credential, key.scopes, 'id');
  assertModelsWithin(credential, key.modelAllowList, 'id');
  if (credential.kind === 'key' && isBounded(credential)) {
    throw new ApiError('limit_escalation', 'An API key with an expiry, a spend cap or rate limits may recreate only itself and the keys it made', {
      param: 'id',
    });
  }
}

function isBounded(credential: KeyCredential): boolean {
  const { expiresAt, spendCap, rateLimits } = inheritedRestrictions(credential);
  return expiresAt !== null || spendCap !== null || Object.values(rateLimits).some((limit) => limit !== null);
}

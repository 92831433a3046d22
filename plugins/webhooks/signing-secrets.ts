import type { SecretOwner } from '../../core/ports/secrets.ts';
import type { SecretValue, SecretVault } from '../../core/services/secret-vault.ts';
import type { WebhookEndpoint } from './endpoint-store.ts';
import { generateSigningSecret } from './signing.ts';

/**
 * An endpoint's signing secrets in the secret vault: the current one, and during a rotation's
 * overlap the previous one, which signs too until `previous_secret_expires_at`.
 */
const CURRENT = 'signing_secret';
const PREVIOUS = 'previous_signing_secret';

const OWNER_KIND = 'webhook';
const ownerOf = (endpointId: string): SecretOwner => ({ kind: OWNER_KIND, id: endpointId });

/** A new endpoint's secret, stored through `vault` (the creating transaction's); returned to show once. */
export async function storeNewSecret(vault: SecretVault, endpointId: string): Promise<string> {
  const secret = generateSigningSecret();
  await vault.put(ownerOf(endpointId), CURRENT, secret);
  return secret;
}

/**
 * Replaces the current secret with a new one; with an overlap the current one becomes the previous
 * one (signing alongside until the endpoint's `previous_secret_expires_at`), without one any
 * previous secret is forgotten at once. Returns the new secret, to show once.
 */
export async function rotateSecret(vault: SecretVault, endpointId: string, keepPrevious: boolean): Promise<string> {
  const owner = ownerOf(endpointId);
  if (keepPrevious) {
    const current = await vault.get(owner, CURRENT);
    if (current) await vault.put(owner, PREVIOUS, current.value);
  } else {
    await vault.delete(owner, PREVIOUS);
  }
  const secret = generateSigningSecret();
  await vault.put(owner, CURRENT, secret);
  return secret;
}

/** The secrets that sign an attempt at `now`: the current one first, then the previous one while its overlap lasts. */
export async function signingSecrets(vault: SecretVault, endpoint: WebhookEndpoint, now: Date): Promise<SecretValue[]> {
  const owner = ownerOf(endpoint.id);
  const current = await vault.get(owner, CURRENT);
  if (!current) throw new Error(`webhook endpoint ${endpoint.id} has no signing secret`);
  const overlapping = endpoint.previousSecretExpiresAt !== null && endpoint.previousSecretExpiresAt > now;
  const previous = overlapping ? await vault.get(owner, PREVIOUS) : null;
  return previous ? [current.value, previous.value] : [current.value];
}

export async function forgetSecrets(vault: SecretVault, endpointId: string): Promise<void> {
  await vault.delete(ownerOf(endpointId), CURRENT);
  await vault.delete(ownerOf(endpointId), PREVIOUS);
}

/** Every signing secret of these endpoints, through `vault` (the transaction erasing them); returns how many went. */
export function forgetSecretsOf(vault: SecretVault, endpointIds: readonly string[]): Promise<number> {
  return vault.deleteOwners(OWNER_KIND, endpointIds);
}

import type { SecretOwner } from '../../core/ports/secrets.ts';
import type { SecretVault } from '../../core/services/secret-vault.ts';
import type { Upstream } from './upstream-store.ts';

/** An upstream's header value in the secret vault: sent to the server, never returned, logged or shown. */
const OWNER_KIND = 'mcp_upstream';
const HEADER_VALUE = 'auth_header_value';
const ownerOf = (upstreamId: string): SecretOwner => ({ kind: OWNER_KIND, id: upstreamId });

export async function storeHeaderValue(vault: SecretVault, upstreamId: string, value: string): Promise<void> {
  await vault.put(ownerOf(upstreamId), HEADER_VALUE, value);
}

export async function forgetHeaderValue(vault: SecretVault, upstreamId: string): Promise<void> {
  await vault.delete(ownerOf(upstreamId), HEADER_VALUE);
}

/** The headers an upstream's requests carry: its own credential, read now (never the agent's). */
export async function upstreamHeaders(vault: SecretVault, upstream: Upstream): Promise<Record<string, string>> {
  if (upstream.auth.type !== 'header') return {};
  const stored = await vault.get(ownerOf(upstream.id), HEADER_VALUE);
  if (!stored) throw new Error(`MCP upstream ${upstream.id} has no stored header value`);
  return { [upstream.auth.name]: stored.value.reveal() };
}

/** Every header value of these upstreams, through `vault` (the transaction erasing them). */
export function forgetHeaderValuesOf(vault: SecretVault, upstreamIds: readonly string[]): Promise<number> {
  return vault.deleteOwners(OWNER_KIND, upstreamIds);
}

import type { SecretOwner } from '../../core/ports/secrets.ts';
import type { SecretVault } from '../../core/services/secret-vault.ts';
import type { UpstreamOAuth } from './upstream-oauth.ts';
import type { Upstream } from './upstream-store.ts';

/** An upstream's header value in the secret vault: sent to the server, never returned, logged or shown. */
const OWNER_KIND = 'mcp_upstream';
const HEADER_VALUE = 'auth_header_value';
const ownerOf = (upstreamId: string): SecretOwner => ({ kind: OWNER_KIND, id: upstreamId });

/** What makes an upstream's credential: the vault (header values) and the OAuth client (tokens, refreshed when due). */
export interface UpstreamCredentials {
  vault: SecretVault;
  oauth: UpstreamOAuth;
}

export async function storeHeaderValue(vault: SecretVault, upstreamId: string, value: string): Promise<void> {
  await vault.put(ownerOf(upstreamId), HEADER_VALUE, value);
}

export async function forgetHeaderValue(vault: SecretVault, upstreamId: string): Promise<void> {
  await vault.delete(ownerOf(upstreamId), HEADER_VALUE);
}

/**
 * The headers an upstream's requests carry: its own credential, read now (never the agent's). An
 * OAuth upstream's bearer is refreshed first when it is about to expire; one nobody signed in to,
 * or whose sign-in the server refused, throws ApiError `upstream_oauth_not_connected` or
 * `upstream_needs_sign_in` (`upstream_oauth_unavailable` when its server could not refresh).
 */
export async function upstreamHeaders(credentials: UpstreamCredentials, upstream: Upstream): Promise<Record<string, string>> {
  if (upstream.auth.type === 'oauth') return { Authorization: `Bearer ${await credentials.oauth.accessToken(upstream)}` };
  if (upstream.auth.type !== 'header') return {};
  const stored = await credentials.vault.get(ownerOf(upstream.id), HEADER_VALUE);
  if (!stored) throw new Error(`MCP upstream ${upstream.id} has no stored header value`);
  return { [upstream.auth.name]: stored.value.reveal() };
}

/** Every secret of these upstreams (header value, OAuth tokens, registered client), through `vault` (the transaction erasing them). */
export function forgetHeaderValuesOf(vault: SecretVault, upstreamIds: readonly string[]): Promise<number> {
  return vault.deleteOwners(OWNER_KIND, upstreamIds);
}

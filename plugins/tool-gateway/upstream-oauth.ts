import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { AuthorizationServerMetadata, OAuthClientInformation, OAuthProtectedResourceMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { type FetchLike, outboundFetch } from '../../core/net/outbound-fetch.ts';
import { type OutboundHttpClient, OutboundHttpError } from '../../core/net/outbound-http-client.ts';
import type { Database, Queryable } from '../../core/ports/database.ts';
import type { SecretOwner } from '../../core/ports/secrets.ts';
import type { SecretVault } from '../../core/services/secret-vault.ts';
import { type McpOAuthSdk, mcpOAuthSdk } from './mcp-client-sdk.ts';
import type { OAuthAppStore } from './oauth-app-store.ts';
import type { ToolGatewayConfig } from './tool-gateway-config.ts';
import type { OAuthConnection, OAuthFlow, UpstreamOAuthStore } from './upstream-oauth-store.ts';
import type { Upstream } from './upstream-store.ts';

/** Where authorization servers send the browser back: public, checked by `state` alone. */
export const CALLBACK_PATH = '/client/mcp/oauth/callback';

// Vault names: tokens and a registered client's secret under the upstream, an app's secret under
// the app, a sign-in's PKCE verifier under its flow.
const UPSTREAM_KIND = 'mcp_upstream';
const ACCESS_TOKEN = 'oauth_access_token';
const REFRESH_TOKEN = 'oauth_refresh_token';
const REGISTERED_SECRET = 'oauth_client_secret';
export const APP_KIND = 'mcp_oauth_app';
export const APP_SECRET = 'client_secret';
export const FLOW_KIND = 'mcp_oauth_flow';
const VERIFIER = 'code_verifier';
const upstreamOwner = (id: string): SecretOwner => ({ kind: UPSTREAM_KIND, id });
const flowOwner = (id: string): SecretOwner => ({ kind: FLOW_KIND, id });

/**
 * A claim on a refresh outlives the token request by far (its total deadline is TOKEN_TIMEOUT_MS):
 * a claim that lapsed while its holder still waited for the answer would let a second replica send
 * the same refresh token.
 */
const TOKEN_TIMEOUT_MS = 15_000;
const CLAIM_MS = 60_000;
/** How long a caller waits for another replica's refresh of an expired token, and how often it looks. */
const WAIT_FOR_REFRESH_MS = 20_000;
const POLL_MS = 50;
const MAX_METADATA_BYTES = 256 * 1024;

export const stateHash = (state: string) => createHash('sha256').update(state).digest('hex');

export interface UpstreamOAuthDeps {
  database: Database;
  apps: OAuthAppStore;
  connections: UpstreamOAuthStore;
  vault: SecretVault;
  http: OutboundHttpClient;
  events: DomainEvents;
  clock: () => Date;
  config: ToolGatewayConfig;
  /** `server.publicUrl`: the callback's origin (authorization servers must reach the browser back to us). */
  publicUrl: string | undefined;
}

export interface StartedSignIn {
  authorizationUrl: string;
  state: string;
  expiresAt: Date;
  redirectUri: string;
}

/** A callback's outcome, for its page: the upstream signed in, or why not (in our words). */
export type CallbackOutcome = { ok: true; upstreamId: string } | { ok: false; upstreamId: string | null; code: string; message: string };

/**
 * The gateway as the OAuth client of customers' MCP servers: finding the authorization server
 * (RFC 9728, then RFC 8414 / OpenID discovery), registering a client (RFC 7591) unless the
 * upstream uses the customer's own app, the authorization code flow with PKCE, and tokens kept in
 * the vault and refreshed ahead of expiry. Every request goes through the guarded outbound client;
 * the SDK's client auth helpers do the protocol over its fetch.
 */
export class UpstreamOAuth {
  constructor(private readonly deps: UpstreamOAuthDeps) {}

  /** The fetch every OAuth request goes through: guarded, no redirect followed, small answers, short deadlines. */
  private fetch(): FetchLike {
    return outboundFetch(this.deps.http, { headersTimeoutMs: TOKEN_TIMEOUT_MS, idleTimeoutMs: TOKEN_TIMEOUT_MS, totalTimeoutMs: TOKEN_TIMEOUT_MS, maxResponseBytes: MAX_METADATA_BYTES });
  }

  redirectUri(): string {
    if (!this.deps.publicUrl) throw new ApiError('oauth_public_url_missing');
    return new URL(CALLBACK_PATH, this.deps.publicUrl).href;
  }

  /** Begins a sign-in: where the person's browser goes, and the state the callback and status are found by. */
  async start(upstream: Upstream, startedBy: string): Promise<StartedSignIn> {
    const oauth = await mcpOAuthSdk();
    const auth = upstream.auth;
    if (auth.type !== 'oauth') throw new ApiError('upstream_not_oauth', undefined, { param: 'id' });
    const redirectUri = this.redirectUri();
    const { clock, connections, database, vault } = this.deps;
    const server = auth.oauthAppId !== null ? await this.appServer(upstream, auth.oauthAppId) : await this.discoveredServer(upstream, redirectUri);
    const scopes = auth.scopes ?? server.defaultScopes;
    const state = randomBytes(32).toString('base64url');
    let started: { authorizationUrl: URL; codeVerifier: string };
    try {
      started = await oauth.startAuthorization(server.issuer, {
        metadata: server.metadata,
        clientInformation: server.client,
        redirectUrl: redirectUri,
        state,
        ...(scopes && scopes.length > 0 ? { scope: scopes.join(' ') } : {}),
        ...(server.resource ? { resource: server.resource } : {}),
      });
    } catch (error) {
      throw new ApiError('oauth_discovery_failed', `The authorization server ${originOf(server.issuer)} cannot start a sign-in: ${ourWords(oauth, error)}`, { cause: error });
    }
    // The person's browser goes there, not us; still, a private address is no place to send them.
    await this.checkUrl(started.authorizationUrl);
    const now = clock();
    const expiresAt = new Date(now.getTime() + this.deps.config.oauthSignInTtlMs);
    await database.transaction(async (tx) => {
      await connections.choose(
        tx,
        upstream.id,
        upstream.organizationId,
        {
          issuer: server.issuer,
          metadata: server.metadata,
          resource: server.resource,
          oauthAppId: server.oauthAppId,
          registeredClientId: server.registeredClientId,
          registeredRedirectUri: server.registeredClientId === null ? null : redirectUri,
        },
        now,
      );
      if (server.registeredSecret !== undefined) {
        const scoped = vault.within(tx);
        if (server.registeredSecret === null) await scoped.delete(upstreamOwner(upstream.id), REGISTERED_SECRET);
        else await scoped.put(upstreamOwner(upstream.id), REGISTERED_SECRET, server.registeredSecret);
      }
      const id = randomUUID();
      await connections.createFlow(tx, {
        id,
        stateHash: stateHash(state),
        organizationId: upstream.organizationId,
        upstreamId: upstream.id,
        startedBy,
        redirectUri,
        expiresAt,
        createdAt: now,
      });
      await vault.within(tx).put(flowOwner(id), VERIFIER, started.codeVerifier);
    });
    return { authorizationUrl: started.authorizationUrl.href, state, expiresAt, redirectUri };
  }

  private async checkUrl(url: URL): Promise<void> {
    try {
      await this.deps.http.check(url);
    } catch (error) {
      if (error instanceof OutboundHttpError && error.kind === 'refused_address') throw new ApiError('oauth_url_refused', `${url.origin}: ${error.message}`);
      // A name that does not resolve is the browser's business; the token request will be guarded again.
      if (!(error instanceof OutboundHttpError)) throw error;
    }
  }

  /** The customer's own app: its authorization server's metadata, and the MCP server's resource when it names that server. */
  private async appServer(upstream: Upstream, appId: string) {
    const oauth = await mcpOAuthSdk();
    const app = await this.deps.apps.get(upstream.organizationId, appId);
    if (!app) throw new ApiError('oauth_app_not_found', `No OAuth app ${appId}`, { param: 'id' });
    const fetchFn = this.fetch();
    const metadata = await this.metadataOf(app.authorizationServerUrl, fetchFn);
    const resourceMetadata = await oauth.discoverOAuthProtectedResourceMetadata(upstream.url, {}, fetchFn).catch(() => undefined);
    const namesApp = resourceMetadata?.authorization_servers?.some((each) => sameUrl(each, app.authorizationServerUrl)) ?? false;
    const secret = app.hasClientSecret ? await this.deps.vault.get({ kind: APP_KIND, id: app.id }, APP_SECRET) : null;
    const client: OAuthClientInformation = { client_id: app.clientId, ...(secret ? { client_secret: secret.value.reveal() } : {}) };
    return {
      issuer: app.authorizationServerUrl,
      metadata,
      resource: namesApp ? this.resourceOf(oauth, upstream, resourceMetadata) : null,
      oauthAppId: app.id,
      registeredClientId: null,
      registeredSecret: undefined as string | null | undefined,
      client,
      defaultScopes: app.scopes ?? resourceMetadata?.scopes_supported ?? null,
    };
  }

  /** No app: the server's protected resource metadata names the authorization server, where a client is registered once. */
  private async discoveredServer(upstream: Upstream, redirectUri: string) {
    const oauth = await mcpOAuthSdk();
    const fetchFn = this.fetch();
    const origin = originOf(upstream.url);
    let info: Awaited<ReturnType<McpOAuthSdk['discoverOAuthServerInfo']>>;
    try {
      info = await oauth.discoverOAuthServerInfo(upstream.url, { fetchFn });
    } catch (error) {
      throw new ApiError('oauth_discovery_failed', `${origin} did not say where to sign in: ${ourWords(oauth, error)}`, { cause: error });
    }
    const metadata = info.authorizationServerMetadata;
    if (!metadata) throw new ApiError('oauth_discovery_failed', `${originOf(info.authorizationServerUrl)} publishes no OAuth authorization server metadata`);
    const issuer = info.authorizationServerUrl;
    const resource = this.resourceOf(oauth, upstream, info.resourceMetadata);
    const known = await this.deps.connections.get(upstream.id);
    const reusable = known !== null && known.oauthAppId === null && known.registeredClientId !== null && sameUrl(known.issuer, issuer) && known.registeredRedirectUri === redirectUri;
    let client: OAuthClientInformation;
    let registeredSecret: string | null | undefined;
    if (reusable) {
      const secret = await this.deps.vault.get(upstreamOwner(upstream.id), REGISTERED_SECRET);
      client = { client_id: known.registeredClientId as string, ...(secret ? { client_secret: secret.value.reveal() } : {}) };
    } else {
      if (!metadata.registration_endpoint)
        throw new ApiError(
          'oauth_registration_unsupported',
          `${originOf(issuer)} does not register clients dynamically; register an OAuth app there and create it with POST /mcp/oauth-apps`,
        );
      try {
        const registered = await oauth.registerClient(issuer, {
          metadata,
          clientMetadata: { redirect_uris: [redirectUri], client_name: 'MCP tool gateway', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'] },
          ...(upstream.auth.type === 'oauth' && upstream.auth.scopes ? { scope: upstream.auth.scopes.join(' ') } : {}),
          fetchFn,
        });
        client = { client_id: registered.client_id, ...(registered.client_secret ? { client_secret: registered.client_secret } : {}) };
        registeredSecret = registered.client_secret ?? null;
      } catch (error) {
        throw new ApiError('oauth_registration_failed', `${originOf(issuer)} refused to register the gateway as a client: ${ourWords(oauth, error)}`, { cause: error });
      }
    }
    return { issuer, metadata, resource, oauthAppId: null, registeredClientId: client.client_id, registeredSecret, client, defaultScopes: info.resourceMetadata?.scopes_supported ?? null };
  }

  private async metadataOf(issuer: string, fetchFn: FetchLike): Promise<AuthorizationServerMetadata> {
    const oauth = await mcpOAuthSdk();
    let metadata: AuthorizationServerMetadata | undefined;
    try {
      metadata = await oauth.discoverAuthorizationServerMetadata(issuer, { fetchFn });
    } catch (error) {
      throw new ApiError('oauth_discovery_failed', `${originOf(issuer)} answered no usable OAuth metadata: ${ourWords(oauth, error)}`, { cause: error });
    }
    if (!metadata) throw new ApiError('oauth_discovery_failed', `${originOf(issuer)} publishes no OAuth authorization server metadata`);
    return metadata;
  }

  /** The resource indicator (RFC 8707) the server's metadata names, if it is the upstream's URL or a parent of it. */
  private resourceOf(oauth: McpOAuthSdk, upstream: Upstream, metadata: OAuthProtectedResourceMetadata | undefined): string | null {
    if (!metadata?.resource) return null;
    return oauth.checkResourceAllowed({ requestedResource: upstream.url, configuredResource: metadata.resource }) ? metadata.resource : null;
  }

  /** The client a connection signs in with: the app's or the registered one, secret from the vault. */
  private async clientOf(connection: OAuthConnection): Promise<OAuthClientInformation> {
    if (connection.oauthAppId !== null) {
      const app = await this.deps.apps.get(connection.organizationId, connection.oauthAppId);
      if (!app) throw new ApiError('upstream_needs_sign_in', 'The OAuth app this upstream signed in with is gone; sign in again');
      const secret = app.hasClientSecret ? await this.deps.vault.get({ kind: APP_KIND, id: app.id }, APP_SECRET) : null;
      return { client_id: app.clientId, ...(secret ? { client_secret: secret.value.reveal() } : {}) };
    }
    const secret = await this.deps.vault.get(upstreamOwner(connection.upstreamId), REGISTERED_SECRET);
    return { client_id: connection.registeredClientId as string, ...(secret ? { client_secret: secret.value.reveal() } : {}) };
  }

  /**
   * The authorization server sent the browser back: takes the sign-in (once), exchanges the code
   * with its PKCE verifier, and stores the tokens. An error the server sent (access_denied and the like) is
   * recorded on the sign-in, for its status.
   */
  async complete(query: Record<string, unknown>): Promise<CallbackOutcome> {
    const oauth = await mcpOAuthSdk();
    const { clock, connections, database, vault } = this.deps;
    const state = typeof query.state === 'string' ? query.state : '';
    const flow = state === '' ? null : await connections.takeFlow(stateHash(state), clock());
    if (!flow) return { ok: false, upstreamId: null, code: 'unknown_sign_in', message: 'This sign-in is unknown, finished already or expired. Start it again from the gateway.' };
    const fail = async (code: string, message: string): Promise<CallbackOutcome> => {
      await database.transaction(async (tx) => {
        await connections.finishFlow(tx, flow.id, { status: 'failed', code, message }, clock());
        await vault.within(tx).delete(flowOwner(flow.id), VERIFIER);
      });
      return { ok: false, upstreamId: flow.upstreamId, code, message };
    };
    if (typeof query.error === 'string') {
      const code = /^[a-z_]{1,64}$/.test(query.error) ? query.error : 'authorization_error';
      const description = typeof query.error_description === 'string' ? ` (${query.error_description.slice(0, 300)})` : '';
      return fail(code, `The authorization server answered ${code}${description}`);
    }
    const code = typeof query.code === 'string' ? query.code : '';
    if (code === '') return fail('invalid_callback', 'The authorization server sent back neither a code nor an error');
    const connection = await connections.get(flow.upstreamId);
    const verifier = await vault.get(flowOwner(flow.id), VERIFIER);
    if (!connection || !verifier) return fail('unknown_sign_in', 'This upstream changed its authentication since the sign-in started. Start it again.');
    let tokens: OAuthTokens;
    try {
      tokens = await oauth.exchangeAuthorization(connection.issuer, {
        metadata: connection.metadata,
        clientInformation: await this.clientOf(connection),
        authorizationCode: code,
        codeVerifier: verifier.value.reveal(),
        redirectUri: flow.redirectUri,
        ...(connection.resource ? { resource: connection.resource } : {}),
        fetchFn: this.fetch(),
      });
    } catch (error) {
      return fail(
        error instanceof oauth.OAuthError ? error.errorCode : 'token_exchange_failed',
        `${originOf(connection.issuer)} did not exchange the code for tokens: ${ourWords(oauth, error)}`,
      );
    }
    await database.transaction(async (tx) => {
      const now = clock();
      await this.storeTokens(vault.within(tx), flow.upstreamId, tokens);
      await connections.connect(tx, flow.upstreamId, this.grantOf(tokens, now), now);
      await connections.finishFlow(tx, flow.id, { status: 'connected' }, now);
      await vault.within(tx).delete(flowOwner(flow.id), VERIFIER);
    });
    return { ok: true, upstreamId: flow.upstreamId };
  }

  private grantOf(tokens: OAuthTokens, now: Date) {
    return { expiresAt: tokens.expires_in === undefined ? null : new Date(now.getTime() + tokens.expires_in * 1000), scopes: tokens.scope ?? null };
  }

  private async storeTokens(vault: SecretVault, upstreamId: string, tokens: OAuthTokens): Promise<void> {
    await vault.put(upstreamOwner(upstreamId), ACCESS_TOKEN, tokens.access_token);
    // A refresh that gives no new refresh token leaves the one there (the server does not rotate).
    if (tokens.refresh_token) await vault.put(upstreamOwner(upstreamId), REFRESH_TOKEN, tokens.refresh_token);
  }

  async flowByState(state: string): Promise<OAuthFlow | null> {
    return this.deps.connections.flowByState(stateHash(state));
  }

  /**
   * The access token to send now, refreshed first when it expires within the margin. Refreshing is
   * a compare-and-swap: one caller (on any replica) claims the current token version, asks the
   * token endpoint once, and stores the new tokens as the next version; the others keep using the
   * token while it is valid, or wait for that next version. So a rotating refresh token is sent
   * once, never twice (servers that detect reuse revoke the whole grant).
   */
  async accessToken(upstream: Upstream): Promise<string> {
    const { clock, connections } = this.deps;
    const waitUntil = performance.now() + WAIT_FOR_REFRESH_MS;
    for (;;) {
      const connection = await connections.get(upstream.id);
      if (!connection || connection.status === 'not_connected') throw new ApiError('upstream_oauth_not_connected');
      if (connection.status === 'needs_sign_in')
        throw new ApiError('upstream_needs_sign_in', `Sign in to ${upstream.name} again: ${connection.statusReason ?? 'its authorization server refused the refresh'}`);
      const now = clock();
      const expiresAt = connection.expiresAt?.getTime() ?? Number.POSITIVE_INFINITY;
      const stillValid = expiresAt > now.getTime();
      if (expiresAt - this.deps.config.oauthRefreshMarginMs > now.getTime()) return this.storedAccessToken(upstream.id);
      if (await connections.claimRefresh(upstream.id, connection.tokenVersion, now, new Date(now.getTime() + CLAIM_MS))) {
        const refreshed = await this.refresh(upstream, connection);
        if (refreshed !== null) return refreshed;
        continue;
      }
      // Another caller refreshes this version now: its token is good meanwhile, or its next version comes soon.
      if (stillValid) return this.storedAccessToken(upstream.id);
      if (performance.now() > waitUntil) throw new ApiError('upstream_oauth_unavailable', `The refresh of ${upstream.name}'s access token took too long`);
      await delay(POLL_MS);
    }
  }

  private async storedAccessToken(upstreamId: string): Promise<string> {
    const stored = await this.deps.vault.get(upstreamOwner(upstreamId), ACCESS_TOKEN);
    if (!stored) throw new ApiError('upstream_oauth_not_connected');
    return stored.value.reveal();
  }

  /** The claimed refresh: the new access token, or null when the version moved on meanwhile (read again). */
  private async refresh(upstream: Upstream, connection: OAuthConnection): Promise<string | null> {
    const oauth = await mcpOAuthSdk();
    const { clock, connections, database, vault } = this.deps;
    const version = connection.tokenVersion;
    const refreshToken = await vault.get(upstreamOwner(upstream.id), REFRESH_TOKEN);
    if (!refreshToken) {
      if ((connection.expiresAt?.getTime() ?? 0) > clock().getTime()) {
        await connections.releaseClaim(upstream.id, version);
        return this.storedAccessToken(upstream.id);
      }
      await this.markNeedsSignIn(upstream, version, 'the access token expired and the server gave no refresh token');
      throw new ApiError('upstream_needs_sign_in', `Sign in to ${upstream.name} again: its access token expired`);
    }
    let tokens: OAuthTokens;
    try {
      tokens = await oauth.refreshAuthorization(connection.issuer, {
        metadata: connection.metadata,
        clientInformation: await this.clientOf(connection),
        refreshToken: refreshToken.value.reveal(),
        ...(connection.resource ? { resource: connection.resource } : {}),
        fetchFn: this.fetch(),
      });
    } catch (error) {
      if (error instanceof oauth.InvalidGrantError || error instanceof oauth.InvalidClientError || error instanceof oauth.UnauthorizedClientError) {
        const reason = `${originOf(connection.issuer)} refused the refresh (${error.errorCode})`;
        await this.markNeedsSignIn(upstream, version, reason);
        throw new ApiError('upstream_needs_sign_in', `Sign in to ${upstream.name} again: ${reason}`);
      }
      // A passing failure (the server unreachable, a 5xx): the claim is given back for the next caller.
      await connections.releaseClaim(upstream.id, version);
      if ((connection.expiresAt?.getTime() ?? 0) > clock().getTime()) return this.storedAccessToken(upstream.id);
      throw new ApiError('upstream_oauth_unavailable', `${originOf(connection.issuer)} did not refresh the access token: ${ourWords(oauth, error)}`, { cause: error });
    }
    const stored = await database
      .transaction(async (tx) => {
        const now = clock();
        await this.storeTokens(vault.within(tx), upstream.id, tokens);
        // Signed in again or disconnected while the server was asked: these tokens are not the current ones.
        if (!(await connections.refreshed(tx, upstream.id, version, this.grantOf(tokens, now), now))) throw new VersionMoved();
        return true;
      })
      .catch((error: unknown) => {
        if (error instanceof VersionMoved) return false;
        throw error;
      });
    return stored ? tokens.access_token : null;
  }

  private async markNeedsSignIn(upstream: Upstream, version: number, reason: string): Promise<void> {
    const { clock, connections, database, events } = this.deps;
    await database.transaction(async (tx) => {
      if (!(await connections.needsSignIn(tx, upstream.id, version, reason, clock()))) return;
      await events.emit(tx, {
        type: 'mcp.upstream.needs_sign_in',
        organizationId: upstream.organizationId,
        subject: upstream.id,
        actor: null,
        data: { upstreamId: upstream.id, projectId: upstream.projectId, name: upstream.name, slug: upstream.slug, origin: originOf(upstream.url), reason },
      });
    });
  }

  /** Forgets the tokens; revokes the refresh token first where the server offers revocation (RFC 7009), best effort. */
  async disconnect(upstream: Upstream): Promise<{ revoked: boolean }> {
    const { clock, connections, database, vault } = this.deps;
    const connection = await connections.get(upstream.id);
    if (!connection) return { revoked: false };
    const revoked = await this.revoke(connection).catch(() => false);
    await database.transaction(async (tx) => {
      await vault.within(tx).delete(upstreamOwner(upstream.id), ACCESS_TOKEN);
      await vault.within(tx).delete(upstreamOwner(upstream.id), REFRESH_TOKEN);
      await connections.disconnect(tx, upstream.id, clock());
    });
    return { revoked };
  }

  private async revoke(connection: OAuthConnection): Promise<boolean> {
    // OIDC discovery documents do not type it; RFC 8414's do (RFC 7009's endpoint).
    const endpoint = (connection.metadata as { revocation_endpoint?: string }).revocation_endpoint;
    if (!endpoint || connection.status === 'not_connected') return false;
    const token = (await this.deps.vault.get(upstreamOwner(connection.upstreamId), REFRESH_TOKEN)) ?? (await this.deps.vault.get(upstreamOwner(connection.upstreamId), ACCESS_TOKEN));
    if (!token) return false;
    const client = await this.clientOf(connection);
    const body = new URLSearchParams({ token: token.value.reveal(), client_id: client.client_id });
    if (client.client_secret) body.set('client_secret', client.client_secret);
    const answer = await this.fetch()(endpoint, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' }, body });
    await answer.body?.cancel();
    return answer.ok;
  }

  /** Everything OAuth of an upstream whose authentication changed or which is deleted: tokens, registration, row. */
  async forget(tx: Queryable, upstreamId: string): Promise<void> {
    const scoped = this.deps.vault.within(tx);
    for (const name of [ACCESS_TOKEN, REFRESH_TOKEN, REGISTERED_SECRET]) await scoped.delete(upstreamOwner(upstreamId), name);
    await this.deps.connections.forget(tx, upstreamId);
    await scoped.deleteOwners(FLOW_KIND, await this.deps.connections.deleteFlowsOf(tx, upstreamId));
  }
}

class VersionMoved extends Error {}

const originOf = (url: string) => {
  try {
    return new URL(url).origin;
  } catch {
    return 'the authorization server';
  }
};

const sameUrl = (a: string, b: string) => {
  try {
    return new URL(a).href.replace(/\/$/, '') === new URL(b).href.replace(/\/$/, '');
  } catch {
    return false;
  }
};

/**
 * A failure in our words: the guarded client's message (method, origin, limit), an OAuth error's
 * code, or a generic sentence. Never the SDK's own text, which may quote an answer body.
 */
function ourWords(oauth: McpOAuthSdk, error: unknown): string {
  if (error instanceof OutboundHttpError) return error.message;
  if (error instanceof oauth.OAuthError) return `OAuth error ${error.errorCode}`;
  if (error instanceof ApiError) return error.message;
  return 'the answer was not what OAuth prescribes';
}

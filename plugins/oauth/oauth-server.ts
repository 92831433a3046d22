import { randomUUID } from 'node:crypto';
import { CONNECTOR_ACCESS_PREFIX, CONNECTOR_REFRESH_PREFIX, generateToken, hashToken } from '../../core/identity/api-tokens.ts';
import type { Authenticator } from '../../core/identity/authenticator.ts';
import type { Scope } from '../../core/identity/scopes.ts';
import type { OAuthClient, OAuthGrant, OAuthStore } from './oauth-store.ts';
import { isCodeChallenge, OAuthError, redirectUriRefusal, requestedScopes, verifierMatches } from './oauth-rules.ts';

export interface OAuthSettings {
  /** The authorization server's origin, e.g. https://auth.example.com (no path). */
  authUrl: string;
  accessTokenTtlSeconds: number;
  refreshTokenTtlDays: number;
  codeTtlSeconds: number;
}

export interface OAuthServerDeps {
  store: OAuthStore;
  authenticator: Authenticator;
  clock: () => Date;
  settings: OAuthSettings;
}

/** A request to /authorize that passed every check: what the consent page shows and approves. */
export interface AuthorizeRequest {
  client: OAuthClient;
  redirectUri: string;
  state: string | undefined;
  codeChallenge: string;
  scopes: Scope[];
  resource: string;
}

/**
 * Refused before we know where to send the browser back (unknown client, unregistered redirect
 * URI): shown on our own page, never redirected (RFC 6749 4.1.2.1).
 */
export class AuthorizePageRefusal extends OAuthError {}

export interface TokenAnswer {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token: string;
  scope: string;
}

type Form = Readonly<Record<string, string | undefined>>;

const MAX_REDIRECT_URIS = 10;

/**
 * The authorization server of `{auth_url}/mcp` (OAuth 2.1): dynamic registration of public
 * clients, the authorization code with PKCE S256 only, exact redirect URIs, one resource (RFC 8707),
 * short-lived access tokens and refresh tokens that rotate on every use. A refresh token or code
 * presented twice means one was stolen: the whole grant (every token of the family) is revoked.
 */
export class OAuthServer {
  readonly resource: string;

  constructor(private readonly deps: OAuthServerDeps) {
    this.resource = `${deps.settings.authUrl}/mcp`;
  }

  /** RFC 7591: public clients only (`token_endpoint_auth_method: none`). */
  async register(body: unknown): Promise<Record<string, unknown>> {
    const metadata = isRecord(body) ? body : {};
    const uris = metadata['redirect_uris'];
    if (!Array.isArray(uris) || uris.length === 0 || uris.length > MAX_REDIRECT_URIS || !uris.every((u) => typeof u === 'string' && u.length <= 2000)) {
      throw new OAuthError('invalid_redirect_uri', `redirect_uris must list 1 to ${MAX_REDIRECT_URIS} URLs`);
    }
    for (const uri of uris as string[]) {
      const refusal = redirectUriRefusal(uri);
      if (refusal) throw new OAuthError('invalid_redirect_uri', refusal);
    }
    const method = metadata['token_endpoint_auth_method'];
    if (method !== undefined && method !== 'none') {
      throw new OAuthError('invalid_client_metadata', 'Only public clients are registered: token_endpoint_auth_method must be "none"');
    }
    if (!listsOnly(metadata['grant_types'], ['authorization_code', 'refresh_token'])) {
      throw new OAuthError('invalid_client_metadata', 'grant_types may name authorization_code and refresh_token only');
    }
    if (!listsOnly(metadata['response_types'], ['code'])) throw new OAuthError('invalid_client_metadata', 'response_types may name code only');
    const name = metadata['client_name'];
    const client: OAuthClient = {
      id: generateToken('svc_client_', 24),
      clientName: typeof name === 'string' ? name.slice(0, 200) : null,
      redirectUris: uris as string[],
      createdAt: this.deps.clock(),
    };
    await this.deps.store.createClient(client);
    return {
      client_id: client.id,
      client_id_issued_at: Math.floor(client.createdAt.getTime() / 1000),
      ...(client.clientName === null ? {} : { client_name: client.clientName }),
      redirect_uris: client.redirectUris,
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    };
  }

  /**
   * Checks an authorization request. An unknown client or a redirect URI not registered exactly
   * throws AuthorizePageRefusal; anything else wrong throws an OAuthError the browser is sent back
   * to the client with (see errorRedirect).
   */
  async checkAuthorizeRequest(query: Form): Promise<AuthorizeRequest> {
    const client = query['client_id'] ? await this.deps.store.getClient(query['client_id']) : null;
    if (!client) throw new AuthorizePageRefusal('invalid_client', 'This application is not registered here; ask it to register again');
    const redirectUri = query['redirect_uri'];
    if (!redirectUri || !client.redirectUris.includes(redirectUri)) {
      throw new AuthorizePageRefusal('invalid_request', 'The redirect URI is not one this application registered');
    }
    if (query['response_type'] !== 'code') throw new OAuthError('unsupported_response_type', 'Only response_type=code is supported');
    const challenge = query['code_challenge'];
    if (query['code_challenge_method'] !== 'S256' || !challenge || !isCodeChallenge(challenge)) {
      throw new OAuthError('invalid_request', 'PKCE is required: code_challenge with code_challenge_method=S256');
    }
    return {
      client,
      redirectUri,
      state: query['state'],
      codeChallenge: challenge,
      scopes: requestedScopes(query['scope']),
      resource: this.checkResource(query['resource']),
    };
  }

  /** Where the browser goes back after the person approved: a new grant and its code. */
  async approve(request: AuthorizeRequest, grant: { personId: string; organizationId: string; projectId: string; scopes: readonly Scope[] }): Promise<string> {
    const now = this.deps.clock();
    const code = generateToken('svc_code_');
    await this.deps.store.createGrantWithCode(
      {
        id: randomUUID(),
        clientId: request.client.id,
        personId: grant.personId,
        organizationId: grant.organizationId,
        projectId: grant.projectId,
        scopes: [...grant.scopes],
        resource: request.resource,
      },
      { codeHash: hashToken(code), redirectUri: request.redirectUri, codeChallenge: request.codeChallenge, expiresAt: new Date(now.getTime() + this.deps.settings.codeTtlSeconds * 1000) },
      now,
    );
    return this.backToClient(request.redirectUri, { code, state: request.state });
  }

  /** The client's redirect URI with an RFC 6749 error (a denial is `access_denied`). */
  errorRedirect(redirectUri: string, state: string | undefined, error: OAuthError): string {
    return this.backToClient(redirectUri, { error: error.error, error_description: error.description, state });
  }

  async token(form: Form): Promise<TokenAnswer> {
    const client = await this.client(form);
    if (form['grant_type'] === 'authorization_code') return this.exchangeCode(client, form);
    if (form['grant_type'] === 'refresh_token') return this.refresh(client, form);
    throw new OAuthError('unsupported_grant_type', 'grant_type must be authorization_code or refresh_token');
  }

  /** RFC 7009: revoking either token of a grant ends the grant. Unknown tokens are fine (200). */
  async revoke(form: Form): Promise<void> {
    const client = await this.client(form);
    const token = required(form, 'token');
    const grant = await this.deps.store.grantOfToken(hashToken(token));
    if (grant && grant.clientId === client.id) await this.revokeGrant(grant.id);
  }

  private async exchangeCode(client: OAuthClient, form: Form): Promise<TokenAnswer> {
    const code = required(form, 'code');
    const verifier = required(form, 'code_verifier');
    const redirectUri = required(form, 'redirect_uri');
    const now = this.deps.clock();
    const spent = await this.deps.store.spendCode(hashToken(code), now);
    if (spent.status === 'reused') {
      await this.revokeGrant(spent.grantId);
      throw invalidGrant('This authorization code was already used; every token issued from it is revoked');
    }
    if (spent.status === 'unknown') throw invalidGrant('Unknown authorization code');
    const issued = spent.value;
    if (issued.grant.clientId !== client.id) throw invalidGrant('This code was issued to another client');
    if (issued.expiresAt <= now) throw invalidGrant('This authorization code has expired');
    if (issued.redirectUri !== redirectUri) throw invalidGrant('redirect_uri differs from the one the code was issued for');
    if (!verifierMatches(verifier, issued.codeChallenge)) throw invalidGrant('code_verifier does not match the code_challenge (PKCE S256)');
    this.checkSameResource(form, issued.grant);
    return this.issueTokens(issued.grant);
  }

  private async refresh(client: OAuthClient, form: Form): Promise<TokenAnswer> {
    const spent = await this.deps.store.spendRefreshToken(hashToken(required(form, 'refresh_token')), this.deps.clock());
    if (spent.status === 'reused') {
      await this.revokeGrant(spent.grantId);
      throw invalidGrant('This refresh token was already used; the grant and all its tokens are revoked. Sign in again');
    }
    if (spent.status === 'unknown') throw invalidGrant('Unknown or expired refresh token');
    const grant = spent.value;
    if (grant.clientId !== client.id) throw invalidGrant('This refresh token was issued to another client');
    if (grant.revokedAt) throw invalidGrant('This grant has been revoked; sign in again');
    if (form['scope'] !== undefined && !form['scope'].split(/\s+/).every((s) => s === '' || grant.scopes.includes(s))) {
      throw new OAuthError('invalid_scope', 'A refresh may not ask for scopes beyond those granted');
    }
    this.checkSameResource(form, grant);
    return this.issueTokens(grant);
  }

  private async issueTokens(grant: OAuthGrant): Promise<TokenAnswer> {
    const { accessTokenTtlSeconds, refreshTokenTtlDays } = this.deps.settings;
    const now = this.deps.clock().getTime();
    const access = generateToken(CONNECTOR_ACCESS_PREFIX);
    const refresh = generateToken(CONNECTOR_REFRESH_PREFIX);
    await this.deps.store.storeTokens(
      grant.id,
      { hash: hashToken(access), expiresAt: new Date(now + accessTokenTtlSeconds * 1000) },
      { hash: hashToken(refresh), expiresAt: new Date(now + refreshTokenTtlDays * 86_400_000) },
    );
    return { access_token: access, token_type: 'Bearer', expires_in: accessTokenTtlSeconds, refresh_token: refresh, scope: grant.scopes.join(' ') };
  }

  private async revokeGrant(grantId: string): Promise<void> {
    await this.deps.store.revokeGrant(grantId, this.deps.clock());
    await this.deps.authenticator.invalidate({ kind: 'grant', id: grantId });
  }

  /** Public clients authenticate with their client_id alone (RFC 6749 2.3, `none`). */
  private async client(form: Form): Promise<OAuthClient> {
    const id = form['client_id'];
    const client = id ? await this.deps.store.getClient(id) : null;
    if (!client) throw new OAuthError('invalid_client', 'Unknown client_id; register the client first', 401);
    return client;
  }

  /** RFC 8707: this server issues tokens for one resource, its own MCP endpoint. */
  private checkResource(resource: string | undefined): string {
    if (resource === undefined || resource === this.resource) return this.resource;
    throw new OAuthError('invalid_target', `Tokens here are issued for ${this.resource} only, not ${resource}`);
  }

  private checkSameResource(form: Form, grant: OAuthGrant): void {
    const resource = form['resource'];
    if (resource !== undefined && resource !== grant.resource) {
      throw new OAuthError('invalid_target', `This grant is for ${grant.resource}, not ${resource}`);
    }
  }

  private backToClient(redirectUri: string, params: Record<string, string | undefined>): string {
    const url = new URL(redirectUri);
    for (const [name, value] of Object.entries(params)) if (value !== undefined) url.searchParams.set(name, value);
    // RFC 9207: which server answered, so a client talking to several cannot be mixed up.
    url.searchParams.set('iss', this.deps.settings.authUrl);
    return url.href;
  }
}

const invalidGrant = (description: string) => new OAuthError('invalid_grant', description);

function required(form: Form, name: string): string {
  const value = form[name];
  if (value === undefined || value === '') throw new OAuthError('invalid_request', `${name} is required`);
  return value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function listsOnly(value: unknown, allowed: readonly string[]): boolean {
  return value === undefined || (Array.isArray(value) && value.every((v) => typeof v === 'string' && allowed.includes(v)));
}

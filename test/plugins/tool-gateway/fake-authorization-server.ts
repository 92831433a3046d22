import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A small OAuth 2.1 authorization server on 127.0.0.1, for an MCP server behind OAuth: RFC 8414
 * metadata, dynamic client registration (RFC 7591), an authorize endpoint that consents at once
 * and redirects with a code (or with `error=access_denied` when told to deny), a token endpoint
 * (authorization_code with its PKCE S256 check; refresh_token with rotation: a refresh token
 * works once, and one used again revokes its whole grant, as careful servers do) and revocation
 * (RFC 7009). Access tokens expire after `accessTtlMs` by the clock it is given.
 */
export interface FakeAuthorizationServer {
  url: string;
  /** Whether `token` is an access token it issued that is neither expired nor revoked. */
  accepts(token: string): boolean;
  /** Every refresh_token grant received, in order, with the token it carried. */
  refreshes: Array<{ refreshToken: string; outcome: 'rotated' | 'reused' | 'unknown' }>;
  /** Clients registered dynamically. */
  registrations: Array<{ clientId: string; redirectUris: string[] }>;
  revocations: string[];
  /** Answer the next authorize requests with access_denied. */
  deny: boolean;
  /** Milliseconds an access token lives. */
  accessTtlMs: number;
  /** Revokes every token of every grant (as a person withdrawing the app's access would). */
  revokeAll(): void;
  close(): Promise<void>;
}

interface Grant {
  clientId: string;
  scope: string;
  revoked: boolean;
}

interface Client {
  secret: string | null;
  redirectUris: string[];
}

export async function startFakeAuthorizationServer(
  options: { now?: () => number; clients?: Record<string, { secret: string | null; redirectUris: string[] }>; registration?: boolean } = {},
): Promise<FakeAuthorizationServer> {
  const now = options.now ?? (() => Date.now());
  const clients = new Map<string, Client>(Object.entries(options.clients ?? {}));
  const codes = new Map<string, { clientId: string; redirectUri: string; challenge: string; scope: string; used: boolean }>();
  const access = new Map<string, { grant: Grant; expiresAt: number }>();
  const refresh = new Map<string, { grant: Grant; used: boolean }>();
  const grants: Grant[] = [];
  const token = () => randomBytes(24).toString('base64url');

  const state: FakeAuthorizationServer = {
    url: '',
    refreshes: [],
    registrations: [],
    revocations: [],
    deny: false,
    accessTtlMs: 3_600_000,
    accepts(value) {
      const issued = access.get(value);
      return issued !== undefined && !issued.grant.revoked && issued.expiresAt > now();
    },
    revokeAll() {
      for (const grant of grants) grant.revoked = true;
    },
    close: async () => undefined,
  };

  const issue = (grant: Grant) => {
    const pair = { access_token: token(), refresh_token: token() };
    access.set(pair.access_token, { grant, expiresAt: now() + state.accessTtlMs });
    refresh.set(pair.refresh_token, { grant, used: false });
    return { ...pair, token_type: 'Bearer', expires_in: Math.floor(state.accessTtlMs / 1000), scope: grant.scope };
  };

  const json = (res: http.ServerResponse, status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));

  /** The client the request authenticates as (client_secret_basic or _post, or a public client by its id). */
  const clientOf = (req: http.IncomingMessage, form: URLSearchParams): string | null => {
    const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const [id, secret] = basic ? Buffer.from(basic, 'base64').toString().split(':').map(decodeURIComponent) : [form.get('client_id') ?? '', form.get('client_secret') ?? undefined];
    const client = clients.get(id ?? '');
    if (!client) return null;
    if (client.secret !== null && client.secret !== secret) return null;
    return id ?? null;
  };

  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', state.url);
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString();
    if (url.pathname === '/.well-known/oauth-authorization-server') {
      return json(res, 200, {
        issuer: state.url,
        authorization_endpoint: `${state.url}/authorize`,
        token_endpoint: `${state.url}/token`,
        ...(options.registration === false ? {} : { registration_endpoint: `${state.url}/register` }),
        revocation_endpoint: `${state.url}/revoke`,
        response_types_supported: ['code'],
        grant_types_supported: ['authorization_code', 'refresh_token'],
        code_challenge_methods_supported: ['S256'],
        token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
      });
    }
    if (url.pathname === '/register' && req.method === 'POST' && options.registration !== false) {
      const body = JSON.parse(raw) as { redirect_uris: string[] };
      const clientId = `client-${token()}`;
      const secret = token();
      clients.set(clientId, { secret, redirectUris: body.redirect_uris });
      state.registrations.push({ clientId, redirectUris: body.redirect_uris });
      return json(res, 201, { ...body, client_id: clientId, client_secret: secret, client_id_issued_at: Math.floor(now() / 1000), token_endpoint_auth_method: 'client_secret_basic' });
    }
    if (url.pathname === '/authorize' && req.method === 'GET') {
      const query = url.searchParams;
      const client = clients.get(query.get('client_id') ?? '');
      const redirectUri = query.get('redirect_uri') ?? '';
      if (!client?.redirectUris.includes(redirectUri)) return json(res, 400, { error: 'invalid_request', error_description: 'unknown client or redirect URI' });
      const back = new URL(redirectUri);
      back.searchParams.set('state', query.get('state') ?? '');
      if (query.get('response_type') !== 'code' || query.get('code_challenge_method') !== 'S256' || !query.get('code_challenge')) {
        back.searchParams.set('error', 'invalid_request');
      } else if (state.deny) {
        back.searchParams.set('error', 'access_denied');
        back.searchParams.set('error_description', 'The person said no');
      } else {
        const code = token();
        codes.set(code, { clientId: query.get('client_id') ?? '', redirectUri, challenge: query.get('code_challenge') ?? '', scope: query.get('scope') ?? '', used: false });
        back.searchParams.set('code', code);
      }
      return res.writeHead(302, { location: back.href }).end();
    }
    if (url.pathname === '/token' && req.method === 'POST') {
      const form = new URLSearchParams(raw);
      const clientId = clientOf(req, form);
      if (clientId === null) return json(res, 401, { error: 'invalid_client' });
      if (form.get('grant_type') === 'authorization_code') {
        const code = codes.get(form.get('code') ?? '');
        const verifier = form.get('code_verifier') ?? '';
        const challenge = createHash('sha256').update(verifier).digest('base64url');
        if (!code || code.used || code.clientId !== clientId || code.redirectUri !== form.get('redirect_uri') || code.challenge !== challenge) {
          return json(res, 400, { error: 'invalid_grant' });
        }
        code.used = true;
        const grant = { clientId, scope: code.scope, revoked: false };
        grants.push(grant);
        return json(res, 200, issue(grant));
      }
      if (form.get('grant_type') === 'refresh_token') {
        const presented = form.get('refresh_token') ?? '';
        const known = refresh.get(presented);
        if (!known || known.grant.clientId !== clientId || known.grant.revoked) {
          state.refreshes.push({ refreshToken: presented, outcome: 'unknown' });
          return json(res, 400, { error: 'invalid_grant' });
        }
        if (known.used) {
          // Reuse: someone holds a copy of a spent token; the whole grant goes.
          known.grant.revoked = true;
          state.refreshes.push({ refreshToken: presented, outcome: 'reused' });
          return json(res, 400, { error: 'invalid_grant', error_description: 'refresh token reused' });
        }
        known.used = true;
        state.refreshes.push({ refreshToken: presented, outcome: 'rotated' });
        return json(res, 200, issue(known.grant));
      }
      return json(res, 400, { error: 'unsupported_grant_type' });
    }
    if (url.pathname === '/revoke' && req.method === 'POST') {
      const form = new URLSearchParams(raw);
      if (clientOf(req, form) === null) return json(res, 401, { error: 'invalid_client' });
      const presented = form.get('token') ?? '';
      state.revocations.push(presented);
      const grant = refresh.get(presented)?.grant ?? access.get(presented)?.grant;
      if (grant) grant.revoked = true;
      return res.writeHead(200).end();
    }
    res.writeHead(404).end();
  });
  server.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}

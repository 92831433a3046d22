import { createHash, randomBytes } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { LightMyRequestResponse } from 'fastify';
import { Agent, fetch as undiciFetch } from 'undici';
import type { AppConfigInput } from '../../config/schema.ts';
import { manifest } from '../../plugins/index.ts';
import { mcpEchoPlugin } from '../fixtures/mcp-echo-plugin.ts';
import { allPlugins, buildTestApp, type TapLike, type TestApp } from './app.ts';
import { listeningBase, mcpClient } from './mcp-client.ts';
import { fastDeriveKey, signedInPerson } from './people.ts';

export const AUTH_HOST = 'auth.localhost';
export const REDIRECT_URI = 'https://client.example/callback';

export interface OAuthTestApp extends TestApp {
  authUrl: string;
  /** app.inject on auth_url's host. */
  auth(method: string, url: string, options?: { form?: Record<string, string>; json?: unknown; headers?: Record<string, string> }): Promise<LightMyRequestResponse>;
}

/**
 * The service with the OAuth plugin at `http://auth.localhost[:port]`; `{auth_url}/mcp` serves the
 * echoing MCP endpoint fixture, or with `echo: false` the operation tools it serves in production.
 */
export async function buildOAuthApp(t: TapLike, options: { port?: number; clock?: () => Date; config?: AppConfigInput; echo?: boolean } = {}): Promise<OAuthTestApp> {
  const authUrl = `http://${AUTH_HOST}${options.port ? `:${options.port}` : ''}`;
  const withEcho = options.echo === false ? manifest : [...manifest, mcpEchoPlugin];
  const test = await buildTestApp(t, {
    manifest: withEcho,
    plugins: { ...allPlugins(withEcho), oauth: { authUrl } },
    deriveKey: fastDeriveKey,
    ...(options.clock ? { clock: options.clock } : {}),
    // A long credential cache: a revocation must reach it by invalidation, not by the entry aging out.
    config: { ...options.config, auth: { credentialCacheTtlMs: 60_000 } },
  });
  return onAuthHost(test, authUrl);
}

/** A test app whose oauth plugin serves `authUrl` (its configured plugins.oauth.authUrl), with a way in on that host. */
export function onAuthHost(test: TestApp, authUrl: string): OAuthTestApp {
  return {
    ...test,
    authUrl,
    auth(method, url, callOptions = {}) {
      const headers: Record<string, string> = { host: new URL(authUrl).host, ...callOptions.headers };
      let payload: string | undefined;
      if (callOptions.form) {
        headers['content-type'] = 'application/x-www-form-urlencoded';
        payload = new URLSearchParams(callOptions.form).toString();
      } else if (callOptions.json !== undefined) {
        headers['content-type'] = 'application/json';
        payload = JSON.stringify(callOptions.json);
      }
      return test.app.inject({ method: method as 'GET', url, headers, ...(payload === undefined ? {} : { payload }) });
    },
  };
}

export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

export async function registerClient(test: OAuthTestApp, redirectUris: string[] = [REDIRECT_URI]): Promise<string> {
  const response = await test.auth('POST', '/register', { json: { client_name: 'Test connector', redirect_uris: redirectUris } });
  if (response.statusCode !== 201) throw new Error(`registration failed: ${response.statusCode} ${response.body}`);
  return response.json().client_id;
}

/** The query of an authorization request, PKCE S256, for this server's resource. */
export function authorizeQuery(test: OAuthTestApp, clientId: string, challenge: string, extra: Record<string, string> = {}): URLSearchParams {
  return new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT_URI,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 'state-1',
    resource: `${test.authUrl}/mcp`,
    ...extra,
  });
}

/**
 * A person (a new organisation owner) approving on the consent page, form by form as a browser
 * would post them (the real browser drives it in oauth-flow.test.ts): the consent page, then Approve
 * (for `projectId`, by default the default project) or Deny. Returns where the browser is sent back to.
 */
export async function approveByForm(test: OAuthTestApp, query: URLSearchParams, decision: 'approve' | 'deny' = 'approve', projectId = test.defaultProjectId): Promise<URL> {
  const email = `person-${randomBytes(4).toString('hex')}@example.com`;
  const { cookie } = await signedInPerson(test, email);
  const page = await test.auth('GET', `/authorize?${query}`, { headers: { cookie } });
  if (page.statusCode !== 200) throw new Error(`consent page: ${page.statusCode} ${page.body}`);
  const formCookie = String(page.headers['set-cookie']).split(';')[0]!;
  const fields = Object.fromEntries([...page.body.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [m[1]!, decodeEntities(m[2]!)]));
  const answer = await test.auth('POST', '/authorize', {
    form: { ...fields, project_id: projectId, decision },
    headers: { cookie: `${cookie}; ${formCookie}` },
  });
  if (answer.statusCode !== 303) throw new Error(`${decision}: ${answer.statusCode} ${answer.body}`);
  return new URL(String(answer.headers.location));
}

function decodeEntities(value: string): string {
  return value
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

/** An authorization code for a new client, and what redeeming it needs. */
export async function issuedCode(test: OAuthTestApp): Promise<{ clientId: string; code: string; verifier: string }> {
  const clientId = await registerClient(test);
  const { verifier, challenge } = pkcePair();
  const back = await approveByForm(test, authorizeQuery(test, clientId, challenge));
  const code = back.searchParams.get('code');
  if (!code) throw new Error(`no code in ${back}`);
  return { clientId, code, verifier };
}

export async function redeem(test: OAuthTestApp, issued: { clientId: string; code: string; verifier: string }, extra: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return test.auth('POST', '/token', {
    form: { grant_type: 'authorization_code', client_id: issued.clientId, code: issued.code, code_verifier: issued.verifier, redirect_uri: REDIRECT_URI, ...extra },
  });
}

/**
 * A connector's access token, through the whole flow (registration, consent, code, token): a new
 * organisation owner grants `scope` (space-separated; absent, every scope a connector may ask for)
 * in `projectId` (default: the default project).
 */
export async function connectorToken(test: OAuthTestApp, options: { scope?: string; projectId?: string } = {}): Promise<string> {
  const clientId = await registerClient(test);
  const { verifier, challenge } = pkcePair();
  const query = authorizeQuery(test, clientId, challenge, options.scope === undefined ? {} : { scope: options.scope });
  const code = (await approveByForm(test, query, 'approve', options.projectId)).searchParams.get('code');
  if (!code) throw new Error('no authorization code');
  const token = await redeem(test, { clientId, code, verifier });
  if (token.statusCode !== 200) throw new Error(`token: ${token.statusCode} ${token.body}`);
  return (token.json() as { access_token: string }).access_token;
}

/** Node does not resolve *.localhost (browsers do): this fetch sends auth_url's host name to loopback. */
const loopback = new Agent({
  connect: {
    lookup: (_host: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) =>
      options.all ? callback(null, [{ address: '127.0.0.1', family: 4 }]) : callback(null, '127.0.0.1', 4),
  } as object,
});
export const loopbackFetch: FetchLike = (url, init) => undiciFetch(url, { ...(init as object), dispatcher: loopback }) as unknown as Promise<Response>;

/** The official MCP SDK client at `{auth_url}/mcp` of the listening app, with a connector's access token. */
export async function connectorMcpClient(t: TapLike, test: OAuthTestApp, token: string): Promise<Client> {
  const { port } = new URL(await listeningBase(test));
  return mcpClient(t, `http://${new URL(test.authUrl).hostname}:${port}`, token, '/mcp', loopbackFetch);
}

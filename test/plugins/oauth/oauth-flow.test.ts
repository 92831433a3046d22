import { createServer } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { launchChromium } from '../../../tools/chromium.ts';
import t from 'tap';
import { buildOAuthApp, loopbackFetch } from '../../helpers/oauth.ts';
import { invite, PASSWORD } from '../../helpers/people.ts';

t.setTimeout(240_000);

/** Where the connector wants the browser back: loopback http, intercepted by the browser below. */
const REDIRECT_URL = 'http://127.0.0.1:9/callback';

/** A connector's own storage, in memory: what the SDK asks of any OAuth client. */
class MemoryProvider implements OAuthClientProvider {
  information: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = '';
  authorizationUrl: URL | null = null;
  readonly redirectUrl = REDIRECT_URL;
  readonly clientMetadata: OAuthClientMetadata = {
    client_name: 'SDK connector',
    redirect_uris: [REDIRECT_URL],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
    scope: 'mcp:read mcp:write keys:read',
  };
  clientInformation() {
    return this.information;
  }
  saveClientInformation(information: OAuthClientInformationMixed) {
    this.information = information;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

t.test('a connector signs in over OAuth with the MCP SDK, a person approving in a real browser', async (t) => {
  let now = Date.now();
  const port = await freePort();
  const test = await buildOAuthApp(t, { port, clock: () => new Date(now) });
  await test.app.listen({ host: '127.0.0.1', port });
  const email = 'connector-owner@example.com';
  const setPassword = await test.call('POST', '/client/auth/set-password', { token: null, body: { token: await invite(test, email), password: PASSWORD } });
  t.equal(setPassword.statusCode, 200);

  const serverUrl = new URL(`${test.authUrl}/mcp`);
  const provider = new MemoryProvider();
  const connect = async () => {
    const client = new Client({ name: 'oauth-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(serverUrl, { authProvider: provider, fetch: loopbackFetch }));
    t.teardown(() => client.close());
    return client;
  };

  // 1. No token: the SDK follows the challenge to the metadata, registers, and asks for a redirect.
  await t.rejects(connect(), { message: /Unauthorized/ });
  const authorizationUrl = provider.authorizationUrl;
  if (!authorizationUrl) throw new Error('the SDK asked for no authorization');
  t.equal(authorizationUrl.origin + authorizationUrl.pathname, `${test.authUrl}/authorize`);
  t.equal(authorizationUrl.searchParams.get('code_challenge_method'), 'S256');
  t.equal(authorizationUrl.searchParams.get('resource'), serverUrl.href);
  t.match(provider.information, { client_id: /^svc_client_/ });

  // 2. The person signs in and approves in the browser; the browser goes back to the connector.
  const browser = await launchChromium();
  t.teardown(() => browser.close());
  const page = await browser.newPage();
  await page.route(`${REDIRECT_URL}**`, (route) => route.fulfill({ status: 200, contentType: 'text/plain', body: 'connected' }));
  const signInPage = await page.goto(authorizationUrl.href);
  t.match(signInPage?.headers()['content-security-policy'], /default-src 'none'/);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Connect SDK connector' }).waitFor();
  for (const scope of authorizationUrl.searchParams.get('scope')!.split(' ')) {
    t.equal(await page.getByText(`(${scope})`, { exact: false }).count(), 1, `the page shows the scope ${scope} asked for`);
  }
  await page.getByLabel('Project').selectOption(test.defaultProjectId);
  const callback = page.waitForRequest((request) => request.url().startsWith(REDIRECT_URL));
  await page.getByRole('button', { name: 'Approve' }).click();
  const back = new URL((await callback).url());
  t.equal(back.searchParams.get('state'), authorizationUrl.searchParams.get('state'));
  const code = back.searchParams.get('code');
  if (!code) throw new Error(`no code in ${back}`);

  // 3. The SDK redeems the code (PKCE) and calls the tool as the person, in the project picked.
  await new StreamableHTTPClientTransport(serverUrl, { authProvider: provider, fetch: loopbackFetch }).finishAuth(code);
  const first = provider.saved!;
  t.equal(first.token_type, 'Bearer');
  t.equal(first.expires_in, 600);
  const client = await connect();
  const whoami = await client.callTool({ name: 'whoami' });
  const requested = authorizationUrl.searchParams.get('scope')!.split(' ').sort();
  t.match(whoami.structuredContent, { kind: 'connector', email, organizationId: test.organizationId, projectId: test.defaultProjectId, audience: serverUrl.href, scopes: requested });

  // 4. Ten minutes on the access token has expired: the SDK refreshes, and the refresh token rotates.
  now += 11 * 60_000;
  const later = await (await connect()).callTool({ name: 'whoami' });
  t.match(later.structuredContent, { kind: 'connector', projectId: test.defaultProjectId });
  t.not(provider.saved!.access_token, first.access_token);
  t.not(provider.saved!.refresh_token, first.refresh_token);

  // 5. Revocation ends the grant: the access token is refused, and the SDK has to sign in again.
  const revoked = await loopbackFetch(`${test.authUrl}/revoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token: provider.saved!.refresh_token!, client_id: provider.information!.client_id }).toString(),
  });
  t.equal(revoked.status, 200);
  const refused = await loopbackFetch(serverUrl, {
    method: 'POST',
    headers: { authorization: `Bearer ${provider.saved!.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
  t.equal(refused.status, 401);
  provider.authorizationUrl = null;
  await t.rejects(connect(), { message: /Unauthorized/ });
  t.ok(provider.authorizationUrl, 'the SDK starts a new authorization');
});

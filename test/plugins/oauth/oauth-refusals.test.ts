import t from 'tap';
import { createKey } from '../../helpers/app.ts';
import { approveByForm, authorizeQuery, buildOAuthApp, issuedCode, pkcePair, REDIRECT_URI, redeem, registerClient } from '../../helpers/oauth.ts';

t.setTimeout(240_000);

/** A JSON-RPC initialize, what an MCP client sends first. */
const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '1' } } };
const mcpHeaders = (token: string) => ({ authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream' });

t.test('a code redeemed with the wrong PKCE verifier is invalid_grant', async (t) => {
  const test = await buildOAuthApp(t);
  const issued = await issuedCode(test);
  const response = await redeem(test, { ...issued, verifier: pkcePair().verifier });
  t.equal(response.statusCode, 400);
  t.equal(response.json().error, 'invalid_grant');
  t.match(response.json().error_description, /code_verifier/);
});

t.test('an authorization request without S256 PKCE is sent back with invalid_request', async (t) => {
  const test = await buildOAuthApp(t);
  const clientId = await registerClient(test);
  const query = authorizeQuery(test, clientId, pkcePair().challenge, { code_challenge_method: 'plain' });
  const response = await test.auth('GET', `/authorize?${query}`);
  t.equal(response.statusCode, 303);
  const back = new URL(String(response.headers.location));
  t.equal(back.origin + back.pathname, REDIRECT_URI);
  t.equal(back.searchParams.get('error'), 'invalid_request');
  t.equal(back.searchParams.get('state'), 'state-1');
});

t.test('a redirect URI the client did not register is refused on our page, never redirected to', async (t) => {
  const test = await buildOAuthApp(t);
  const clientId = await registerClient(test);
  const query = authorizeQuery(test, clientId, pkcePair().challenge, { redirect_uri: 'https://client.example/callback/other' });
  const response = await test.auth('GET', `/authorize?${query}`);
  t.equal(response.statusCode, 400);
  t.equal(response.headers.location, undefined);
  t.match(response.body, /redirect URI is not one this application registered/);
});

t.test('a code redeemed with another redirect_uri than it was issued for is invalid_grant', async (t) => {
  const test = await buildOAuthApp(t);
  const issued = await issuedCode(test);
  const response = await redeem(test, issued, { redirect_uri: 'https://client.example/elsewhere' });
  t.equal(response.statusCode, 400);
  t.equal(response.json().error, 'invalid_grant');
});

t.test("registration refuses redirect URIs that are neither https, loopback http nor an app's own scheme", async (t) => {
  const test = await buildOAuthApp(t);
  for (const uri of ['http://client.example/callback', 'https://client.example/cb#frag', 'javascript:alert(1)', 'data:text/html,hi', 'file:///etc/passwd']) {
    const response = await test.auth('POST', '/register', { json: { redirect_uris: [uri] } });
    t.equal(response.statusCode, 400, uri);
    t.equal(response.json().error, 'invalid_redirect_uri', uri);
  }
  const loopback = await test.auth('POST', '/register', { json: { redirect_uris: ['http://127.0.0.1:33418/callback'] } });
  t.equal(loopback.statusCode, 201);
  t.equal(loopback.json().token_endpoint_auth_method, 'none');
  // Native apps (RFC 8252 7.1): Cursor's and VS Code's callbacks, a reverse-domain scheme.
  for (const uri of ['cursor://anysphere.cursor-retrieval/oauth/callback', 'vscode://vscode.github-authentication/did-authenticate', 'com.example.app:/oauth2redirect']) {
    const app = await test.auth('POST', '/register', { json: { redirect_uris: [uri] } });
    t.equal(app.statusCode, 201, uri);
  }
});

t.test('a refresh token used twice revokes the whole grant', async (t) => {
  const test = await buildOAuthApp(t);
  const issued = await issuedCode(test);
  const first = (await redeem(test, issued)).json();
  const refresh = (token: string) => test.auth('POST', '/token', { form: { grant_type: 'refresh_token', client_id: issued.clientId, refresh_token: token } });
  const rotated = await refresh(first.refresh_token);
  t.equal(rotated.statusCode, 200);
  t.not(rotated.json().refresh_token, first.refresh_token, 'a new refresh token each time');
  const working = await test.auth('POST', '/mcp', { json: initialize, headers: mcpHeaders(rotated.json().access_token) });
  t.equal(working.statusCode, 200, 'the new access token works, and its credential is cached');

  const replayed = await refresh(first.refresh_token);
  t.equal(replayed.statusCode, 400);
  t.equal(replayed.json().error, 'invalid_grant');
  t.match(replayed.json().error_description, /already used/);

  const latest = await refresh(rotated.json().refresh_token);
  t.equal(latest.json().error, 'invalid_grant', 'the refresh token issued after the first use is revoked too');
  const mcp = await test.auth('POST', '/mcp', { json: initialize, headers: mcpHeaders(rotated.json().access_token) });
  t.equal(mcp.statusCode, 401, 'and so is the access token issued with it');
  t.equal(mcp.json().error.code, 'access_token_revoked');
});

t.test('a resource other than {auth_url}/mcp is invalid_target, at /authorize and at /token', async (t) => {
  const test = await buildOAuthApp(t);
  const clientId = await registerClient(test);
  const query = authorizeQuery(test, clientId, pkcePair().challenge, { resource: 'https://elsewhere.example/mcp' });
  const response = await test.auth('GET', `/authorize?${query}`);
  t.equal(response.statusCode, 303);
  t.equal(new URL(String(response.headers.location)).searchParams.get('error'), 'invalid_target');

  const issued = await issuedCode(test);
  const redeemed = await redeem(test, issued, { resource: 'https://elsewhere.example/mcp' });
  t.equal(redeemed.statusCode, 400);
  t.equal(redeemed.json().error, 'invalid_target');
});

t.test('an expired access token is refused at {auth_url}/mcp with an invalid_token challenge', async (t) => {
  let now = Date.parse('2026-01-05T10:00:00Z');
  const test = await buildOAuthApp(t, { clock: () => new Date(now) });
  const tokens = (await redeem(test, await issuedCode(test))).json();
  t.equal(tokens.expires_in, 600);
  const before = await test.auth('POST', '/mcp', { json: initialize, headers: mcpHeaders(tokens.access_token) });
  t.equal(before.statusCode, 200);

  now += 601_000;
  const after = await test.auth('POST', '/mcp', { json: initialize, headers: mcpHeaders(tokens.access_token) });
  t.equal(after.statusCode, 401);
  t.equal(after.json().error.code, 'access_token_expired');
  t.match(String(after.headers['www-authenticate']), /^Bearer resource_metadata="http:\/\/auth\.localhost\/\.well-known\/oauth-protected-resource\/mcp", error="invalid_token"/);
});

t.test('a request without a token is challenged towards the protected-resource metadata', async (t) => {
  const test = await buildOAuthApp(t);
  const response = await test.auth('POST', '/mcp', { json: initialize, headers: { accept: 'application/json, text/event-stream' } });
  t.equal(response.statusCode, 401);
  t.equal(response.headers['www-authenticate'], 'Bearer resource_metadata="http://auth.localhost/.well-known/oauth-protected-resource/mcp"');
});

t.test('{auth_url}/mcp refuses API keys, and the API host refuses connector tokens', async (t) => {
  const test = await buildOAuthApp(t);
  const { key } = await createKey(test, { scopes: ['mcp:read', 'mcp:write', 'keys:read'] });
  const withKey = await test.auth('POST', '/mcp', { json: initialize, headers: mcpHeaders(key) });
  t.equal(withKey.statusCode, 401);
  t.match(String(withKey.headers['www-authenticate']), /error="invalid_token"/);

  const tokens = (await redeem(test, await issuedCode(test))).json();
  const onApi = await test.call('GET', '/client/keys', { token: tokens.access_token });
  t.equal(onApi.statusCode, 401);
  t.equal(onApi.json().error.code, 'connector_token_not_accepted');
});

t.test('a revoked grant ends its access token; revoking an unknown token still answers 200', async (t) => {
  const test = await buildOAuthApp(t);
  const issued = await issuedCode(test);
  const tokens = (await redeem(test, issued)).json();
  const before = await test.auth('POST', '/mcp', { json: initialize, headers: mcpHeaders(tokens.access_token) });
  t.equal(before.statusCode, 200, 'the token works, and its credential is cached');
  const revoked = await test.auth('POST', '/revoke', { form: { client_id: issued.clientId, token: tokens.refresh_token, token_type_hint: 'refresh_token' } });
  t.equal(revoked.statusCode, 200);
  const mcp = await test.auth('POST', '/mcp', { json: initialize, headers: mcpHeaders(tokens.access_token) });
  t.equal(mcp.statusCode, 401);
  t.equal(mcp.json().error.code, 'access_token_revoked');
  const unknown = await test.auth('POST', '/revoke', { form: { client_id: issued.clientId, token: 'svc_oat_nothing' } });
  t.equal(unknown.statusCode, 200);
});

t.test('a code is single use: redeeming it again is invalid_grant and revokes what it issued', async (t) => {
  const test = await buildOAuthApp(t);
  const issued = await issuedCode(test);
  const tokens = (await redeem(test, issued)).json();
  const again = await redeem(test, issued);
  t.equal(again.json().error, 'invalid_grant');
  const mcp = await test.auth('POST', '/mcp', { json: initialize, headers: mcpHeaders(tokens.access_token) });
  t.equal(mcp.statusCode, 401);
});

t.test('denying on the consent page sends the client access_denied with its state', async (t) => {
  const test = await buildOAuthApp(t);
  const clientId = await registerClient(test);
  const back = await approveByForm(test, authorizeQuery(test, clientId, pkcePair().challenge), 'deny');
  t.equal(back.origin + back.pathname, REDIRECT_URI);
  t.equal(back.searchParams.get('error'), 'access_denied');
  t.equal(back.searchParams.get('state'), 'state-1');
  t.equal(back.searchParams.get('iss'), 'http://auth.localhost');
  t.equal(back.searchParams.get('code'), null);
});

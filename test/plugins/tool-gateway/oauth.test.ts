import t from 'tap';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { buildTestApp, createKey, type TapLike, type TestApp } from '../../helpers/app.ts';
import { type FakeAuthorizationServer, startFakeAuthorizationServer } from './fake-authorization-server.ts';
import { type FakeMcpServer, startFakeMcpServer, tool } from './fake-mcp-server.ts';

t.setTimeout(120_000);

const PUBLIC_URL = 'https://gateway.example.com';
let nowMs = Date.parse('2026-11-20T08:00:00.000Z');
const clock = () => new Date(nowMs);

const app = await buildTestApp(t, { clock, config: { outbound: { allowPrivateNetwork: true }, server: { publicUrl: PUBLIC_URL } } });

/** An authorization server and an MCP server behind it, both on loopback. */
async function protectedServer(t: TapLike, options: Parameters<typeof startFakeAuthorizationServer>[0] = {}): Promise<{ as: FakeAuthorizationServer; mcp: FakeMcpServer }> {
  const as = await startFakeAuthorizationServer({ now: () => nowMs, ...options });
  const mcp = await startFakeMcpServer([tool('search'), tool('create_issue')], { authorizationServer: as.url, accepts: (token) => as.accepts(token), scopes: ['tracker'] });
  t.teardown(() => Promise.all([as.close(), mcp.close()]));
  return { as, mcp };
}

async function register(test: TestApp, mcp: FakeMcpServer, auth: Record<string, unknown> = { type: 'oauth' }, projectId?: string) {
  const response = await test.call('POST', '/client/mcp/upstreams', { body: { name: 'Tracker', url: `${mcp.url}/mcp`, auth, ...(projectId ? { projectId } : {}) } });
  if (response.statusCode !== 201) throw new Error(`register: ${response.statusCode} ${response.body}`);
  return response.json() as Record<string, any>;
}

/**
 * Opens the authorization URL as a browser would: the authorization server redirects to the
 * gateway's callback, which the browser then opens (here by injecting the request: no credential).
 */
async function browserSignIn(test: TestApp, authorizationUrl: string) {
  const atServer = await fetch(authorizationUrl, { redirect: 'manual' });
  const location = atServer.headers.get('location');
  if (atServer.status !== 302 || !location) throw new Error(`authorize answered ${atServer.status}`);
  const back = new URL(location);
  const callback = await test.call('GET', `${back.pathname}${back.search}`, { token: null });
  return { back, callback };
}

async function signIn(test: TestApp, upstreamId: string) {
  const started = await test.call('POST', `/client/mcp/upstreams/${upstreamId}/oauth/start`);
  if (started.statusCode !== 200) throw new Error(`start: ${started.statusCode} ${started.body}`);
  const body = started.json() as { authorizationUrl: string; state: string };
  return { ...body, ...(await browserSignIn(test, body.authorizationUrl)) };
}

const oauthOf = async (test: TestApp, upstreamId: string) => (await test.call('GET', `/client/mcp/upstreams/${upstreamId}/oauth`)).json() as Record<string, any>;
const refresh = async (test: TestApp, upstreamId: string) => (await test.call('POST', `/client/mcp/upstreams/${upstreamId}/refresh`)).json() as Record<string, any>;

t.test('an OAuth upstream registered before anyone signed in is saved, not connected, and its health says so', async (t) => {
  const { mcp } = await protectedServer(t);
  const upstream = await register(app, mcp);
  t.same(upstream.auth, { type: 'oauth', oauthAppId: null, scopes: null });
  t.match(upstream.health, { status: 'error', errorKind: 'not_connected' });
  t.equal(mcp.headers.length, 0, 'the server was not called without a credential');
  t.match(await oauthOf(app, upstream.id), { status: 'not_connected', issuer: null });
});

t.test('the full sign-in: start, the authorization server consents and redirects, the callback stores tokens, discovery works with the bearer', async (t) => {
  const { as, mcp } = await protectedServer(t);
  const upstream = await register(app, mcp);
  const started = await app.call('POST', `/client/mcp/upstreams/${upstream.id}/oauth/start`);
  t.equal(started.statusCode, 200, started.body);
  const { authorizationUrl, state, redirectUri } = started.json();
  t.equal(redirectUri, `${PUBLIC_URL}/client/mcp/oauth/callback`);
  const asked = new URL(authorizationUrl);
  t.equal(asked.origin, as.url);
  t.equal(asked.searchParams.get('code_challenge_method'), 'S256');
  t.equal(asked.searchParams.get('state'), state);
  t.equal(asked.searchParams.get('resource'), `${mcp.url}/mcp`, "the server's resource indicator (RFC 8707)");
  t.equal(asked.searchParams.get('scope'), 'tracker', "the scopes the server's metadata lists");
  t.equal(as.registrations.length, 1, 'a client was registered dynamically');
  t.same(as.registrations[0]!.redirectUris, [redirectUri]);
  t.equal((await app.call('GET', `/client/mcp/oauth/status?state=${encodeURIComponent(state)}`)).json().status, 'pending');

  const { callback } = await browserSignIn(app, authorizationUrl);
  t.equal(callback.statusCode, 200, callback.body);
  t.match(callback.body, /Signed in/);
  t.match((await app.call('GET', `/client/mcp/oauth/status?state=${encodeURIComponent(state)}`)).json(), { status: 'connected', error: null, upstreamId: upstream.id });
  const connection = await oauthOf(app, upstream.id);
  t.match(connection, { status: 'connected', issuer: as.url, client: 'registered', clientId: as.registrations[0]!.clientId, scopes: ['tracker'] });
  t.equal(connection.accessTokenExpiresAt, new Date(nowMs + as.accessTtlMs).toISOString());
  t.notOk(JSON.stringify(connection).match(/token"|secret/i), 'no token or secret in the view');

  const now = (await app.call('GET', `/client/mcp/upstreams/${upstream.id}`)).json();
  t.match(now.health, { status: 'ok', toolCount: 2 }, 'the callback listed the tools at once');
  const sent = mcp.headers.at(-1)!.authorization ?? '';
  t.ok(as.accepts(sent.replace(/^Bearer /, '')), 'the server got a bearer its authorization server issued');
  t.notOk(
    mcp.headers.some((headers) => (headers.authorization ?? '').includes(app.ownerToken)),
    "the caller's credential is never forwarded",
  );
});

t.test('a callback is used once: the same link again is refused and changes nothing', async (t) => {
  const { mcp } = await protectedServer(t);
  const upstream = await register(app, mcp);
  const { back, callback } = await signIn(app, upstream.id);
  t.equal(callback.statusCode, 200);
  const again = await app.call('GET', `${back.pathname}${back.search}`, { token: null });
  t.equal(again.statusCode, 400);
  t.match(again.body, /unknown, finished already or expired/);
  t.equal((await oauthOf(app, upstream.id)).status, 'connected');
});

t.test('an access_denied from the authorization server is recorded: the status says failed and why', async (t) => {
  const { as, mcp } = await protectedServer(t);
  const upstream = await register(app, mcp);
  as.deny = true;
  const { state, callback } = await signIn(app, upstream.id);
  t.equal(callback.statusCode, 400);
  t.match(callback.body, /access_denied/);
  t.match((await app.call('GET', `/client/mcp/oauth/status?state=${encodeURIComponent(state)}`)).json(), {
    status: 'failed',
    error: { code: 'access_denied', message: /The person said no/ },
  });
  t.equal((await oauthOf(app, upstream.id)).status, 'not_connected');
});

t.test('only whoever started a sign-in sees its status', async (t) => {
  const { mcp } = await protectedServer(t);
  const upstream = await register(app, mcp);
  const started = (await app.call('POST', `/client/mcp/upstreams/${upstream.id}/oauth/start`)).json();
  const other = await createKey(app, { name: 'another reader', scopes: ['mcp:read', 'mcp:write'] });
  const seen = await app.call('GET', `/client/mcp/oauth/status?state=${encodeURIComponent(started.state)}`, { token: other.key });
  t.equal(seen.statusCode, 404);
  t.equal(seen.json().error.code, 'oauth_sign_in_not_found');
});

t.test('a sign-in expires: its status says expired and its callback is refused', async (t) => {
  const { mcp } = await protectedServer(t);
  const upstream = await register(app, mcp);
  const started = (await app.call('POST', `/client/mcp/upstreams/${upstream.id}/oauth/start`)).json();
  nowMs += 11 * 60_000;
  t.equal((await app.call('GET', `/client/mcp/oauth/status?state=${encodeURIComponent(started.state)}`)).json().status, 'expired');
  const { callback } = await browserSignIn(app, started.authorizationUrl);
  t.equal(callback.statusCode, 400);
  t.equal((await oauthOf(app, upstream.id)).status, 'not_connected');
});

t.test('an access token about to expire is refreshed first, and the rotated refresh token is kept', async (t) => {
  const { as, mcp } = await protectedServer(t);
  as.accessTtlMs = 120_000;
  const upstream = await register(app, mcp);
  await signIn(app, upstream.id);
  t.equal((await refresh(app, upstream.id)).ok, true);
  t.equal(as.refreshes.length, 0, 'a token far from expiry is used as it is');
  nowMs += 70_000;
  t.equal((await refresh(app, upstream.id)).ok, true, 'within the margin: refreshed, then used');
  nowMs += 120_000;
  t.equal((await refresh(app, upstream.id)).ok, true, 'and again, with the rotated refresh token');
  t.same(
    as.refreshes.map((each) => each.outcome),
    ['rotated', 'rotated'],
  );
  t.ok((await oauthOf(app, upstream.id)).lastRefreshedAt);
});

t.test('a refused refresh token puts the upstream into needs_sign_in: in its OAuth status, its health and an event', async (t) => {
  const { as, mcp } = await protectedServer(t);
  const upstream = await register(app, mcp);
  await signIn(app, upstream.id);
  as.revokeAll();
  nowMs += as.accessTtlMs + 1_000;
  const outcome = await refresh(app, upstream.id);
  t.match(outcome, { ok: false, error: { kind: 'needs_sign_in' } });
  t.match(outcome.upstream.health, { status: 'error', errorKind: 'needs_sign_in' });
  t.match(await oauthOf(app, upstream.id), { status: 'needs_sign_in', reason: /invalid_grant/ });
  const database = app.app.svc.container.resolve(Tokens.Database);
  const events = await database.query<{ type: string }>("SELECT type FROM events WHERE subject = $1 AND type = 'mcp.upstream.needs_sign_in'", [upstream.id]);
  t.equal(events.rows.length, 1);
  t.equal((await refresh(app, upstream.id)).error.kind, 'needs_sign_in', 'the server is not asked again');
  t.equal(as.refreshes.length, 1);

  // Signing in again connects it anew.
  await signIn(app, upstream.id);
  t.equal((await oauthOf(app, upstream.id)).status, 'connected');
  t.equal((await refresh(app, upstream.id)).ok, true);
});

t.test('DELETE /oauth revokes the refresh token at the server and forgets the tokens', async (t) => {
  const { as, mcp } = await protectedServer(t);
  const upstream = await register(app, mcp);
  await signIn(app, upstream.id);
  const forgotten = await app.call('DELETE', `/client/mcp/upstreams/${upstream.id}/oauth`);
  t.equal(forgotten.statusCode, 200, forgotten.body);
  t.same(forgotten.json(), { object: 'mcp_upstream_oauth', upstreamId: upstream.id, status: 'not_connected', revoked: true });
  t.equal(as.revocations.length, 1);
  t.match(await oauthOf(app, upstream.id), { status: 'not_connected', accessTokenExpiresAt: null });
  t.equal((await refresh(app, upstream.id)).error.kind, 'not_connected');
  await signIn(app, upstream.id);
  t.equal(as.registrations.length, 1, 'signing in again reuses the registered client');
});

t.test('an authorization server without dynamic registration needs an OAuth app', async (t) => {
  const { mcp } = await protectedServer(t, { registration: false });
  const upstream = await register(app, mcp);
  const started = await app.call('POST', `/client/mcp/upstreams/${upstream.id}/oauth/start`);
  t.equal(started.statusCode, 400);
  t.equal(started.json().error.code, 'oauth_registration_unsupported');
});

t.test("with the customer's OAuth app: its client signs in, nothing is registered, the secret is never shown", async (t) => {
  const redirectUri = `${PUBLIC_URL}/client/mcp/oauth/callback`;
  const { as, mcp } = await protectedServer(t, { registration: false, clients: { 'own-client': { secret: 's3cret-value', redirectUris: [redirectUri] } } });
  const created = await app.call('POST', '/client/mcp/oauth-apps', {
    body: { name: 'Tracker app', clientId: 'own-client', clientSecret: 's3cret-value', authorizationServerUrl: as.url, scopes: ['tracker'] },
  });
  t.equal(created.statusCode, 201, created.body);
  const oauthApp = created.json();
  t.match(oauthApp, { object: 'mcp_oauth_app', clientId: 'own-client', hasClientSecret: true, scopes: ['tracker'] });
  t.notOk(created.body.includes('s3cret-value'));
  const upstream = await register(app, mcp, { type: 'oauth', oauthAppId: oauthApp.id });
  const { callback } = await signIn(app, upstream.id);
  t.equal(callback.statusCode, 200, callback.body);
  t.match(await oauthOf(app, upstream.id), { status: 'connected', client: 'oauth_app', oauthAppId: oauthApp.id });
  t.equal(as.registrations.length, 0);
  t.match((await app.call('GET', `/client/mcp/upstreams/${upstream.id}`)).json().health, { status: 'ok', toolCount: 2 });
  const listed = await app.call('GET', '/client/mcp/oauth-apps?limit=200');
  t.ok(listed.json().data.some((each: { id: string }) => each.id === oauthApp.id));
  t.notOk(listed.body.includes('s3cret-value'));

  const refused = await app.call('DELETE', `/client/mcp/oauth-apps/${oauthApp.id}`);
  t.equal(refused.statusCode, 409);
  t.equal(refused.json().error.code, 'oauth_app_in_use');
  t.equal((await app.call('PATCH', `/client/mcp/upstreams/${upstream.id}`, { body: { auth: { type: 'none' } } })).statusCode, 200);
  t.equal((await app.call('DELETE', `/client/mcp/oauth-apps/${oauthApp.id}`)).statusCode, 200);
  t.equal((await app.call('GET', `/client/mcp/upstreams/${upstream.id}/oauth`)).json().error.code, 'upstream_not_oauth');
});

t.test("an upstream uses only an OAuth app of its own project; an unknown app is the app's 404", async (t) => {
  const { as, mcp } = await protectedServer(t);
  const project = await app.call('POST', '/client/projects', { body: { name: 'Elsewhere' } });
  t.equal(project.statusCode, 201, project.body);
  const oauthApp = (await app.call('POST', '/client/mcp/oauth-apps', { body: { name: 'Other', clientId: 'c', authorizationServerUrl: as.url, projectId: project.json().id } })).json();
  const other = await app.call('POST', '/client/mcp/upstreams', { body: { name: 'T', url: `${mcp.url}/mcp`, auth: { type: 'oauth', oauthAppId: oauthApp.id } } });
  t.equal(other.statusCode, 400);
  t.match(other.json().error, { code: 'oauth_app_other_project', param: 'auth.oauthAppId' });
  const unknown = await app.call('POST', '/client/mcp/upstreams', {
    body: { name: 'T', url: `${mcp.url}/mcp`, auth: { type: 'oauth', oauthAppId: '00000000-0000-4000-8000-000000000000' } },
  });
  t.equal(unknown.statusCode, 404);
  t.equal(unknown.json().error.code, 'oauth_app_not_found');
});

t.test('start refuses an upstream that does not use OAuth', async (t) => {
  const mcp = await startFakeMcpServer([tool('search')]);
  t.teardown(() => mcp.close());
  const upstream = await register(app, mcp, { type: 'none' });
  const started = await app.call('POST', `/client/mcp/upstreams/${upstream.id}/oauth/start`);
  t.equal(started.statusCode, 409);
  t.equal(started.json().error.code, 'upstream_not_oauth');
});

t.test("an OAuth app's authorization server on a private address is refused where customer URLs must be public", async (t) => {
  const guarded = await buildTestApp(t);
  const refused = await guarded.call('POST', '/client/mcp/oauth-apps', { body: { name: 'Local', clientId: 'c', authorizationServerUrl: 'https://127.0.0.1:8443' } });
  t.equal(refused.statusCode, 400);
  t.match(refused.json().error, { code: 'oauth_url_refused', param: 'authorizationServerUrl' });
  const plain = await guarded.call('POST', '/client/mcp/oauth-apps', { body: { name: 'Plain', clientId: 'c', authorizationServerUrl: 'http://auth.example.com' } });
  t.match(plain.json().error, { code: 'oauth_url_invalid', param: 'authorizationServerUrl' });
});

t.test("an OAuth app's secret is replaced or removed by PATCH and never shown", async (t) => {
  const created = (
    await app.call('POST', '/client/mcp/oauth-apps', { body: { name: 'Rotated', clientId: 'c', clientSecret: 'first-secret', authorizationServerUrl: 'https://auth.example.invalid' } })
  ).json();
  const rotated = await app.call('PATCH', `/client/mcp/oauth-apps/${created.id}`, { body: { clientSecret: 'second-secret', scopes: ['a', 'b'] } });
  t.equal(rotated.statusCode, 200, rotated.body);
  t.match(rotated.json(), { hasClientSecret: true, scopes: ['a', 'b'] });
  t.notOk(rotated.body.includes('second-secret'));
  const removed = (await app.call('PATCH', `/client/mcp/oauth-apps/${created.id}`, { body: { clientSecret: null, scopes: null } })).json();
  t.match(removed, { hasClientSecret: false, scopes: null });
  const vault = app.app.svc.container.resolve(Tokens.Secrets);
  t.equal(await vault.get({ kind: 'mcp_oauth_app', id: created.id }, 'client_secret'), null, 'the secret left the vault');
});

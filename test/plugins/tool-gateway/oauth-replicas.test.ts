import { randomBytes } from 'node:crypto';
import t from 'tap';
import { generateToken, SESSION_PREFIX } from '../../../core/identity/api-tokens.ts';
import { buildTestApp, realServersConfig, type TestApp } from '../../helpers/app.ts';
import { startFakeAuthorizationServer } from './fake-authorization-server.ts';
import { startFakeMcpServer, tool } from './fake-mcp-server.ts';

t.setTimeout(120_000);

const servers = realServersConfig();
const PUBLIC_URL = 'https://gateway.example.com';

t.test(
  'two replicas calling an upstream whose token expires refresh it once per expiry: no refresh token is sent twice, both keep working',
  { skip: servers ? false : 'needs TEST_PG_URL and TEST_REDIS_URL (two replicas share the real servers)' },
  async (t) => {
    const shared = servers!;
    t.teardown(() => shared.dropSchema());
    let nowMs = Date.parse('2026-11-20T08:00:00.000Z');
    const clock = () => new Date(nowMs);
    const config = {
      storage: shared.storage,
      outbound: { allowPrivateNetwork: true },
      server: { publicUrl: PUBLIC_URL },
      bootstrap: { ownerToken: generateToken(SESSION_PREFIX) },
      // One key sealing the vault for both replicas: the tokens one stores, the other reads.
      secrets: { keys: [`k1:${randomBytes(32).toString('base64')}`] },
    };
    const a = await buildTestApp(t, { config, clock });
    const b = await buildTestApp(t, { config, clock });
    const as = await startFakeAuthorizationServer({ now: () => nowMs });
    as.accessTtlMs = 300_000;
    const mcp = await startFakeMcpServer([tool('search')], { authorizationServer: as.url, accepts: (token) => as.accepts(token) });
    t.teardown(() => Promise.all([as.close(), mcp.close()]));

    const upstream = (await a.call('POST', '/client/mcp/upstreams', { body: { name: 'Tracker', url: `${mcp.url}/mcp`, auth: { type: 'oauth' } } })).json();
    const start = await a.call('POST', `/client/mcp/upstreams/${upstream.id}/oauth/start`);
    t.equal(start.statusCode, 200, start.body);
    const started = start.json();
    const back = new URL((await fetch(started.authorizationUrl, { redirect: 'manual' })).headers.get('location')!);
    // The browser comes back to the other replica: the sign-in is in the shared database.
    t.equal((await b.call('GET', `${back.pathname}${back.search}`, { token: null })).statusCode, 200);

    const refreshOn = async (replica: TestApp) => (await replica.call('POST', `/client/mcp/upstreams/${upstream.id}/refresh`)).json() as { ok: boolean };
    for (const round of [1, 2, 3]) {
      nowMs += as.accessTtlMs + 1_000;
      // Both replicas at once, several calls each, all finding the token expired.
      const outcomes = await Promise.all([a, b, a, b, a, b].map(refreshOn));
      t.ok(
        outcomes.every((outcome) => outcome.ok),
        `round ${round}: every call reached the server with a valid bearer`,
      );
      t.equal(as.refreshes.length, round, `round ${round}: one refresh for the expiry, whichever replica made it`);
    }
    t.ok(
      as.refreshes.every((each) => each.outcome === 'rotated'),
      'every refresh presented a live token: none was reused',
    );
    t.equal(new Set(as.refreshes.map((each) => each.refreshToken)).size, as.refreshes.length);
    t.equal((await b.call('GET', `/client/mcp/upstreams/${upstream.id}/oauth`)).json().status, 'connected');
  },
);

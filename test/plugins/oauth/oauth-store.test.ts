import t from 'tap';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { OAuthStore } from '../../../plugins/oauth/oauth-store.ts';
import { buildOAuthApp, issuedCode, type OAuthTestApp, redeem } from '../../helpers/oauth.ts';
import { onEachBackend } from '../../helpers/people.ts';

t.setTimeout(240_000);

const DAY = 86_400_000;

async function tokenRows(test: OAuthTestApp): Promise<string[]> {
  const { rows } = await test.app.svc.container.resolve(Tokens.Database).query<{ kind: string }>('SELECT kind FROM oauth_tokens ORDER BY kind');
  return rows.map((row) => row.kind);
}

onEachBackend(t, 'tokens are pruned a day after they expire, refresh tokens kept until then', async (t, config) => {
  let now = Date.parse('2026-02-02T09:00:00Z');
  const test = await buildOAuthApp(t, { config, clock: () => new Date(now) });
  const issued = await issuedCode(test);
  const tokens = (await redeem(test, issued)).json();
  const store = new OAuthStore(test.app.svc.container.resolve(Tokens.Database));
  t.same(await tokenRows(test), ['access', 'refresh']);

  now += 2 * DAY;
  await store.pruneExpired(new Date(now));
  t.same(await tokenRows(test), ['refresh'], 'the access token, expired for more than a day, is gone');
  const refreshed = await test.auth('POST', '/token', { form: { grant_type: 'refresh_token', client_id: issued.clientId, refresh_token: tokens.refresh_token } });
  t.equal(refreshed.statusCode, 200, 'the refresh token still works');

  now += 40 * DAY;
  await store.pruneExpired(new Date(now));
  t.same(await tokenRows(test), [], 'every token has expired');
});

import t from 'tap';
import { generateToken, SESSION_PREFIX } from '../../core/identity/api-tokens.ts';
import { buildTestApp, nextInvalidation, realServersConfig } from '../helpers/app.ts';
import { signedInPerson } from '../helpers/people.ts';

const servers = realServersConfig();

t.test(
  'signing out on one replica ends the session on the other at once',
  { skip: servers ? false : 'needs TEST_PG_URL and TEST_REDIS_URL (two replicas share the real servers)' },
  async (t) => {
    const shared = servers!;
    t.teardown(() => shared.dropSchema());
    // A long cache TTL proves the refusal comes from the pushed invalidation, not from expiry.
    const config = { storage: shared.storage, auth: { credentialCacheTtlMs: 60_000 }, bootstrap: { ownerToken: generateToken(SESSION_PREFIX) } };
    const a = await buildTestApp(t, { config });
    const b = await buildTestApp(t, { config });
    const { cookie, csrf } = await signedInPerson(a, 'roaming@example.com');
    const headers = { cookie };
    t.equal((await b.call('GET', '/client/whoami', { token: null, headers })).statusCode, 200, 'replica B has the browser session cached');

    const heardOnB = await nextInvalidation(b.app);
    const out = await a.call('POST', '/client/auth/sign-out', { token: null, headers: { cookie, 'x-csrf-token': csrf } });
    t.equal(out.statusCode, 200, out.body);
    await heardOnB();
    const after = await b.call('GET', '/client/whoami', { token: null, headers });
    t.equal(after.statusCode, 401);
    t.equal(after.json().error.code, 'session_revoked');
  },
);

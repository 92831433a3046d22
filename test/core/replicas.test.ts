import t from 'tap';
import { generateToken, SESSION_PREFIX } from '../../core/identity/api-tokens.ts';
import { buildTestApp, createKey, realServersConfig, twoReplicasPushingInvalidations } from '../helpers/app.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { eventually } from '../helpers/eventually.ts';

// Cross-replica behaviour needs the real servers; CI provides them (TEST_PG_URL, TEST_REDIS_URL).
const servers = realServersConfig();

t.test('two replicas sharing PostgreSQL and Redis', { skip: servers ? false : 'needs TEST_PG_URL and TEST_REDIS_URL' }, async (t) => {
  const [a, b] = await twoReplicasPushingInvalidations(t, servers!);

  // The pushed invalidation arrives within milliseconds; the deadline below only bounds a failing
  // test and stays far inside the 60 s cache TTL, so a refusal can only have come from the push.
  const refusedBy = (replica: typeof a, key: string) =>
    eventually(
      async () => {
        const response = await replica.call('GET', '/client/whoami', { token: key });
        return response.statusCode === 401 ? response : null;
      },
      'the other replica to refuse the key',
      { timeoutMs: 20_000 },
    );

  t.test('a key revoked on one replica is refused by the other long before its cache entry expires', async (t) => {
    const { id, key } = await createKey(a);
    const before = await b.call('GET', '/client/whoami', { token: key });
    t.equal(before.statusCode, 200, 'replica B has the key cached');
    const revoked = await a.call('DELETE', `/client/keys/${id}`);
    t.equal(revoked.statusCode, 200);
    const started = Date.now();
    const refused = await refusedBy(b, key);
    t.equal(refused.statusCode, 401, `refused after ${Date.now() - started} ms`);
  });

  t.test('a key disabled on one replica is refused by the other long before its cache entry expires', async (t) => {
    const { id, key } = await createKey(b);
    t.equal((await a.call('GET', '/client/whoami', { token: key })).statusCode, 200);
    await b.call('PATCH', `/client/keys/${id}`, { body: { disabled: true } });
    const refused = await refusedBy(a, key);
    t.equal(refused.statusCode, 401);
    t.equal(refused.json().error.code, 'key_disabled');
  });

  t.test('both replicas share one bootstrapped organisation', async (t) => {
    t.equal(a.app.svc.bootstrap === null || b.app.svc.bootstrap === null, true, 'only one replica bootstrapped');
    const whoA = (await a.call('GET', '/client/whoami')).json();
    const whoB = (await b.call('GET', '/client/whoami')).json();
    t.equal(whoA.account.id, whoB.account.id);
  });
});

t.test('replicas starting at the same moment bootstrap one organisation', { skip: servers ? false : 'needs TEST_PG_URL and TEST_REDIS_URL' }, async (t) => {
  const fresh = realServersConfig()!;
  t.teardown(() => fresh.dropSchema());
  const ownerToken = generateToken(SESSION_PREFIX);
  const config = { storage: fresh.storage, bootstrap: { ownerToken } };
  const apps = await Promise.all([buildTestApp(t, { config }), buildTestApp(t, { config }), buildTestApp(t, { config })]);
  t.equal(apps.filter((app) => app.app.svc.bootstrap !== null).length, 1);
  const db = apps[0]!.app.svc.container.resolve(Tokens.Database);
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM organizations');
  t.equal(rows[0]?.n, 1);
});

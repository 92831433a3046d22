import t from 'tap';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { buildTestApp, createKey, realServersConfig, twoReplicasPushingInvalidations, type TestApp } from '../../helpers/app.ts';
import { eventually } from '../../helpers/eventually.ts';
import { onEveryBackend } from '../metering/metered-gateway.ts';

/**
 * Issue 16, item 1: keys remember the key that made them; revoking or pausing a key does the same
 * to every key it made, transitively, at once on every replica.
 */

async function mint(test: TestApp, makerKey: string): Promise<{ id: string; key: string }> {
  const response = await test.call('POST', '/client/keys', { token: makerKey, body: { name: 'minted', scopes: ['inference', 'keys:write'] } });
  if (response.statusCode !== 201) throw new Error(`minting failed: ${response.statusCode} ${response.body}`);
  return { id: response.json().id, key: response.json().key };
}

const family = async (test: TestApp) => {
  const parent = await createKey(test, { name: 'parent', scopes: ['inference', 'keys:write'] });
  const child = await mint(test, parent.key);
  const grandchild = await mint(test, child.key);
  return { parent, child, grandchild };
};

const whoamiCode = async (test: TestApp, key: string) => {
  const response = await test.call('GET', '/client/whoami', { token: key });
  return response.statusCode === 200 ? 200 : response.json().error.code;
};

onEveryBackend(t, (t, storage) => {
  let test: TestApp;
  t.before(async () => {
    // A long cache TTL: a refusal can only come from the invalidation, not from the entry expiring.
    test = await buildTestApp(t, { config: { ...(storage ? { storage } : {}), auth: { credentialCacheTtlMs: 60_000 } } });
  });

  t.test('revoking a key revokes every key it made, transitively', async (t) => {
    const { parent, child, grandchild } = await family(test);
    t.equal(await whoamiCode(test, grandchild.key), 200, 'the grandchild works (and is cached)');
    t.equal((await test.call('DELETE', `/client/keys/${parent.id}`)).statusCode, 200);
    t.equal(await whoamiCode(test, child.key), 'key_revoked');
    t.equal(await whoamiCode(test, grandchild.key), 'key_revoked');
    for (const { id } of [child, grandchild]) t.equal((await test.call('GET', `/client/keys/${id}`)).json().status, 'revoked', 'listed as revoked');
  });

  t.test('deleting a key permanently revokes every key it made', async (t) => {
    const { parent, child, grandchild } = await family(test);
    t.equal((await test.call('DELETE', `/client/keys/${parent.id}?permanent=true`)).statusCode, 200);
    t.equal(await whoamiCode(test, child.key), 'key_revoked');
    t.equal(await whoamiCode(test, grandchild.key), 'key_revoked');
  });

  t.test('pausing a key pauses every key it made until it is resumed', async (t) => {
    const { parent, child, grandchild } = await family(test);
    t.equal(await whoamiCode(test, grandchild.key), 200);
    t.equal((await test.call('PATCH', `/client/keys/${parent.id}`, { body: { disabled: true } })).statusCode, 200);
    t.equal(await whoamiCode(test, child.key), 'key_disabled');
    t.equal(await whoamiCode(test, grandchild.key), 'key_disabled');
    t.equal((await test.call('PATCH', `/client/keys/${parent.id}`, { body: { disabled: false } })).statusCode, 200);
    t.equal(await whoamiCode(test, grandchild.key), 200, 'resuming the maker resumes them');
  });

  t.test('a key remembers the key that made it', async (t) => {
    const { parent, child } = await family(test);
    const db = test.app.svc.container.resolve(Tokens.Database);
    const { rows } = await db.query<{ created_by_key_id: string }>('SELECT created_by_key_id FROM api_keys WHERE id = $1', [child.id]);
    t.equal(rows[0]?.created_by_key_id, parent.id);
  });
});

const servers = realServersConfig();

t.test('across two replicas sharing PostgreSQL and Redis', { skip: servers ? false : 'needs TEST_PG_URL and TEST_REDIS_URL' }, async (t) => {
  const [a, b] = await twoReplicasPushingInvalidations(t, servers!);
  const refusedBy = (replica: TestApp, key: string, code: string) =>
    eventually(async () => (await whoamiCode(replica, key)) === code, `the other replica to answer ${code}`, { timeoutMs: 20_000 });

  t.test('a key revoked on one replica takes the keys it made with it on the other, long before their cache entries expire', async (t) => {
    const { parent, child, grandchild } = await family(a);
    t.equal(await whoamiCode(b, child.key), 200, 'replica B has the child cached');
    t.equal(await whoamiCode(b, grandchild.key), 200, 'and the grandchild');
    t.equal((await a.call('DELETE', `/client/keys/${parent.id}`)).statusCode, 200);
    t.ok(await refusedBy(b, child.key, 'key_revoked'));
    t.ok(await refusedBy(b, grandchild.key, 'key_revoked'));
  });

  t.test('a key paused on one replica pauses the keys it made on the other', async (t) => {
    const { parent, grandchild } = await family(b);
    t.equal(await whoamiCode(a, grandchild.key), 200);
    t.equal((await b.call('PATCH', `/client/keys/${parent.id}`, { body: { disabled: true } })).statusCode, 200);
    t.ok(await refusedBy(a, grandchild.key, 'key_disabled'));
  });
});

import t from 'tap';
import { generateToken, SESSION_PREFIX } from '../../../core/identity/api-tokens.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { addPerson, buildTestApp, createKey, realServersConfig, type TestApp } from '../../helpers/app.ts';
import { eventually } from '../../helpers/eventually.ts';
import { startMeteredGateway, user } from '../metering/metered-gateway.ts';

/**
 * POST /client/keys/{id}/recreate: the same key record with a new secret; the replaced secret dies
 * at once or when the overlap the caller chose ends, on every replica.
 */

/** A clock the test moves by hand; every replica of a test reads the same one. */
function handClock(start = new Date('2026-06-01T12:00:00Z')) {
  let now = start.getTime();
  return { clock: () => new Date(now), advance: (ms: number) => (now += ms) };
}

const whoami = async (test: TestApp, key: string) => {
  const response = await test.call('GET', '/client/whoami', { token: key });
  return response.statusCode === 200 ? 200 : (response.json().error.code as string);
};

const recreate = (test: TestApp, id: string, body?: Record<string, unknown>, token?: string) =>
  test.call('POST', `/client/keys/${id}/recreate`, { ...(token ? { token } : {}), ...(body ? { body } : {}) });

const time = handClock();
// The longest cache TTL, on the injected clock: the overlaps below end while the secret's entry is
// still cached, so a refusal comes from the entry's own end of overlap, not from a fresh lookup.
const test = await buildTestApp(t, { clock: time.clock, config: { auth: { credentialCacheTtlMs: 60_000 } } });

t.test('a recreated key keeps its id and every setting and answers its new secret once', async (t) => {
  const settings = {
    name: 'settled',
    scopes: ['inference', 'usage:read'],
    models: ['mock-small'],
    expiresAt: '2030-01-01T00:00:00.000Z',
    spendCap: { usd: 12.5, period: 'month', mode: 'blocking' },
    rateLimits: { requestsPerMinute: 30, tokensPerMinute: null, concurrency: 2 },
  };
  const created = await createKey(test, settings);
  const response = await recreate(test, created.id);
  t.equal(response.statusCode, 200, response.body);
  const body = response.json();
  t.equal(body.id, created.id, 'the same key');
  t.match(body.key, /^svc_live_[A-Za-z0-9]{43}$/);
  t.not(body.key, created.key, 'a new secret');
  t.equal(body.hint, `svc_live_…${body.key.slice(-4)}`, 'the hint is the new secret’s');
  for (const field of ['name', 'projectId', 'scopes', 'models', 'expiresAt', 'spendCap', 'rateLimits', 'createdAt', 'status']) {
    t.same(body[field], created.body[field], `${field} is kept`);
  }
  t.equal(body.previousSecretExpiresAt, time.clock().toISOString(), 'without an overlap the old secret ends now');
  const detail = (await test.call('GET', `/client/keys/${created.id}`)).json();
  t.equal(detail.hint, body.hint);
  t.notOk(JSON.stringify(detail).includes(body.key), 'the plaintext is never shown again');
});

t.test('without an overlap the replaced secret is refused at once, even though it was cached', async (t) => {
  const created = await createKey(test, { name: 'rotated now' });
  t.equal(await whoami(test, created.key), 200, 'the old secret is cached');
  const fresh = (await recreate(test, created.id, { overlapSeconds: 0 })).json().key as string;
  t.equal(await whoami(test, created.key), 'invalid_api_key');
  t.equal(await whoami(test, fresh), 200);
});

t.test('with an overlap both secrets work until it ends, then only the new one (injected clock)', async (t) => {
  const created = await createKey(test, { name: 'rotated gently' });
  const response = await recreate(test, created.id, { overlapSeconds: 45 });
  const fresh = response.json().key as string;
  t.equal(response.json().previousSecretExpiresAt, new Date(time.clock().getTime() + 45_000).toISOString());
  t.equal(await whoami(test, created.key), 200, 'the old secret still works');
  t.equal(await whoami(test, fresh), 200, 'so does the new one');
  time.advance(44_000);
  t.equal(await whoami(test, created.key), 200, 'a second before the end');
  time.advance(1_000);
  t.equal(await whoami(test, created.key), 'invalid_api_key', 'refused once the overlap has ended');
  t.equal(await whoami(test, fresh), 200);
});

t.test('recreating again during an overlap ends the older secret no later than the new overlap', async (t) => {
  const created = await createKey(test, { name: 'rotated twice' });
  const second = (await recreate(test, created.id, { overlapSeconds: 3_600 })).json().key as string;
  t.equal(await whoami(test, created.key), 200, 'the first secret is in its overlap');
  const third = (await recreate(test, created.id, { overlapSeconds: 60 })).json().key as string;
  t.equal(await whoami(test, created.key), 200, 'the first secret now ends with the second overlap');
  t.equal(await whoami(test, second), 200);
  time.advance(60_000);
  t.equal(await whoami(test, created.key), 'invalid_api_key', 'the first secret did not keep its hour');
  t.equal(await whoami(test, second), 'invalid_api_key');
  t.equal(await whoami(test, third), 200);
  const fourth = (await recreate(test, created.id)).json().key as string;
  t.equal(await whoami(test, third), 'invalid_api_key');
  t.equal(await whoami(test, fourth), 200);
});

t.test('the keys a recreated key made keep working and stay bound to it', async (t) => {
  const parent = await createKey(test, { name: 'maker', scopes: ['inference', 'keys:write'] });
  const child = (await test.call('POST', '/client/keys', { token: parent.key, body: { name: 'made' } })).json();
  t.equal(await whoami(test, child.key), 200);
  t.equal((await recreate(test, parent.id)).statusCode, 200);
  t.equal(await whoami(test, child.key), 200, 'the made key is untouched');
  t.equal((await test.call('DELETE', `/client/keys/${parent.id}`)).statusCode, 200);
  t.equal(await whoami(test, child.key), 'key_revoked', 'revoking the maker still takes it along');
});

t.test('a revoked key answers 409 key_revoked, an app’s key 409 app_owned_key, and nothing changes', async (t) => {
  const revoked = await createKey(test, { name: 'gone' });
  await test.call('DELETE', `/client/keys/${revoked.id}`);
  const refused = await recreate(test, revoked.id);
  t.equal(refused.statusCode, 409);
  t.equal(refused.json().error.code, 'key_revoked');
  t.equal((await test.call('GET', `/client/keys/${revoked.id}`)).json().hint, revoked.body.hint);

  const identity = test.app.svc.container.resolve(Tokens.Identity);
  const appKey = await identity.apiKeys.create({
    organizationId: test.organizationId,
    projectId: test.defaultProjectId,
    appId: '7d1f4a57-2b5c-4e0f-8a3b-0c9d8e7f6a5b',
    name: 'an app’s key',
    tokenHash: `hash-${Math.random()}`,
    hint: 'svc_live_…app0',
    scopes: ['inference'],
    modelAllowList: null,
    expiresAt: null,
    spendCap: null,
    createdByPersonId: null,
    createdByKeyId: null,
  });
  const ofApp = await recreate(test, appKey.id);
  t.equal(ofApp.statusCode, 409);
  t.equal(ofApp.json().error.code, 'app_owned_key');
});

t.test('an unknown key answers 404 key_not_found; an overlap outside 0..86400 or an unknown field 400', async (t) => {
  const missing = await recreate(test, '5a0c1e7e-0000-4000-8000-000000000000');
  t.equal(missing.statusCode, 404);
  t.equal(missing.json().error.code, 'key_not_found');
  const { id } = await createKey(test, { name: 'bad bodies' });
  for (const body of [{ overlapSeconds: -1 }, { overlapSeconds: 86_401 }, { overlapSeconds: 1.5 }, { overlapSeconds: '60' }]) {
    const response = await recreate(test, id, body);
    t.equal(response.statusCode, 400, JSON.stringify(body));
    t.equal(response.json().error.param, 'overlapSeconds');
  }
  const unknown = await recreate(test, id, { overlap: 60 });
  t.equal(unknown.json().error.code, 'unknown_field');
  t.equal(unknown.json().error.param, 'overlap');
  t.equal((await recreate(test, id, { overlapSeconds: 86_400 })).statusCode, 200, 'a day is allowed');
});

t.test('a key recreates itself: the secret it called with dies at once, the new one works', async (t) => {
  const self = await createKey(test, { name: 'self-rotating', scopes: ['keys:write', 'keys:read'] });
  const response = await recreate(test, self.id, undefined, self.key);
  t.equal(response.statusCode, 200, response.body);
  t.equal(await whoami(test, self.key), 'invalid_api_key');
  t.equal(await whoami(test, response.json().key), 200);
});

t.test('a key may not recreate a key holding scopes or models it could not grant', async (t) => {
  const writer = await createKey(test, { name: 'narrow writer', scopes: ['inference', 'keys:write'], models: ['mock-small'] });
  const wider = await createKey(test, { name: 'wider scopes', scopes: ['inference', 'usage:read'], models: ['mock-small'] });
  const everyModel = await createKey(test, { name: 'every model', scopes: ['inference'] });
  const byScope = await recreate(test, wider.id, undefined, writer.key);
  t.equal(byScope.statusCode, 403);
  t.same([byScope.json().error.code, byScope.json().error.param], ['scope_escalation', 'id']);
  const byModel = await recreate(test, everyModel.id, undefined, writer.key);
  t.same([byModel.statusCode, byModel.json().error.code], [403, 'limit_escalation']);
  const within = await createKey(test, { name: 'within', scopes: ['inference'], models: ['mock-small'] });
  t.equal((await recreate(test, within.id, undefined, writer.key)).statusCode, 200, 'a key within it may be recreated');
});

t.test('a key with an expiry, cap or rate limits recreates only itself and the keys it made', async (t) => {
  const bounded = await createKey(test, { name: 'bounded', scopes: ['inference', 'keys:write'], rateLimits: { requestsPerMinute: 10 } });
  const sibling = await createKey(test, { name: 'sibling', scopes: ['inference'] });
  const refused = await recreate(test, sibling.id, undefined, bounded.key);
  t.same([refused.statusCode, refused.json().error.code], [403, 'limit_escalation']);
  const made = (await test.call('POST', '/client/keys', { token: bounded.key, body: { name: 'made by bounded' } })).json();
  t.equal((await recreate(test, made.id, undefined, bounded.key)).statusCode, 200, 'a key it made');
  t.equal((await recreate(test, bounded.id, undefined, bounded.key)).statusCode, 200, 'itself');
});

t.test('a person may not recreate a key holding management scopes their role lacks', async (t) => {
  const member = await addPerson(test, { role: 'member' });
  await test.app.svc.container.resolve(Tokens.Identity).projectMembers.upsert({ projectId: test.defaultProjectId, personId: member.personId, role: 'developer' });
  const hook = await createKey(test, { name: 'webhooks', scopes: ['webhooks:write'] });
  const refused = await recreate(test, hook.id, undefined, member.token);
  t.same([refused.statusCode, refused.json().error.code], [403, 'scope_escalation']);
  const plain = await createKey(test, { name: 'plain' });
  t.equal((await recreate(test, plain.id, undefined, member.token)).statusCode, 200);
});

t.test('recreating emits key.recreated with the new hint and the old one, never a secret', async (t) => {
  const created = await createKey(test, { name: 'announced' });
  const fresh = (await recreate(test, created.id, { overlapSeconds: 90 })).json();
  const db = test.app.svc.container.resolve(Tokens.Database);
  const { rows } = await db.query<{ data: unknown }>("SELECT data FROM events WHERE type = 'key.recreated' AND subject = $1", [created.id]);
  t.equal(rows.length, 1);
  const data = (typeof rows[0]!.data === 'string' ? JSON.parse(rows[0]!.data) : rows[0]!.data) as Record<string, unknown>;
  t.match(data, { keyId: created.id, hint: fresh.hint, previousHint: created.body.hint, previousSecretExpiresAt: fresh.previousSecretExpiresAt });
  t.notOk(JSON.stringify(data).includes(fresh.key) || JSON.stringify(data).includes(created.key), 'no secret in the event');
});

t.test('a refused recreate changes nothing and emits nothing', async (t) => {
  const writer = await createKey(test, { name: 'refused writer', scopes: ['keys:write'] });
  const target = await createKey(test, { name: 'out of reach', scopes: ['usage:read'] });
  t.equal((await recreate(test, target.id, undefined, writer.key)).statusCode, 403);
  t.equal(await whoami(test, target.key), 200, 'the secret still works');
  const db = test.app.svc.container.resolve(Tokens.Database);
  const { rows } = await db.query("SELECT 1 FROM events WHERE type = 'key.recreated' AND subject = $1", [target.id]);
  t.equal(rows.length, 0);
});

t.test('the spend of a key before it was recreated still counts for its cap and its spend windows', async (t) => {
  const g = await startMeteredGateway(t);
  const { id, key } = await g.newKey({ name: 'capped', spendCap: { usd: 1, period: 'month', mode: 'blocking' } });
  t.equal((await g.chat(key, { model: 'solo', messages: user('before'), max_tokens: 20 })).status, 200);
  await g.settled();
  const before = (await g.test.call('GET', `/client/keys/${id}`)).json();
  t.ok(before.spend.totalUsd > 0, 'the call was billed to the key');
  const fresh = (await g.test.call('POST', `/client/keys/${id}/recreate`)).json().key as string;
  const after = (await g.test.call('GET', `/client/keys/${id}`)).json();
  t.same([after.spend, after.budget], [before.spend, before.budget], 'the same spend and cap standing');
  t.equal((await g.chat(fresh, { model: 'solo', messages: user('after'), max_tokens: 20 })).status, 200);
  await g.settled();
  t.equal(await g.loggedCost(id), BigInt(Math.round((await g.test.call('GET', `/client/keys/${id}`)).json().spend.totalUsd * 1e6)), 'both calls are the key’s');
});

const servers = realServersConfig();

t.test('across two replicas sharing PostgreSQL and Redis', { skip: servers ? false : 'needs TEST_PG_URL and TEST_REDIS_URL' }, async (t) => {
  t.teardown(() => servers!.dropSchema());
  const shared = handClock();
  const ownerToken = generateToken(SESSION_PREFIX);
  // Credentials cached for a minute of the shared clock, which only the test moves: a refusal on B
  // comes from the pushed invalidation or from the end of the overlap its entry carries.
  const config = { storage: servers!.storage, auth: { credentialCacheTtlMs: 60_000 }, bootstrap: { ownerToken } };
  const a = await buildTestApp(t, { config, clock: shared.clock });
  const b = await buildTestApp(t, { config, clock: shared.clock });

  t.test('a secret replaced on one replica without an overlap is refused on the other', async (t) => {
    const created = await createKey(a, { name: 'replicated' });
    t.equal(await whoami(b, created.key), 200, 'replica B has it cached');
    const fresh = (await recreate(a, created.id)).json().key as string;
    await eventually(async () => (await whoami(b, created.key)) === 'invalid_api_key', 'replica B to refuse the replaced secret', { timeoutMs: 20_000 });
    t.equal(await whoami(b, fresh), 200, 'the new secret works on B');
  });

  t.test('a secret in its overlap works on the other replica until the overlap ends there too', async (t) => {
    const created = await createKey(a, { name: 'replicated overlap' });
    t.equal(await whoami(b, created.key), 200, 'replica B has it cached');
    const fresh = (await recreate(a, created.id, { overlapSeconds: 45 })).json().key as string;
    // B drops its entry on the pushed invalidation and reads the secret back with the end of its overlap.
    await eventually(async () => (await whoami(b, fresh)) === 200, 'replica B to accept the new secret');
    t.equal(await whoami(b, created.key), 200, 'the old secret works on B during the overlap');
    shared.advance(45_000);
    t.equal(await whoami(b, created.key), 'invalid_api_key', 'refused on B when the overlap ends');
    t.equal(await whoami(a, created.key), 'invalid_api_key', 'and on A');
  });
});

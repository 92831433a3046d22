import t from 'tap';
import { buildTestApp, createKey, type TestApp } from '../../helpers/app.ts';
import { onEveryBackend } from '../metering/metered-gateway.ts';

/**
 * Issue 16, item 1: a key cannot widen itself or another key beyond what it has, and cannot
 * resume a key a person paused. On the embedded database and on PostgreSQL.
 */

onEveryBackend(t, (t, storage) => {
  let test: TestApp;
  t.before(async () => {
    test = await buildTestApp(t, { config: storage ? { storage } : {} });
  });

  const writerKey = (body: Record<string, unknown> = {}) => createKey(test, { name: 'writer', scopes: ['inference', 'keys:read', 'keys:write'], models: ['mock-small'], ...body });

  t.test('a key cannot change its own models, scopes, expiry, cap or rate limits', async (t) => {
    const { id, key } = await writerKey({ rateLimits: { requestsPerMinute: 2 } });
    for (const [field, value] of [
      ['models', null],
      ['models', ['mock-small']],
      ['scopes', ['inference']],
      ['expiresAt', null],
      ['spendCap', null],
      ['rateLimits', { requestsPerMinute: null }],
    ] as const) {
      const response = await test.call('PATCH', `/client/keys/${id}`, { token: key, body: { [field]: value } });
      t.equal(response.statusCode, 403, `${field}: ${JSON.stringify(value)}`);
      t.equal(response.json().error.code, 'key_cannot_change_itself');
      t.equal(response.json().error.param, field);
    }
    const detail = (await test.call('GET', `/client/keys/${id}`)).json();
    t.same(detail.models, ['mock-small'], 'its model list is unchanged');
    t.same(detail.rateLimits.requestsPerMinute, 2, 'and its limits');
  });

  t.test('a key may rename itself', async (t) => {
    const { id, key } = await writerKey();
    const response = await test.call('PATCH', `/client/keys/${id}`, { token: key, body: { name: 'renamed by itself' } });
    t.equal(response.statusCode, 200);
    t.equal(response.json().key.name, 'renamed by itself');
  });

  t.test('a key cannot give another key every model or models it may not use', async (t) => {
    const { key } = await writerKey();
    const other = await createKey(test, { name: 'sibling', models: ['mock-small'] });
    for (const models of [null, ['mock-small', 'mock-large']]) {
      const response = await test.call('PATCH', `/client/keys/${other.id}`, { token: key, body: { models } });
      t.equal(response.statusCode, 403, JSON.stringify(models));
      t.equal(response.json().error.code, 'limit_escalation');
    }
    const narrower = await test.call('PATCH', `/client/keys/${other.id}`, { token: key, body: { models: ['mock-small'] } });
    t.equal(narrower.statusCode, 200, 'models it may use are fine');
  });

  t.test('a key cannot give another key scopes it does not hold', async (t) => {
    const { key } = await writerKey();
    const other = await createKey(test, { name: 'sibling' });
    const response = await test.call('PATCH', `/client/keys/${other.id}`, { token: key, body: { scopes: ['inference', 'usage:read'] } });
    t.equal(response.statusCode, 403);
    t.equal(response.json().error.code, 'scope_escalation');
  });

  t.test('a key cannot make a key with scopes it does not hold, inference included', async (t) => {
    const { key } = await createKey(test, { name: 'keys only', scopes: ['keys:write'] });
    const response = await test.call('POST', '/client/keys', { token: key, body: { name: 'child' } });
    t.equal(response.statusCode, 403);
    t.equal(response.json().error.code, 'scope_escalation');
  });

  t.test('a key cannot resume a key a person paused', async (t) => {
    const { key } = await createKey(test, { name: 'keys only', scopes: ['keys:read', 'keys:write'] });
    const paused = await createKey(test, { name: 'paused by the owner' });
    t.equal((await test.call('PATCH', `/client/keys/${paused.id}`, { body: { disabled: true } })).statusCode, 200);
    const resumed = await test.call('PATCH', `/client/keys/${paused.id}`, { token: key, body: { disabled: false } });
    t.equal(resumed.statusCode, 403);
    t.equal(resumed.json().error.code, 'paused_by_person');
    t.equal((await test.call('GET', '/client/whoami', { token: paused.key })).json().error.code, 'key_disabled', 'it stays paused');
    t.equal((await test.call('PATCH', `/client/keys/${paused.id}`, { body: { disabled: false } })).statusCode, 200, 'a person may resume it');
  });

  t.test('a key may resume a key that a key paused', async (t) => {
    const { key } = await createKey(test, { name: 'keys only', scopes: ['keys:read', 'keys:write'] });
    const other = await createKey(test, { name: 'paused by a key' });
    t.equal((await test.call('PATCH', `/client/keys/${other.id}`, { token: key, body: { disabled: true } })).statusCode, 200);
    t.equal((await test.call('PATCH', `/client/keys/${other.id}`, { token: key, body: { disabled: false } })).statusCode, 200);
    t.equal((await test.call('GET', '/client/whoami', { token: other.key })).statusCode, 200);
  });
});

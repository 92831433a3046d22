import t from 'tap';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { addPerson, buildTestApp, createKey, type TestApp } from '../helpers/app.ts';

let now = new Date('2026-11-21T12:00:00Z');
const clock = () => now;

t.test('API keys', async (t) => {
  const test = await buildTestApp(t, { clock });
  const db = test.app.svc.container.resolve(Tokens.Database);
  const whoami = (token: string) => test.call('GET', '/client/whoami', { token });

  t.test('create returns 201 with the plaintext key once, prefixed svc_live_', async (t) => {
    const response = await test.call('POST', '/client/keys', { body: { name: 'first' } });
    t.equal(response.statusCode, 201);
    const body = response.json();
    t.match(body.key, /^svc_live_[A-Za-z0-9]{43}$/);
    t.same(body.scopes, ['inference'], 'scopes default to inference');
    t.equal(body.projectId, test.defaultProjectId, "a person's key defaults to the default project");
    t.equal(body.status, 'active');
  });

  t.test('the plaintext is never returned by list or get', async (t) => {
    const { id, key } = await createKey(test, { name: 'secret-check' });
    const list = await test.call('GET', '/client/keys');
    t.notMatch(list.body, key);
    t.notOk(list.body.includes('"key":'), 'no key field in list');
    const detail = await test.call('GET', `/client/keys/${id}`);
    t.equal(detail.statusCode, 200);
    t.notMatch(detail.body, key);
    t.equal(detail.json().hint, `svc_live_…${key.slice(-4)}`);
  });

  t.test('keys are stored only as a hash', async (t) => {
    const { id, key } = await createKey(test, { name: 'hash-check' });
    const { rows } = await db.query('SELECT * FROM api_keys WHERE id = $1', [id]);
    const stored = JSON.stringify(rows[0]);
    t.notMatch(stored, key.slice('svc_live_'.length), 'the secret part appears nowhere in the row');
    t.match(String(rows[0]?.token_hash), /^[0-9a-f]{64}$/);
  });

  t.test('a new key authenticates and reports its project and scopes', async (t) => {
    const { key } = await createKey(test, { name: 'who', scopes: ['inference', 'keys:read'] });
    const response = await whoami(key);
    t.equal(response.statusCode, 200);
    t.same(response.json().scopes, ['inference', 'keys:read']);
    t.equal(response.json().project.id, test.defaultProjectId);
    t.equal(response.json().credential.type, 'api_key');
  });

  t.test('key detail carries spend windows and budget status read from usage', async (t) => {
    const { id } = await createKey(test, { name: 'spender', spendCap: { usd: 10, period: 'month', mode: 'blocking' } });
    const empty = (await test.call('GET', `/client/keys/${id}`)).json();
    t.same(empty.spend, { totalUsd: 0, todayUsd: 0, weekUsd: 0, monthUsd: 0 });
    t.same(empty.budget, { state: 'ok', capUsd: 10, period: 'month', mode: 'blocking', spentUsd: 0, remainingUsd: 10 });

    // 2026-11-21 is a Saturday: Monday 16th starts the week, the 1st the month.
    const rows: Array<[string, number]> = [
      ['2026-11-21T01:00:00Z', 1_000_000], // today
      ['2026-11-17T10:00:00Z', 2_500_000], // this week
      ['2026-11-03T10:00:00Z', 4_000_000], // this month
      ['2026-10-30T10:00:00Z', 8_000_000], // before this month
    ];
    for (const [at, micros] of rows) {
      await db.query(
        `INSERT INTO request_logs (id, organization_id, project_id, key_id, endpoint, status_code, cost_micros, created_at)
         VALUES ($1, $2, $3, $4, '/v1/chat/completions', 200, $5, $6)`,
        [`req_${Math.random()}`, test.organizationId, test.defaultProjectId, id, BigInt(micros), new Date(at)],
      );
    }
    const detail = (await test.call('GET', `/client/keys/${id}`)).json();
    t.same(detail.spend, { totalUsd: 15.5, todayUsd: 1, weekUsd: 3.5, monthUsd: 7.5 });
    t.same(detail.budget, { state: 'ok', capUsd: 10, period: 'month', mode: 'blocking', spentUsd: 7.5, remainingUsd: 2.5 });
  });

  t.test('rename changes the name and nothing else', async (t) => {
    const { id } = await createKey(test, { name: 'before' });
    const response = await test.call('PATCH', `/client/keys/${id}`, { body: { name: 'after' } });
    t.equal(response.statusCode, 200);
    t.equal(response.json().ok, true);
    t.equal(response.json().key.name, 'after');
    t.same(response.json().key.scopes, ['inference']);
  });

  t.test('disabling a key stops it working and re-enabling resumes it', async (t) => {
    const { id, key } = await createKey(test, { name: 'pausable' });
    t.equal((await whoami(key)).statusCode, 200);
    t.equal((await test.call('PATCH', `/client/keys/${id}`, { body: { disabled: true } })).statusCode, 200);
    const refused = await whoami(key);
    t.equal(refused.statusCode, 401);
    t.equal(refused.json().error.code, 'key_disabled');
    t.equal((await test.call('GET', `/client/keys/${id}`)).json().status, 'disabled');
    t.equal((await test.call('PATCH', `/client/keys/${id}`, { body: { disabled: false } })).statusCode, 200);
    t.equal((await whoami(key)).statusCode, 200);
  });

  t.test('delete revokes by default: the key stays listed and stops working', async (t) => {
    const { id, key } = await createKey(test, { name: 'revocable' });
    const response = await test.call('DELETE', `/client/keys/${id}`);
    t.equal(response.statusCode, 200);
    t.equal(response.json().status, 'revoked');
    t.equal((await whoami(key)).json().error.code, 'key_revoked');
    const listed = (await test.call('GET', '/client/keys')).json().data.find((k: { id: string }) => k.id === id);
    t.equal(listed?.status, 'revoked');
    t.ok(listed?.revokedAt);
  });

  t.test('a revoked key rejects disabled', async (t) => {
    const { id } = await createKey(test, { name: 'revoked-then-paused' });
    await test.call('DELETE', `/client/keys/${id}`);
    const response = await test.call('PATCH', `/client/keys/${id}`, { body: { disabled: false } });
    t.equal(response.statusCode, 409);
    t.equal(response.json().error.code, 'key_revoked');
    t.equal(response.json().error.param, 'disabled');
  });

  t.test('permanent delete removes the key and keeps its usage history', async (t) => {
    const { id, key } = await createKey(test, { name: 'doomed' });
    await db.query(
      `INSERT INTO request_logs (id, organization_id, project_id, key_id, endpoint, status_code, cost_micros)
       VALUES ($1, $2, $3, $4, '/v1/chat/completions', 200, 5)`,
      [`req_doomed_${id}`, test.organizationId, test.defaultProjectId, id],
    );
    const response = await test.call('DELETE', `/client/keys/${id}?permanent=true`);
    t.equal(response.statusCode, 200);
    t.equal(response.json().status, 'deleted');
    t.equal((await test.call('GET', `/client/keys/${id}`)).statusCode, 404);
    t.equal((await whoami(key)).statusCode, 401);
    const { rows } = await db.query('SELECT count(*)::int AS n FROM request_logs WHERE key_id = $1', [id]);
    t.equal(rows[0]?.n, 1);
  });

  t.test('permanent accepts only the value true', async (t) => {
    const { id } = await createKey(test, { name: 'permanent-yes' });
    const response = await test.call('DELETE', `/client/keys/${id}?permanent=yes`);
    t.equal(response.statusCode, 400);
    t.equal(response.json().error.param, 'permanent');
  });

  t.test('unknown key ids answer 404', async (t) => {
    for (const [method, body] of [
      ['GET', undefined],
      ['PATCH', { name: 'x' }],
      ['DELETE', undefined],
    ] as const) {
      const response = await test.call(method, '/client/keys/00000000-0000-4000-8000-000000000000', { body });
      t.equal(response.statusCode, 404, method);
      t.equal(response.json().error.code, 'key_not_found');
    }
  });

  t.test('spend cap and expiry are owner-only', async (t) => {
    const admin = await addPerson(test, { role: 'admin' });
    const { key: writer, id } = await createKey(test, { name: 'writer', scopes: ['keys:read', 'keys:write'] });
    for (const token of [admin.token, writer]) {
      const capped = await test.call('POST', '/client/keys', { token, body: { name: 'x', spendCap: { usd: 5 } } });
      t.equal(capped.statusCode, 403);
      t.equal(capped.json().error.code, 'owner_required');
      const expiring = await test.call('PATCH', `/client/keys/${id}`, { token, body: { expiresAt: '2030-01-01T00:00:00Z' } });
      t.equal(expiring.statusCode, 403);
      t.equal(expiring.json().error.param, 'expiresAt');
    }
    const owner = await test.call('PATCH', `/client/keys/${id}`, { body: { expiresAt: '2030-01-01T00:00:00Z', spendCap: { usd: 5, period: 'day' } } });
    t.equal(owner.statusCode, 200);
    t.same(owner.json().key.spendCap, { usd: 5, period: 'day', mode: 'blocking' });
    const cleared = await test.call('PATCH', `/client/keys/${id}`, { body: { spendCap: null, expiresAt: null } });
    t.equal(cleared.json().key.spendCap, null);
    t.equal(cleared.json().key.expiresAt, null);
  });

  t.test('a key cannot grant scopes it does not hold, inference included', async (t) => {
    const { key: writer, id } = await createKey(test, { name: 'limited', scopes: ['keys:write'] });
    const escalate = await test.call('POST', '/client/keys', { token: writer, body: { name: 'x', scopes: ['usage:read'] } });
    t.equal(escalate.statusCode, 403);
    t.equal(escalate.json().error.code, 'scope_escalation');
    t.equal(escalate.json().error.param, 'scopes');
    const viaPatch = await test.call('PATCH', `/client/keys/${id}`, { token: writer, body: { scopes: ['keys:write', 'apps:deploy'] } });
    t.equal(viaPatch.statusCode, 403);
    const same = await test.call('POST', '/client/keys', { token: writer, body: { name: 'y', scopes: ['keys:write'] } });
    t.equal(same.statusCode, 201, 'scopes it holds may be granted');
    const inference = await test.call('POST', '/client/keys', { token: writer, body: { name: 'z', scopes: ['keys:write', 'inference'] } });
    t.equal(inference.json().error.code, 'scope_escalation', 'a key only narrows: not even inference unless it holds it');
  });

  t.test('a member session cannot grant scopes its role lacks; an owner can grant any', async (t) => {
    const member = await addPerson(test, { role: 'member' });
    await test.app.svc.container.resolve(Tokens.Identity).projectMembers.upsert({ projectId: test.defaultProjectId, personId: member.personId, role: 'developer' });
    const escalate = await test.call('POST', '/client/keys', { token: member.token, body: { name: 'x', scopes: ['projects:write'] } });
    t.equal(escalate.statusCode, 403);
    const owner = await test.call('POST', '/client/keys', { body: { name: 'all', scopes: ['projects:write', 'webhooks:write', 'mcp:write'] } });
    t.equal(owner.statusCode, 201);
  });

  t.test('a key cannot move a key to another project; a person can', async (t) => {
    const other = (await test.call('POST', '/client/projects', { body: { name: 'Elsewhere' } })).json();
    const { key: writer } = await createKey(test, { name: 'mover', scopes: ['keys:read', 'keys:write'] });
    const { id } = await createKey(test, { name: 'moved' });
    const byKey = await test.call('PATCH', `/client/keys/${id}`, { token: writer, body: { projectId: other.id } });
    t.equal(byKey.statusCode, 403);
    t.equal(byKey.json().error.code, 'key_cannot_move_key');
    const byPerson = await test.call('PATCH', `/client/keys/${id}`, { body: { projectId: other.id } });
    t.equal(byPerson.statusCode, 200);
    t.equal(byPerson.json().key.projectId, other.id);
  });

  t.test('an app-owned key cannot be moved: 409', async (t) => {
    const other = (await test.call('POST', '/client/projects', { body: { name: 'App target' } })).json();
    const { id } = await createKey(test, { name: 'app key' });
    await db.query('UPDATE api_keys SET app_id = $2 WHERE id = $1', [id, '11111111-1111-4111-8111-111111111111']);
    const response = await test.call('PATCH', `/client/keys/${id}`, { body: { projectId: other.id } });
    t.equal(response.statusCode, 409);
    t.equal(response.json().error.code, 'app_owned_key');
  });

  t.test('a key acts only in its own project', async (t) => {
    const other = (await test.call('POST', '/client/projects', { body: { name: 'Walled' } })).json();
    const inOther = (await test.call('POST', '/client/keys', { body: { name: 'other-project key', projectId: other.id } })).json();
    const { key: reader } = await createKey(test, { name: 'reader', scopes: ['keys:read', 'keys:write'] });
    const list = (await test.call('GET', '/client/keys', { token: reader })).json();
    t.ok(list.data.every((k: { projectId: string }) => k.projectId === test.defaultProjectId));
    t.equal((await test.call('GET', `/client/keys/${inOther.id}`, { token: reader })).statusCode, 404);
    const cross = await test.call('POST', '/client/keys', { token: reader, body: { name: 'x', projectId: other.id } });
    t.equal(cross.statusCode, 403);
    t.equal(cross.json().error.code, 'cross_project');
  });

  t.test('an expired key answers 401 key_expired', async (t) => {
    const { key } = await createKey(test, { name: 'short-lived', expiresAt: new Date(now.getTime() + 3_600_000).toISOString() });
    t.equal((await whoami(key)).statusCode, 200);
    now = new Date(now.getTime() + 2 * 3_600_000);
    try {
      const response = await whoami(key);
      t.equal(response.statusCode, 401);
      t.equal(response.json().error.code, 'key_expired');
    } finally {
      now = new Date(now.getTime() - 2 * 3_600_000);
    }
  });

  t.test('an expiry in the past is refused', async (t) => {
    const response = await test.call('POST', '/client/keys', { body: { name: 'x', expiresAt: '2020-01-01T00:00:00Z' } });
    t.equal(response.statusCode, 400);
    t.equal(response.json().error.param, 'expiresAt');
  });

  t.test('an expiry outside 1970-01-01 to 9999-12-31 (UTC) answers 400 naming expiresAt, on create and update', async (t) => {
    const { id } = await createKey(test, { name: 'expiry range' });
    for (const bad of ['0000-01-01T00:00:00Z', '9999-12-31T23:59:59-23:59']) {
      for (const [method, url] of [
        ['POST', '/client/keys'],
        ['PATCH', `/client/keys/${id}`],
      ] as const) {
        const response = await test.call(method, url, { body: { ...(method === 'POST' ? { name: 'x' } : {}), expiresAt: bad } });
        t.equal(response.statusCode, 400, `${method} expiresAt=${bad}: ${response.body.slice(0, 120)}`);
        t.equal(response.json().error.param, 'expiresAt');
      }
    }
  });

  t.test('a key with a model allow-list reports it', async (t) => {
    const { body } = await createKey(test, { name: 'models', models: ['mock-small'] });
    t.same(body.models, ['mock-small']);
  });

  t.test('invalid, unknown-prefix and missing credentials answer 401', async (t) => {
    for (const [header, code] of [
      [undefined, 'missing_api_key'],
      ['Bearer svc_live_doesnotexist', 'invalid_api_key'],
      ['Bearer sk-something', 'invalid_api_key'],
      ['Basic abc', 'missing_api_key'],
    ] as const) {
      const response = await test.app.inject({ method: 'GET', url: '/client/keys', headers: header ? { authorization: header } : {} });
      t.equal(response.statusCode, 401, String(header));
      t.equal(response.json().error.code, code);
    }
  });
});

export type { TestApp };

t.test('lastUsedAt records when a key was last used', async (t) => {
  const test = await buildTestApp(t);
  const { id, key } = await createKey(test, { name: 'used' });
  t.equal((await test.call('GET', `/client/keys/${id}`)).json().lastUsedAt, null);
  await test.call('GET', '/client/whoami', { token: key });
  await test.app.svc.container.resolve(Tokens.Authenticator).flushKeyUsage();
  const lastUsedAt = (await test.call('GET', `/client/keys/${id}`)).json().lastUsedAt;
  t.ok(lastUsedAt && Date.now() - Date.parse(lastUsedAt) < 60_000, `lastUsedAt ${lastUsedAt}`);
});

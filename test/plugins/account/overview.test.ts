import t from 'tap';
import { addPerson, buildTestApp, createKey } from '../../helpers/app.ts';
import { accountApp } from './account-app.ts';

// Each test builds its own service (several for the replica and restart tests): more than the default 120 s on a loaded machine.
t.setTimeout(300_000);

type Json = Record<string, any>;

const figuresOf = (body: Json): Record<string, Json> => Object.fromEntries((body.figures as Json[]).map((figure) => [figure.id, figure]));

t.test('the overview shows the real balance, spend, calls, error rate, keys and people after calls and a top-up', async (t) => {
  const test = await accountApp(t);
  const overview = async (token?: string) => figuresOf((await test.call('GET', '/client/overview', { token })).json());

  const fresh = await overview();
  t.match(fresh, {
    balanceUsd: { value: 100, unit: 'usd', window: 'now', source: 'metering' },
    spendTodayUsd: { value: 0 },
    spendMonthUsd: { value: 0 },
    callsToday: { value: 0, unit: 'count', window: 'today' },
    calls30d: { value: 0, window: 'last_30_days' },
    activeKeys: { value: 0, source: 'account' },
    people: { value: 1 },
    projects: { value: 1 },
  });
  t.notOk('errorRateToday' in fresh, 'no error rate of no calls: absent, not 0');
  t.notOk('errorRate30d' in fresh);
  t.notOk('pendingApprovals' in fresh, 'no plugin gives pending approvals yet: absent, not 0');

  const { key } = await createKey(test, { name: 'caller' });
  const paused = await createKey(test, { name: 'paused' });
  await test.call('PATCH', `/client/keys/${paused.id}`, { body: { disabled: true } });
  const revoked = await createKey(test, { name: 'revoked' });
  await test.call('DELETE', `/client/keys/${revoked.id}`);
  const rule = await test.call('POST', '/client/guardrails/rules', { body: { name: 'no emails', detector: 'email', action: 'block' } });
  t.equal(rule.statusCode, 201);
  for (let i = 0; i < 3; i += 1) t.equal(await test.chat(key, `call ${i}`), 200);
  t.equal(await test.chat(key, 'write to ada@example.com'), 422, 'a call the guardrail blocks is logged as an error');
  await test.flush();
  t.equal((await test.call('POST', '/client/credits/topup', { body: { amountUsd: 5, reference: 'overview-topup' } })).statusCode, 201);
  await addPerson(test, { role: 'member' });

  const after = await overview();
  const usage = (await test.call('GET', '/client/usage')).json() as Json;
  const credits = (await test.call('GET', '/client/credits')).json() as Json;
  t.ok(usage.totals.costUsd > 0, 'the calls cost something');
  t.equal(after.spendTodayUsd?.value, usage.totals.costUsd, 'spend today is what the request log charged');
  t.equal(after.spendMonthUsd?.value, usage.totals.costUsd);
  t.equal(after.balanceUsd?.value, credits.balanceUsd, 'the balance is the ledger’s');
  t.equal(Math.round((after.balanceUsd?.value ?? 0) * 1e6), Math.round((105 - usage.totals.costUsd) * 1e6), 'opening credit + top-up − spend');
  t.equal(after.callsToday?.value, 4);
  t.equal(after.errorRateToday?.value, 0.25, 'one call in four failed');
  t.match(after, { calls30d: { value: 4 }, errorRate30d: { value: 0.25, unit: 'ratio' }, activeKeys: { value: 1 }, people: { value: 2 } });
});

t.test('each figure needs its own scope: a key without usage:read or keys:read sees none of those figures', async (t) => {
  const test = await buildTestApp(t);
  const { key } = await createKey(test, { scopes: ['inference'] });
  const response = await test.call('GET', '/client/overview', { token: key });
  t.equal(response.statusCode, 200);
  t.same(
    (response.json().figures as Json[]).map((f) => f.id),
    ['people', 'projects'],
  );
  const reader = await createKey(test, { scopes: ['usage:read', 'keys:read'] });
  const ids = ((await test.call('GET', '/client/overview', { token: reader.key })).json().figures as Json[]).map((f) => f.id);
  t.ok(ids.includes('balanceUsd') && ids.includes('activeKeys'), ids.join(', '));
});

t.test('a key counts the calls of its own project only; the balance is the account’s', async (t) => {
  const test = await accountApp(t);
  const other = (await test.call('POST', '/client/projects', { body: { name: 'other' } })).json() as Json;
  const mine = await createKey(test, { name: 'default project', scopes: ['inference', 'usage:read', 'keys:read'] });
  const theirs = await createKey(test, { name: 'other project', projectId: other.id, scopes: ['inference', 'usage:read'] });
  t.equal(await test.chat(mine.key), 200);
  t.equal(await test.chat(theirs.key), 200);
  t.equal(await test.chat(theirs.key), 200);
  await test.flush();
  const seen = figuresOf((await test.call('GET', '/client/overview', { token: mine.key })).json());
  t.equal(seen.callsToday?.value, 1, 'its own project’s call');
  t.equal(seen.projects?.value, 1, 'its own project');
  t.equal(seen.activeKeys?.value, 1, 'its own project’s keys');
  const owner = figuresOf((await test.call('GET', '/client/overview')).json());
  t.equal(owner.callsToday?.value, 3, 'the owner sees every project');
  t.equal(seen.balanceUsd?.value, owner.balanceUsd?.value);
});

t.test('without the metering plugin, the money and call figures are absent rather than zero', async (t) => {
  const test = await buildTestApp(t, { plugins: { account: {}, keys: {}, projects: {} } });
  const ids = ((await test.call('GET', '/client/overview')).json().figures as Json[]).map((f) => f.id);
  t.same(ids, ['people', 'projects', 'activeKeys']);
});

t.test('the org map is a tree of the projects the caller sees, with their keys and members', async (t) => {
  const test = await buildTestApp(t);
  const second = (await test.call('POST', '/client/projects', { body: { name: 'second' } })).json() as Json;
  const person = await addPerson(test, { role: 'member', name: 'Dev' });
  const email = (await test.call('GET', '/client/profile', { token: person.token })).json().email as string;
  t.equal((await test.call('POST', `/client/projects/${second.id}/members`, { body: { email, role: 'developer' } })).statusCode, 201);
  await createKey(test, { name: 'a' });
  const paused = await createKey(test, { name: 'b', projectId: second.id });
  await test.call('PATCH', `/client/keys/${paused.id}`, { body: { disabled: true } });
  await createKey(test, { name: 'c', projectId: second.id });

  const map = (await test.call('GET', '/client/org-map')).json() as Json;
  t.match(map, { object: 'org_map', organization: { id: test.organizationId, people: 2 } });
  t.same(
    (map.projects as Json[]).map((p) => [p.name === 'second' ? 'second' : 'default', p.isDefault, p.keys]),
    [
      ['default', true, { total: 1, active: 1 }],
      ['second', false, { total: 2, active: 1 }],
    ],
    'oldest first, each with its keys',
  );
  const secondNode = (map.projects as Json[]).find((p) => p.id === second.id);
  t.ok(
    ((secondNode?.members ?? []) as Json[]).some((m) => m.personId === person.personId && m.name === 'Dev' && m.role === 'developer'),
    'its member with their project role',
  );
  t.same(secondNode?.branches, [], 'no plugin adds a kind yet');

  const memberMap = (await test.call('GET', '/client/org-map', { token: person.token })).json() as Json;
  t.same(
    (memberMap.projects as Json[]).map((p) => p.id),
    [second.id],
    'a member sees the projects they have a role on',
  );
  const { key } = await createKey(test, { scopes: ['inference'], projectId: second.id });
  const keyMap = (await test.call('GET', '/client/org-map', { token: key })).json() as Json;
  t.equal(keyMap.projects.length, 1);
  t.notOk('keys' in keyMap.projects[0], 'without keys:read, no key counts');
});

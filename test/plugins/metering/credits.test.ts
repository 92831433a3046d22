import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import type { LedgerLine } from '../../../core/ports/metering.ts';
import { addPerson, createKey } from '../../helpers/app.ts';
import { startMeteredGateway, user } from './metered-gateway.ts';

/**
 * Credits and the owner's money routes on one embedded gateway. The account opens with 100 µ$;
 * every call to `solo` costs 24 µ$ (the fake's default usage: 12 input + 6 output tokens).
 */
const g = await startMeteredGateway(t, { metering: { initialCreditUsd: 0.0001 } });
const orgId = g.test.organizationId;
const CALL_COST = 24n;

type Json = Record<string, any>;

const admin = await addPerson(g.test, { role: 'admin' });
const member = await addPerson(g.test, { role: 'member' });
const reader = await createKey(g.test, { name: 'reader', scopes: ['inference', 'usage:read', 'keys:read', 'keys:write'] });

const balanceMicros = async () => BigInt((await g.test.call('GET', '/client/credits')).json().balanceMicros as string);
const counter = async () => (await g.coordination.allowances.peek([`credit:${orgId}`]))[0];
const statement = async (query = '') => {
  const response = await g.test.call('GET', `/client/credits/statement${query}`);
  return { status: response.statusCode, lines: response.statusCode === 200 ? (response.json().data as Json[]) : [], body: response.json() as Json };
};

t.test('credit balance: once the balance cannot cover a call, 402 insufficient_credit; a top-up makes calls work again; a repeated top-up reference is not credited twice', async (t) => {
  const { key } = await g.newKey({ name: 'spender' });
  g.upstream.reset();
  const statuses: number[] = [];
  let refusal: Json | null = null;
  for (let i = 0; i < 10 && !refusal; i += 1) {
    const r = await g.chat(key, { model: 'solo', messages: user(`call ${i}`), max_tokens: 50 });
    statuses.push(r.status);
    if (r.status !== 200) refusal = r.body;
  }
  t.ok(statuses.filter((s) => s === 200).length >= 4, `calls were served while there was credit (${statuses.join(' ')})`);
  t.equal(statuses.at(-1), 402, 'then refused');
  t.equal(refusal?.error?.code, 'insufficient_credit');
  await g.flush();
  const drained = await balanceMicros();
  t.ok(drained <= 0n, `the balance is used up (${drained} µ$)`);
  t.ok(drained > -CALL_COST, 'the last call overdrew by less than one call');
  t.equal((await g.chat(key, { model: 'solo', messages: user('still?'), max_tokens: 50 })).status, 402, 'it stays refused');

  const topup = await g.test.call('POST', '/client/credits/topup', { body: { amountUsd: 1, reference: 'wire-0001', note: 'bank transfer' } });
  t.equal(topup.statusCode, 201);
  t.equal(topup.json().duplicate, false);
  t.equal(topup.json().line.kind, 'payment');
  t.equal(topup.json().line.amountUsd, 1);
  t.equal(topup.json().line.reference, 'wire-0001');
  t.equal(topup.json().balanceUsd, Number(drained + 1_000_000n) / 1e6);
  t.equal((await g.chat(key, { model: 'solo', messages: user('again'), max_tokens: 50 })).status, 200, 'a top-up makes calls work again');

  await g.flush();
  const before = await balanceMicros();
  const counterBefore = await counter();
  const repeat = await g.test.call('POST', '/client/credits/topup', { body: { amountUsd: 1, reference: 'wire-0001' } });
  t.equal(repeat.statusCode, 201);
  t.same({ duplicate: repeat.json().duplicate, line: repeat.json().line }, { duplicate: true, line: null }, 'the repeat is reported as a duplicate');
  t.equal(await balanceMicros(), before, 'the balance did not move');
  t.equal(await counter(), counterBefore, 'nor did the live credit counter');
  const { rows } = await g.db.query("SELECT count(*)::int AS n FROM credit_ledger WHERE organization_id = $1 AND reference = 'wire-0001'", [orgId]);
  t.equal(rows[0]!['n'], 1, 'one ledger line for the reference');
  t.equal(await counter(), Number(before), 'the live counter equals the ledger balance');
});

t.test('credits routes', async (t) => {
  t.test('topup is owner-only (403 for an admin session and for a key)', async (t) => {
    for (const [label, token] of [
      ['admin session', admin.token],
      ['member session', member.token],
      ['key', reader.key],
    ] as const) {
      const response = await g.test.call('POST', '/client/credits/topup', { token, body: { amountUsd: 5 } });
      t.equal(response.statusCode, 403, label);
      t.equal(response.json().error.code, 'owner_required', label);
    }
    const owner = await g.test.call('POST', '/client/credits/topup', { body: { amountUsd: 0.5 } });
    t.equal(owner.statusCode, 201, 'the owner may');
    t.equal((await g.test.call('POST', '/client/credits/topup', { body: { amountUsd: 0 } })).statusCode, 400, 'a zero amount is refused');
    t.equal((await g.test.call('POST', '/client/credits/topup', { body: { amountUsd: 0.0000001 } })).statusCode, 400, 'below a micro-dollar is refused');
  });

  t.test('statement lens narrows to payments, usage or hosting lines', async (t) => {
    // One metered hosting day and its base fee, as the hosting side would write them.
    await g.ledger.append(orgId, { kind: 'hosting', amountMicros: -300n, note: 'Hosting', coversUtcDay: '2026-11-20', coversEntries: 3 });
    await g.ledger.append(orgId, { kind: 'hosting_base_fee', amountMicros: -100n, note: 'Hosting base fee' });
    await g.coordination.allowances.give([{ key: `credit:${orgId}`, amount: -400 }], 30 * 60_000);
    await g.flush();
    const all = await statement();
    const kinds = (lines: Json[]) => [...new Set(lines.map((l) => l.kind as string))].sort();
    t.same(kinds(all.lines), ['adjustment', 'ai_usage', 'hosting', 'hosting_base_fee', 'payment'], 'without a lens: every kind');
    t.same(kinds((await statement('?lens=payments')).lines), ['payment']);
    t.same(kinds((await statement('?lens=usage')).lines), ['ai_usage']);
    const hosting = (await statement('?lens=hosting')).lines;
    t.same(kinds(hosting), ['hosting', 'hosting_base_fee'], 'hosting: the metered day and the base fee');
    const day = hosting.find((l) => l.kind === 'hosting');
    t.same({ coversUtcDay: day?.coversUtcDay, coversEntries: day?.coversEntries, amountUsd: day?.amountUsd }, { coversUtcDay: '2026-11-20', coversEntries: 3, amountUsd: -0.0003 });
    t.equal((await statement('?lens=hosting_base_fee')).status, 400, 'an unknown lens is 400');
  });

  t.test('statement limit: default 100, max 500 (501 is 400), newest first', async (t) => {
    for (let i = 0; i < 110; i += 1) await g.ledger.append(orgId, { kind: 'adjustment', amountMicros: 1n, note: `filler ${i}` });
    await g.coordination.allowances.give([{ key: `credit:${orgId}`, amount: 110 }], 30 * 60_000);
    const { rows } = await g.db.query('SELECT count(*)::int AS n FROM credit_ledger WHERE organization_id = $1', [orgId]);
    const total = rows[0]!['n'] as number;
    t.ok(total > 110 && total <= 500, `${total} lines`);
    t.equal((await statement()).lines.length, 100, 'default limit 100');
    t.equal((await statement('?limit=500')).lines.length, total, 'limit 500 returns them all');
    t.equal((await statement('?limit=7')).lines.length, 7);
    for (const bad of ['501', '0', '-1', '2.5', 'ten']) {
      const r = await statement(`?limit=${bad}`);
      t.equal(r.status, 400, `limit=${bad} is 400`);
      t.equal(r.body.error?.type, 'invalid_request_error');
    }
    const lines = (await statement('?limit=500')).lines;
    const ordered = lines.every(
      (line, i) => i === 0 || line.createdAt < lines[i - 1]!.createdAt || (line.createdAt === lines[i - 1]!.createdAt && BigInt(line.id) < BigInt(lines[i - 1]!.id)),
    );
    t.ok(ordered, 'newest first');
    t.equal(lines[0]!.balanceAfterUsd, Number(await balanceMicros()) / 1e6, 'the first line carries the current balance');
  });

  t.test('statement from/to: from inclusive, to exclusive', async (t) => {
    const appended: LedgerLine[] = [];
    for (const micros of [11n, 22n, 33n]) {
      // Lines a few milliseconds apart: created_at is the database's clock_timestamp(), which no
      // injected clock reaches, and `from`/`to` below are whole milliseconds. Only a lower bound:
      // a slower machine spaces them further.
      await sleep(5);
      appended.push((await g.ledger.append(orgId, { kind: 'adjustment', amountMicros: micros, note: `window ${micros}` }))!);
    }
    await g.coordination.allowances.give([{ key: `credit:${orgId}`, amount: 66 }], 30 * 60_000);
    // Make the third line's time a whole millisecond, so a `to` naming it is exactly equal to it.
    const third = appended[2]!;
    const { rows } = await g.db.query<{ created_at: Date }>("UPDATE credit_ledger SET created_at = date_trunc('milliseconds', created_at) WHERE id = $1 RETURNING created_at", [third.id]);
    const thirdAt = rows[0]!.created_at.toISOString();
    const secondAt = appended[1]!.createdAt.toISOString();

    const between = await statement(`?from=${encodeURIComponent(secondAt)}&to=${encodeURIComponent(thirdAt)}`);
    t.equal(between.status, 200);
    t.same(
      between.lines.map((l) => l.note),
      ['window 22'],
      'from includes its line; to excludes the line at exactly that time',
    );
    const fromThird = await statement(`?from=${encodeURIComponent(thirdAt)}`);
    t.same(
      fromThird.lines.map((l) => l.note),
      ['window 33'],
      'from at exactly a line includes it',
    );
    const until = await statement(`?to=${encodeURIComponent(thirdAt)}&limit=2`);
    t.same(
      until.lines.map((l) => l.note),
      ['window 22', 'window 11'],
      'to alone: everything before, newest first',
    );
    t.equal((await statement('?from=yesterday')).status, 400, 'a malformed time is 400');
  });

  t.test('statement and summary answer 400 naming from or to for dates outside 1970-01-01 to 9999-12-31 (UTC)', async (t) => {
    for (const route of ['/client/credits/statement', '/client/credits/summary']) {
      for (const bad of ['0000-01-01', '1969-12-31T23:59:59Z', '9999-12-31T23:59:59-23:59']) {
        for (const param of ['from', 'to']) {
          const response = await g.test.call('GET', `${route}?${param}=${encodeURIComponent(bad)}`);
          t.equal(response.statusCode, 400, `${route}?${param}=${bad}: ${response.body.slice(0, 120)}`);
          t.equal(response.json().error.param, param);
        }
      }
    }
  });

  t.test('summary without from has opening 0; with from, the balance then; the identity holds', async (t) => {
    await g.flush();
    const balance = await balanceMicros();
    const whole = (await g.test.call('GET', '/client/credits/summary')).json();
    const m = Object.fromEntries(Object.entries(whole.micros as Record<string, string>).map(([k, v]) => [k, BigInt(v)]));
    t.equal(m['opening'], 0n, 'opening 0 without from');
    t.equal(m['closing'], balance, 'closing is the balance');
    t.equal(m['opening']! + m['payments']! + m['adjustments']! - m['hosting']! - m['ai']!, m['closing']);
    t.equal(m['hosting'], 400n, 'hosting is positive and counts the base fee');
    t.equal(m['ai'], await g.loggedCost(), 'ai is what the request log charged');
    t.equal(whole.closingBalanceUsd, Number(balance) / 1e6, 'the USD fields mirror the micros');
    t.equal(whole.aiUsd, Number(m['ai']) / 1e6);

    const lines = (await statement('?limit=500')).lines;
    const pivot = lines[Math.floor(lines.length / 2)]!;
    const from = await g.test.call('GET', `/client/credits/summary?from=${encodeURIComponent(pivot.createdAt)}`);
    const fm = from.json().micros as Record<string, string>;
    const before = lines.filter((l) => new Date(l.createdAt) < new Date(pivot.createdAt));
    t.equal(Number(fm['opening']) / 1e6, before.length > 0 ? before[0]!.balanceAfterUsd : 0, 'opening is the balance just before from');
    t.equal(BigInt(fm['closing']!), balance);
  });

  t.test('GET /client/budget lists each cap with spent and remaining', async (t) => {
    const capped = await g.newKey({ name: 'budgeted', spendCap: { usd: 0.01, period: 'month', mode: 'blocking' } });
    const project = await g.test.call('PATCH', `/client/projects/${g.test.defaultProjectId}`, { body: { spendCap: { usd: 20, period: 'month', mode: 'alert' } } });
    t.equal(project.statusCode, 200);
    const account = await g.test.call('PATCH', '/client/budget', { body: { accountCap: { usd: 50, period: 'month', mode: 'alert' } } });
    t.equal(account.statusCode, 200);
    g.upstream.reset();
    for (let i = 0; i < 2; i += 1) t.equal((await g.chat(capped.key, { model: 'solo', messages: user('budget'), max_tokens: 50 })).status, 200);
    await g.flush();

    const budget = (await g.test.call('GET', '/client/budget')).json();
    t.equal(budget.balanceUsd, Number(await balanceMicros()) / 1e6, 'balanceUsd is the credit balance');
    const orgSpentMicros = await g.loggedCost();
    const orgSpend = Number(orgSpentMicros) / 1e6;
    const byScope = (scope: string, id: string) => budget.scopes.find((s: Json) => s.scope === scope && s.id === id);
    t.match(
      byScope('account', orgId),
      { capUsd: 50, period: 'month', mode: 'alert', spentUsd: orgSpend, remainingUsd: Number(50_000_000n - orgSpentMicros) / 1e6, state: 'ok' },
      'the account cap',
    );
    t.match(byScope('project', g.test.defaultProjectId), { capUsd: 20, mode: 'alert', spentUsd: orgSpend, state: 'ok' }, 'the project cap (every call here was in the default project)');
    t.match(byScope('key', capped.id), { capUsd: 0.01, mode: 'blocking', spentUsd: 0.000048, remainingUsd: 0.009952, state: 'ok' }, 'the key cap: two calls of 24 µ$');
    t.equal(budget.scopes.filter((s: Json) => s.scope === 'key').length, 1, 'keys without a cap are not listed');
  });

  t.test('PATCH /client/budget sets the account cap (owner only)', async (t) => {
    for (const [label, token] of [
      ['admin session', admin.token],
      ['key', reader.key],
    ] as const) {
      const response = await g.test.call('PATCH', '/client/budget', { token, body: { accountCap: { usd: 1 } } });
      t.equal(response.statusCode, 403, label);
    }
    const set = await g.test.call('PATCH', '/client/budget', { body: { accountCap: { usd: 75.5, period: 'week', mode: 'blocking' } } });
    t.equal(set.statusCode, 200);
    t.same(set.json().accountCap, { usd: 75.5, period: 'week', mode: 'blocking' });
    t.same((await g.test.call('GET', '/client/budget')).json().accountCap, { usd: 75.5, period: 'week', mode: 'blocking' }, 'GET shows it');
    t.equal((await g.test.call('PATCH', '/client/budget', { body: { accountCap: { usd: 1 }, extra: true } })).statusCode, 400, 'unknown fields are refused');
    const cleared = await g.test.call('PATCH', '/client/budget', { body: { accountCap: null } });
    t.equal(cleared.json().accountCap, null);
    t.notOk(
      (await g.test.call('GET', '/client/budget')).json().scopes.some((s: Json) => s.scope === 'account'),
      'no account row once cleared',
    );
  });

  t.test('POST /client/log-requests toggles body logging (owner only) and bodies are then stored in request_log_bodies', async (t) => {
    for (const [label, token] of [
      ['admin session', admin.token],
      ['key', reader.key],
    ] as const) {
      t.equal((await g.test.call('POST', '/client/log-requests', { token, body: { enabled: true } })).statusCode, 403, label);
    }
    const { key } = await g.newKey({ name: 'logged' });
    const bodies = async (requestId: string | null) => {
      await g.flush();
      return (await g.db.query<{ request_body: Json; response_body: Json }>('SELECT request_body, response_body FROM request_log_bodies WHERE request_id = $1', [requestId])).rows;
    };
    g.upstream.reset();
    const off = await g.chat(key, { model: 'solo', messages: user('not kept'), max_tokens: 50 });
    t.same(await bodies(off.headers.get('x-request-id')), [], 'off by default: no body kept');

    const on = await g.test.call('POST', '/client/log-requests', { body: { enabled: true } });
    t.equal(on.statusCode, 200);
    t.equal(on.json().requestLogging, true);
    g.upstream.enqueue({ kind: 'reply', content: 'kept answer' }, { kind: 'reply', content: 'streamed answer' });
    const json = await g.chat(key, { model: 'solo', messages: user('kept prompt'), max_tokens: 50 });
    const [jsonBodies] = await bodies(json.headers.get('x-request-id'));
    t.match(jsonBodies?.request_body, { model: 'solo', messages: [{ role: 'user', content: 'kept prompt' }] }, 'the request body is kept');
    t.match(jsonBodies?.response_body, { choices: [{ message: { content: 'kept answer' } }] }, 'the response body is kept');
    const streamed = await g.chat(key, { model: 'solo', messages: user('streamed prompt'), max_tokens: 50, stream: true });
    const [streamBodies] = await bodies(streamed.headers.get('x-request-id'));
    t.match(streamBodies?.request_body, { messages: [{ content: 'streamed prompt' }] });
    t.match(streamBodies?.response_body, { content: 'streamed answer' }, 'a streamed answer is kept reassembled');

    const offAgain = await g.test.call('POST', '/client/log-requests', { body: { enabled: false } });
    t.equal(offAgain.json().requestLogging, false);
    const after = await g.chat(key, { model: 'solo', messages: user('not kept again'), max_tokens: 50 });
    t.same(await bodies(after.headers.get('x-request-id')), [], 'off again: nothing kept');
  });
});

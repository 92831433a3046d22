import t from 'tap';
import { deferred } from '../../helpers/jobs.ts';
import { onEveryBackend, reservedInputTokens, startMeteredGateway, user, type MeteredGateway } from '../metering/metered-gateway.ts';

/**
 * Issue 16, item 1: a key made by a key cannot shed the limits its maker's owner set. The maker's
 * cap, rate limits, concurrency, model list and expiry bound every key it made, together with its
 * own calls, on the embedded backends and on PostgreSQL + Redis.
 */

/** Every unscripted upstream call reports 10 input and 45 output tokens: exactly 100 µ$ at TEST_PRICES. */
const USAGE = { prompt_tokens: 10, completion_tokens: 45 };
const CALL_MICROS = 100n;

/** A key made through the API by `makerKey` (201 or the test fails). */
async function mint(g: MeteredGateway, makerKey: string, body: Record<string, unknown> = {}): Promise<{ id: string; key: string; view: Record<string, any> }> {
  const response = await g.test.call('POST', '/client/keys', { token: makerKey, body: { name: 'minted', ...body } });
  if (response.statusCode !== 201) throw new Error(`minting failed: ${response.statusCode} ${response.body}`);
  const view = response.json();
  return { id: view.id, key: view.key, view };
}

onEveryBackend(t, (t, storage) => {
  let offsetMs = 0;
  const clock = () => new Date(Date.now() + offsetMs);
  let g: MeteredGateway;

  t.before(async () => {
    g = await startMeteredGateway(t, { storage, clock, upstreamOptions: { defaultReply: { usage: USAGE } } });
  });

  const maker = (body: Record<string, unknown>) => g.newKey({ name: 'maker', scopes: ['inference', 'keys:read', 'keys:write'], ...body });

  t.test('a key made by a key starts with its maker’s cap, expiry, rate limits and models', async (t) => {
    const expiresAt = new Date(clock().getTime() + 86_400_000).toISOString();
    const parent = await maker({
      models: ['solo'],
      expiresAt,
      spendCap: { usd: 0.01, period: 'day' },
      rateLimits: { requestsPerMinute: 2, concurrency: 3 },
    });
    const child = await mint(g, parent.key);
    t.same(child.view.models, ['solo']);
    t.equal(child.view.expiresAt, expiresAt);
    t.same(child.view.spendCap, { usd: 0.01, period: 'day', mode: 'blocking' });
    t.same(child.view.rateLimits, { requestsPerMinute: 2, tokensPerMinute: null, concurrency: 3 });
    const wider = await g.test.call('POST', '/client/keys', { token: parent.key, body: { name: 'wider', models: null } });
    t.equal(wider.statusCode, 403, 'asking for every model is refused');
    t.equal(wider.json().error.code, 'limit_escalation');
    const other = await g.test.call('POST', '/client/keys', { token: parent.key, body: { name: 'other', models: ['solo', 'mock-small'] } });
    t.equal(other.json().error.code, 'limit_escalation', 'so is a model the maker may not use');
    t.equal(other.json().error.param, 'models');
  });

  t.test('the maker’s model list bounds a key it made even after an owner widens that key', async (t) => {
    const parent = await maker({ models: ['solo'] });
    const child = await mint(g, parent.key);
    await g.patchKey(child.id, { models: null });
    const refused = await g.chat(child.key, { model: 'mock-small', messages: user('hi'), max_tokens: 10 });
    t.equal(refused.status, 404, 'a model outside the maker’s list');
    t.equal(refused.body?.error?.code, 'model_not_found');
    t.equal((await g.chat(child.key, { model: 'solo', messages: user('hi'), max_tokens: 10 })).status, 200);
  });

  t.test('what keys made by a key spend counts against their maker’s cap: minting keys does not multiply it', async (t) => {
    // Room for three 100 µ$ calls between the maker and everything it made, not three each: a call
    // is admitted while its reservation (input bound + 10 output tokens) fits what is left.
    const reservation = reservedInputTokens('hi') + 20;
    const capMicros = 3 * Number(CALL_MICROS) + reservation - 50;
    const parent = await maker({ spendCap: { usd: capMicros / 1e6, period: 'day' } });
    const children = [await mint(g, parent.key), await mint(g, parent.key), await mint(g, parent.key)];
    const statuses: number[] = [];
    for (let round = 0; round < 3; round += 1) {
      for (const child of children) statuses.push((await g.chat(child.key, { model: 'solo', messages: user('hi'), max_tokens: 10 })).status);
    }
    await g.settled();
    t.same(statuses.filter((status) => status === 200).length, 3, `three calls fit the maker's cap (${statuses.join(' ')})`);
    t.ok(
      statuses.filter((status) => status !== 200).every((status) => status === 402),
      'the rest are refused with 402',
    );
    let familySpend = 0n;
    for (const child of children) familySpend += await g.loggedCost(child.id);
    t.equal(familySpend, 3n * CALL_MICROS, 'the family spent exactly the cap');
    const refusedMaker = await g.chat(parent.key, { model: 'solo', messages: user('hi'), max_tokens: 10 });
    t.equal(refusedMaker.status, 402, 'the maker itself is out of budget too');
    const detail = (await g.test.call('GET', `/client/keys/${parent.id}`)).json();
    t.equal(detail.budget.spentUsd, 0.0003, 'the maker’s budget shows what its keys spent');
  });

  t.test('keys made by a key share their maker’s requests per minute', async (t) => {
    const parent = await maker({ rateLimits: { requestsPerMinute: 2 } });
    const [first, second] = [await mint(g, parent.key), await mint(g, parent.key)];
    await g.patchKey(first.id, { rateLimits: { requestsPerMinute: null } });
    t.equal((await g.chat(first.key, { model: 'solo', messages: user('1'), max_tokens: 10 })).status, 200);
    t.equal((await g.chat(second.key, { model: 'solo', messages: user('2'), max_tokens: 10 })).status, 200);
    const third = await g.chat(first.key, { model: 'solo', messages: user('3'), max_tokens: 10 });
    t.equal(third.status, 429, 'the third call in the minute is refused, though an owner lifted the key’s own limit');
    t.equal((await g.chat(parent.key, { model: 'solo', messages: user('4'), max_tokens: 10 })).status, 429, 'and the maker is at its limit');
  });

  t.test('four keys made by a key cannot run more calls at once than their maker’s concurrency allows', async (t) => {
    const parent = await maker({ rateLimits: { concurrency: 2 } });
    const children = [];
    for (let i = 0; i < 4; i += 1) children.push(await mint(g, parent.key));
    g.upstream.reset();
    const [releaseA, releaseB] = [deferred(), deferred()];
    g.upstream.enqueue({ kind: 'reply', usage: USAGE, holdUntil: releaseA.promise }, { kind: 'reply', usage: USAGE, holdUntil: releaseB.promise });
    const open = (key: string) => g.chat(key, { model: 'solo', messages: user('slow'), stream: true, max_tokens: 10 });
    const held = [open(children[0]!.key), open(children[1]!.key)];
    await g.upstream.arrived(2);
    const more = [await open(children[2]!.key), await open(children[3]!.key)];
    t.same(
      more.map((r) => r.status),
      [429, 429],
      'the third and fourth streams are refused while two run',
    );
    releaseA.resolve();
    releaseB.resolve();
    t.same(
      (await Promise.all(held)).map((r) => r.status),
      [200, 200],
    );
    await g.settled();
  });

  t.test('a key made by a key expires when its maker does, even if its own expiry is later', async (t) => {
    const parent = await maker({ expiresAt: new Date(clock().getTime() + 86_400_000).toISOString() });
    const child = await mint(g, parent.key);
    await g.patchKey(parent.id, { expiresAt: new Date(clock().getTime() + 600_000).toISOString() });
    t.equal((await g.chat(child.key, { model: 'solo', messages: user('before'), max_tokens: 10 })).status, 200);
    offsetMs += 601_000;
    const expired = await g.chat(child.key, { model: 'solo', messages: user('after'), max_tokens: 10 });
    t.equal(expired.status, 401);
    t.equal(expired.body?.error?.code, 'key_expired');
    t.equal((await g.test.call('GET', `/client/keys/${child.id}`)).json().expiresAt, child.view.expiresAt, 'its own expiry is unchanged');
    await g.settled();
  });
});

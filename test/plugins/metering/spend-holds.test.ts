import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import type { AppConfigInput } from '../../../config/schema.ts';
import { GatewayCallsPoint, type GatewayCalls } from '../../../core/gateway/gateway-calls.ts';
import { type HeldCall, type SpendHold, SpendHoldsPoint, type SpendHolds } from '../../../core/gateway/spend-holds.ts';
import type { Authenticator } from '../../../core/identity/authenticator.ts';
import type { KeyCredential } from '../../../core/identity/credential.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { ApiError } from '../../../core/kernel/errors.ts';
import { definePlugin } from '../../../core/kernel/plugin.ts';
import { generateToken, SESSION_PREFIX } from '../../../core/identity/api-tokens.ts';
import { creditCounterKey } from '../../../plugins/metering/credit-grants.ts';
import { capCounterKey } from '../../../plugins/metering/governed-admission.ts';
import { meteringErasers } from '../../../plugins/metering/account-figures.ts';
import { realServersConfig } from '../../helpers/app.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';
import { loseRedisData } from '../../helpers/redis-data-loss.ts';
import { onEveryBackend, reservedInputTokens, startMeteredGateway, user, type MeteredGateway, type MeteredGatewayOptions } from './metered-gateway.ts';

/**
 * Spend holds (core/gateway/spend-holds.ts): money held for batch lines, taken from the credit
 * balance and every blocking cap when placed, counted by the cap gate and by counter re-seeding
 * (after a restart, after Redis loses its data), spent by calls run against the hold instead of
 * reserving again, and given back at release. Prices: `solo` live at TEST_PRICES (1 µ$ an input
 * token, 2 µ$ an output token), its batch price half that (0.5 µ$ and 1 µ$).
 */

const SOLO = {
  routes: [{ provider: 'primary', model: 'up-solo' }],
  batch: true,
  prices: { ...TEST_PRICES, batch: { inputPerMTokUsd: 0.5, outputPerMTokUsd: 1 } },
};
const MODELS = { solo: SOLO, 'mock-small': { routes: [{ provider: 'mock', model: 'mock-small' }], prices: TEST_PRICES } };

/** One held call: 1000 input tokens at 0.5 µ$ and 1000 output tokens at 1 µ$ (batch price). */
const HELD_CALL: HeldCall = { model: 'solo', inputTokens: 1000, maxOutputTokens: 1000 };
const HELD_CALL_MICROS = 1500;

/** A live call, and what admission reserves for it at live prices. */
const LIVE_CALL = { model: 'solo', messages: user('hi'), max_tokens: 20 };
const LIVE_MICROS = reservedInputTokens('hi') + 2 * LIVE_CALL.max_tokens;

/** A batch line as the batches plugin sends it; the fake upstream reports 12 input and 6 output tokens. */
const LINE_BODY = { model: 'solo', messages: user('a batch line'), max_tokens: 1000 };
/** What such a line costs at the batch price: 12 × 0.5 µ$ + 6 × 1 µ$. */
const LINE_MICROS = 12n;

/** The seams a batches plugin uses, read when the gateway starts. */
interface Seams {
  holds: SpendHolds;
  calls: GatewayCalls;
  authenticator: Authenticator;
}

interface Gateway {
  g: MeteredGateway;
  seams: Seams;
}

async function gateway(t: Test, options: MeteredGatewayOptions = {}): Promise<Gateway> {
  const found: Partial<Seams> = {};
  const plugin = definePlugin({
    name: 'test-batches',
    description: 'places spend holds and runs batch lines, as the batches plugin will',
    async start({ extensions, container }) {
      found.holds = extensions.get(SpendHoldsPoint);
      found.calls = extensions.get(GatewayCallsPoint);
      found.authenticator = container.resolve(Tokens.Authenticator);
    },
  });
  const g = await startMeteredGateway(t, { ...options, inference: { models: MODELS, ...options.inference }, extraPlugins: [plugin] });
  return { g, seams: found as Seams };
}

const usd = (micros: number) => micros / 1e6;

/** A blocking cap of `micros` per day. */
const dayCap = (micros: number) => ({ usd: usd(micros), period: 'day', mode: 'blocking' });

let references = 0;
const reference = () => `batch:test-${process.pid}-${(references += 1)}`;

/** Places a hold of `count` held calls for the key; `within` records that it ran. */
async function place(gw: Gateway, credential: KeyCredential, count = 1): Promise<{ hold: SpendHold; ran: boolean }> {
  let ran = false;
  const hold = await gw.seams.holds.place({ credential, calls: Array.from({ length: count }, () => HELD_CALL), reference: reference() }, async (_tx, hold) => {
    ran = true;
    return hold;
  });
  return { hold, ran };
}

/** The 402 a refused place throws, and whether its `within` ran. */
async function refusedPlace(gw: Gateway, credential: KeyCredential, calls: HeldCall[]): Promise<{ error: ApiError; ran: boolean }> {
  let ran = false;
  try {
    await gw.seams.holds.place({ credential, calls, reference: reference() }, async () => {
      ran = true;
    });
  } catch (error) {
    if (error instanceof ApiError) return { error, ran };
    throw error;
  }
  throw new Error('the hold was placed');
}

async function holdRows(gw: Gateway, organizationId: string): Promise<number> {
  const { rows } = await gw.g.db.query<{ n: bigint }>('SELECT count(*)::bigint AS n FROM spend_holds WHERE organization_id = $1', [organizationId]);
  return Number(rows[0]!.n);
}

const credentialOf = (gw: Gateway, keyId: string) => gw.seams.authenticator.keyCredentialById(keyId);

/** A key of its own with a blocking daily cap, and its credential. */
async function cappedKey(gw: Gateway, capMicros: number, body: Record<string, unknown> = {}) {
  const key = await gw.g.newKey({ spendCap: dayCap(capMicros), ...body });
  return { ...key, credential: await credentialOf(gw, key.id) };
}

/** Runs one batch line against the hold for the key. */
function line(gw: Gateway, credential: KeyCredential, hold: SpendHold, requestId?: string) {
  return gw.seams.calls.run(credential, { endpoint: '/v1/chat/completions', body: LINE_BODY, hold: { holdId: hold.id, batchId: 'batch_test' }, ...(requestId ? { requestId } : {}) });
}

/** The live value of a key's daily cap counter and of the credit counter. */
async function counters(gw: Gateway, keyId: string, organizationId: string): Promise<Array<number | null>> {
  return gw.g.coordination.allowances.peek([capCounterKey('key', keyId, 'day', new Date()), creditCounterKey(organizationId)]);
}

onEveryBackend(t, (t, storage) => {
  let gw: Gateway;
  t.before(async () => {
    gw = await gateway(t, { storage });
  });

  t.test('a hold that does not fit the key’s blocking cap is refused 402 budget_exceeded, naming the amount, and writes nothing', async (t) => {
    const { credential } = await cappedKey(gw, HELD_CALL_MICROS - 1);
    const { error, ran } = await refusedPlace(gw, credential, [HELD_CALL]);
    t.equal(error.status, 402);
    t.equal(error.code, 'budget_exceeded');
    t.match(error.message, /key spend cap .* cannot hold \$0\.0015/);
    t.notOk(ran, 'the caller’s rows were never written');
    const { rows } = await gw.g.db.query('SELECT 1 FROM spend_holds WHERE key_id = $1', [credential.keyId]);
    t.equal(rows.length, 0, 'no hold row for the key');
  });

  t.test('a hold that does not fit the project’s blocking cap is refused 402 budget_exceeded and writes nothing', async (t) => {
    const created = await gw.g.test.call('POST', '/client/projects', { body: { name: `held ${reference()}` } });
    t.equal(created.statusCode, 201);
    const projectId = created.json().id as string;
    t.equal((await gw.g.test.call('PATCH', `/client/projects/${projectId}`, { body: { spendCap: dayCap(HELD_CALL_MICROS - 1) } })).statusCode, 200);
    const key = await gw.g.newKey({ projectId });
    const credential = await credentialOf(gw, key.id);
    const { error, ran } = await refusedPlace(gw, credential, [HELD_CALL]);
    t.equal(error.code, 'budget_exceeded');
    t.match(error.message, /project spend cap/);
    t.notOk(ran);
    const { rows } = await gw.g.db.query('SELECT 1 FROM spend_holds WHERE project_id = $1', [projectId]);
    t.equal(rows.length, 0, 'no hold row');
  });

  t.test('a hold larger than the credit balance is refused 402 insufficient_credit, naming the amount, and writes nothing', async (t) => {
    const key = await gw.g.newKey();
    const credential = await credentialOf(gw, key.id);
    // $1200 at the batch price, more than the $1000 the account opened with.
    const { error, ran } = await refusedPlace(gw, credential, [{ model: 'solo', inputTokens: 2_400_000_000, maxOutputTokens: 0 }]);
    t.equal(error.status, 402);
    t.equal(error.code, 'insufficient_credit');
    t.match(error.message, /cannot hold \$1200 /);
    t.notOk(ran);
    const { rows } = await gw.g.db.query('SELECT 1 FROM spend_holds WHERE key_id = $1', [key.id]);
    t.equal(rows.length, 0, 'no hold row');
  });

  t.test('a hold that fits makes a live call that fits only without it get 402 budget_exceeded', async (t) => {
    // The hold fits the cap, and so does the live call, but not both.
    const { key, credential } = await cappedKey(gw, HELD_CALL_MICROS + LIVE_MICROS - 1);
    const { ran } = await place(gw, credential);
    t.ok(ran, 'the caller’s rows were written with the hold');
    const live = await gw.g.chat(key, LIVE_CALL);
    t.equal(live.status, 402);
    t.equal(live.body?.error?.code, 'budget_exceeded');
  });

  t.test('release gives back what the hold’s calls did not spend: a live call fits again', async (t) => {
    const { id, key, credential } = await cappedKey(gw, HELD_CALL_MICROS + LIVE_MICROS - 1);
    const { hold } = await place(gw, credential);
    t.equal((await line(gw, credential, hold)).status, 200);
    await gw.g.settled();
    t.equal((await gw.g.chat(key, LIVE_CALL)).status, 402, 'refused while the hold is open');
    const [, creditBefore] = await counters(gw, id, credential.organizationId);
    await gw.seams.holds.release(hold.id);
    const [cap, credit] = await counters(gw, id, credential.organizationId);
    t.equal(cap, -Number(LINE_MICROS), 'the cap counter holds what the line cost, and nothing of the hold');
    t.equal(credit, creditBefore! + HELD_CALL_MICROS - Number(LINE_MICROS), 'the credit counter got back the hold less the line');
    t.equal((await gw.g.chat(key, LIVE_CALL)).status, 200, 'a live call fits again');
  });

  t.test('release is idempotent: a second release gives back nothing more', async (t) => {
    const { id, credential } = await cappedKey(gw, 10 * HELD_CALL_MICROS);
    const { hold } = await place(gw, credential);
    await gw.seams.holds.release(hold.id);
    const after = await counters(gw, id, credential.organizationId);
    await gw.seams.holds.release(hold.id);
    t.same(await counters(gw, id, credential.organizationId), after, 'the counters did not move');
    const { rows } = await gw.g.db.query<{ released: boolean }>('SELECT released_at IS NOT NULL AS released FROM spend_holds WHERE id = $1', [hold.id]);
    t.same(rows, [{ released: true }]);
  });

  t.test('a second hold with a reference already used is refused 409 and takes nothing', async (t) => {
    const { id, credential } = await cappedKey(gw, 10 * HELD_CALL_MICROS);
    const used = reference();
    await gw.seams.holds.place({ credential, calls: [HELD_CALL], reference: used }, async () => undefined);
    const before = await counters(gw, id, credential.organizationId);
    const refusal = await gw.seams.holds
      .place({ credential, calls: [HELD_CALL], reference: used }, async () => undefined)
      .then(
        () => null,
        (error: unknown) => error,
      );
    t.match(refusal, { status: 409, code: 'spend_hold_exists' });
    t.same(await counters(gw, id, credential.organizationId), before, 'the take was given back');
  });

  t.test('a line run against a released hold is admitted as a live call: it takes from the counters and names no hold', async (t) => {
    const { id, credential } = await cappedKey(gw, 10 * HELD_CALL_MICROS);
    const { hold } = await place(gw, credential);
    await gw.seams.holds.release(hold.id);
    const [capBefore] = await counters(gw, id, credential.organizationId);
    const requestId = `req_late_${hold.id}`;
    t.equal((await line(gw, credential, hold, requestId)).status, 200);
    await gw.g.settled();
    const [capAfter] = await counters(gw, id, credential.organizationId);
    t.equal(capAfter, capBefore! - Number(LINE_MICROS), 'the cap counter paid the line, at the batch price');
    const { rows } = await gw.g.db.query('SELECT hold_id, batch_id FROM request_logs WHERE id = $1', [requestId]);
    t.same(rows, [{ hold_id: null, batch_id: 'batch_test' }]);
  });

  t.test('`within` throwing gives the take back and stores no hold', async (t) => {
    const { id, key, credential } = await cappedKey(gw, HELD_CALL_MICROS + LIVE_MICROS - 1);
    t.equal((await gw.g.chat(key, LIVE_CALL)).status, 200, 'the counters exist');
    await gw.g.settled();
    const before = await counters(gw, id, credential.organizationId);
    const failure = new Error('the batch rows could not be written');
    await t.rejects(
      gw.seams.holds.place({ credential, calls: [HELD_CALL], reference: reference() }, async () => {
        throw failure;
      }),
      failure,
    );
    t.same(await counters(gw, id, credential.organizationId), before, 'the cap and credit counters are as before');
    const { rows } = await gw.g.db.query('SELECT 1 FROM spend_holds WHERE key_id = $1', [id]);
    t.equal(rows.length, 0, 'the hold row rolled back with the caller’s');
  });

  t.test('calls run against a hold take nothing more from the cap and credit counters', async (t) => {
    const { id, credential } = await cappedKey(gw, 10 * HELD_CALL_MICROS);
    const { hold } = await place(gw, credential, 3);
    const before = await counters(gw, id, credential.organizationId);
    for (let i = 0; i < 3; i += 1) t.equal((await line(gw, credential, hold)).status, 200);
    await gw.g.settled();
    t.same(await counters(gw, id, credential.organizationId), before);
  });

  t.test('calls run against a hold spend no request-rate allowance', async (t) => {
    const key = await gw.g.newKey({ rateLimits: { requestsPerMinute: 1 } });
    const credential = await credentialOf(gw, key.id);
    const { hold } = await place(gw, credential, 3);
    for (let i = 0; i < 3; i += 1) t.equal((await line(gw, credential, hold)).status, 200, `line ${i + 1}`);
    t.equal((await gw.g.chat(key.key, LIVE_CALL)).status, 200, 'the key’s one request a minute is still there');
  });

  t.test('a call run against a hold is billed at the batch price and its request-log row carries the hold and the batch', async (t) => {
    const key = await gw.g.newKey();
    const credential = await credentialOf(gw, key.id);
    const { hold } = await place(gw, credential);
    const requestId = `req_line_${hold.id}`;
    t.equal((await line(gw, credential, hold, requestId)).status, 200);
    await gw.g.settled();
    const { rows } = await gw.g.db.query<{ cost_micros: bigint; hold_id: string; batch_id: string; input_tokens: number; output_tokens: number }>(
      'SELECT cost_micros, hold_id, batch_id, input_tokens, output_tokens FROM request_logs WHERE id = $1',
      [requestId],
    );
    t.match(rows[0], { input_tokens: 12, output_tokens: 6, hold_id: hold.id, batch_id: 'batch_test' });
    t.equal(BigInt(rows[0]!.cost_micros), LINE_MICROS, 'half the live price (24 µ$)');
  });

  t.test('the request-log view marks a batch line with its batch and no other call', async (t) => {
    const key = await gw.g.newKey();
    const credential = await credentialOf(gw, key.id);
    const { hold } = await place(gw, credential);
    const lineId = `req_view_${hold.id}`;
    t.equal((await line(gw, credential, hold, lineId)).status, 200);
    t.equal((await gw.g.chat(key.key, LIVE_CALL)).status, 200);
    await gw.g.settled();
    const listed = await gw.g.test.call('GET', `/client/requests?keyId=${key.id}`);
    t.equal(listed.statusCode, 200);
    const data = listed.json().data as Array<Record<string, unknown>>;
    t.equal(data.length, 2);
    t.equal(data.find((row) => row['id'] === lineId)?.['batchId'], 'batch_test');
    t.notOk('batchId' in data.find((row) => row['id'] !== lineId)!, 'the live call has none');
  });

  t.test('batch lines are counted apart in the metrics', async (t) => {
    const key = await gw.g.newKey();
    const credential = await credentialOf(gw, key.id);
    const { hold } = await place(gw, credential);
    const metrics = gw.g.test.app.svc.container.resolve(Tokens.Metrics);
    const count = async () => Number(/svc_gateway_batch_lines_total\{endpoint="\/v1\/chat\/completions",model="solo",status="200"\} (\d+)/.exec(await metrics.registry.metrics())?.[1] ?? 0);
    const before = await count();
    t.equal((await line(gw, credential, hold)).status, 200);
    t.equal(await count(), before + 1);
  });

  t.test('account deletion erases the organisation’s holds', async (t) => {
    const key = await gw.g.newKey();
    const credential = await credentialOf(gw, key.id);
    await place(gw, credential);
    const eraser = meteringErasers().find((candidate) => candidate.name === 'spend holds')!;
    const erased = await gw.g.db.transaction((tx) => eraser.erase(tx, credential.organizationId));
    t.ok(erased >= 1, `${erased} holds erased`);
    t.equal(await holdRows(gw, credential.organizationId), 0);
  });

  t.test('GatewayCalls.check answers the model, whether batches take it, and the estimate, taking nothing', async (t) => {
    const { id, credential } = await cappedKey(gw, 10 * HELD_CALL_MICROS);
    const checked = await gw.seams.calls.check(credential, { endpoint: '/v1/chat/completions', body: LINE_BODY });
    t.same(checked, { model: 'solo', batch: true, estimate: { inputTokens: reservedInputTokens('a batch line'), maxOutputTokens: 1000 } });
    t.equal((await counters(gw, id, credential.organizationId))[0], null, 'nothing was taken: the key’s cap counter was never made');
  });

  t.test('GatewayCalls.check refuses a bad body with the route’s 400 naming the field', async (t) => {
    const credential = await credentialOf(gw, (await gw.g.newKey()).id);
    const refusal = (body: unknown) =>
      gw.seams.calls.check(credential, { endpoint: '/v1/chat/completions', body }).then(
        () => null,
        (error: unknown) => error,
      );
    t.match(await refusal({ model: 'solo', messages: 'hello' }), { status: 400, param: 'messages' });
    t.match(await refusal({ ...LINE_BODY, stream: true }), { status: 400, param: 'stream' }, 'a body asking for a stream, as run() answers it');
  });

  t.test('GatewayCalls.check refuses an unknown model with the route’s 404', async (t) => {
    const credential = await credentialOf(gw, (await gw.g.newKey()).id);
    const refusal = await gw.seams.calls.check(credential, { endpoint: '/v1/chat/completions', body: { ...LINE_BODY, model: 'no-such-model' } }).then(
      () => null,
      (error: unknown) => error,
    );
    t.match(refusal, { status: 404, code: 'model_not_found' });
  });

  // Last: an account cap binds every key of the organisation.
  t.test('a hold that does not fit the account’s blocking cap is refused 402 budget_exceeded and writes nothing', async (t) => {
    t.teardown(async () => {
      await gw.g.test.call('PATCH', '/client/budget', { body: { accountCap: null } });
    });
    t.equal((await gw.g.test.call('PATCH', '/client/budget', { body: { accountCap: dayCap(1) } })).statusCode, 200);
    const key = await gw.g.newKey();
    const credential = await credentialOf(gw, key.id);
    const { error, ran } = await refusedPlace(gw, credential, [HELD_CALL]);
    t.equal(error.code, 'budget_exceeded');
    t.match(error.message, /account spend cap/);
    t.notOk(ran);
    const { rows } = await gw.g.db.query('SELECT 1 FROM spend_holds WHERE key_id = $1', [key.id]);
    t.equal(rows.length, 0, 'no hold row');
  });
});

/**
 * A restart: the coordination store in memory goes with the process, so the counters are seeded
 * again from the database, which must still count the hold. PGlite on disk, or PostgreSQL.
 */
onEveryBackend(t, (t, storage) => {
  t.test('after a restart of the app on the same database, a live call that fits only without the hold still gets 402', async (t) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'svc-holds-'));
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
    const database: AppConfigInput['storage'] = storage
      ? { database: storage.database, coordination: { driver: 'memory' } }
      : { database: { driver: 'pglite', dataDir: join(dataDir, 'pglite') } };
    const ownerToken = generateToken(SESSION_PREFIX);
    const first = await gateway(t, { storage: database, ownerToken });
    const { key, credential } = await cappedKey(first, HELD_CALL_MICROS + LIVE_MICROS - 1);
    await place(first, credential);
    await first.g.test.app.close();

    const second = await gateway(t, { storage: database, ownerToken, upstream: first.g.upstream });
    const live = await second.g.chat(key, LIVE_CALL);
    t.equal(live.status, 402, 'refused by the counters seeded again');
    t.equal(live.body?.error?.code, 'budget_exceeded');
  });
});

const real = realServersConfig();
t.test('after Redis loses its data, a live call that fits only without the hold still gets 402', { skip: real ? false : 'needs TEST_PG_URL and TEST_REDIS_URL' }, async (t) => {
  if (!real) return;
  t.teardown(() => real.dropSchema()); // registered first: runs after the gateway has closed
  t.teardown(() => loseRedisData(process.env.TEST_REDIS_URL!, real.prefix));
  const gw = await gateway(t, { storage: real.storage });
  const { key, credential } = await cappedKey(gw, HELD_CALL_MICROS + LIVE_MICROS - 1);
  await place(gw, credential);
  t.ok((await loseRedisData(process.env.TEST_REDIS_URL!, real.prefix)) > 0, 'Redis lost the deployment’s data');
  const live = await gw.g.chat(key, LIVE_CALL);
  t.equal(live.status, 402, 'refused by the counters seeded again');
  t.equal(live.body?.error?.code, 'budget_exceeded');
});

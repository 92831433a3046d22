import t from 'tap';
import { createOrganizationWithOwner, issueSession } from '../../../core/identity/identity-admin.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { sqlIdentityStores } from '../../../adapters/sql/identity-stores.ts';
import { creditCounterKey } from '../../../plugins/metering/credit-grants.ts';
import { MeteringTokens } from '../../../plugins/metering/index.ts';
import { generatePromotionCode, SqlPromotionCodes } from '../../../plugins/metering/promotion-codes.ts';
import { addPerson, allPlugins, buildTestApp, createKey, realServersConfig, type TestApp } from '../../helpers/app.ts';

/** POST /client/credits/redeem: promotion codes the operator made, redeemed by an organisation's owner. */

type Json = Record<string, any>;

function handClock(start = new Date('2026-06-01T12:00:00Z')) {
  let now = start.getTime();
  return { clock: () => new Date(now), advance: (ms: number) => (now += ms) };
}

/** Makes a code as `credits codes create` does and returns its plaintext and id. */
async function makeCode(test: TestApp, options: { usd?: number; label?: string; expiresAt?: Date; max?: number | null } = {}) {
  const code = generatePromotionCode();
  const db = test.app.svc.container.resolve(Tokens.Database);
  const created = await new SqlPromotionCodes(db).create({
    code,
    label: options.label ?? 'Launch week',
    amountMicros: BigInt(Math.round((options.usd ?? 25) * 1e6)),
    expiresAt: options.expiresAt ?? new Date('2027-01-01T00:00:00Z'),
    maxRedemptions: options.max ?? null,
  });
  return { code, id: created.id };
}

/** A second organisation with its owner's session on the same deployment. */
async function otherOrganization(test: TestApp, name: string): Promise<{ organizationId: string; token: string }> {
  const db = test.app.svc.container.resolve(Tokens.Database);
  const { organization, owner } = await createOrganizationWithOwner(db, sqlIdentityStores, { name, ownerEmail: `${name.toLowerCase()}@example.com`, ownerName: name });
  const { token } = await issueSession(sqlIdentityStores(db), { personId: owner.id, ttlDays: 1, now: new Date() });
  return { organizationId: organization.id, token };
}

const redeem = (test: TestApp, code: string, token?: string) => test.call('POST', '/client/credits/redeem', { ...(token ? { token } : {}), body: { code } });
const balanceMicros = async (test: TestApp, token?: string) => BigInt((await test.call('GET', '/client/credits', { ...(token ? { token } : {}) })).json().balanceMicros);
const codeOf = (response: { json(): Json }) => response.json().error?.code as string | undefined;

const time = handClock();
/** Enough tries for every test here; the throttling test below sets its own. */
const generous = { attemptsPerOrganization: 1000, attemptsPerAddress: 1000 };
const test = await buildTestApp(t, { clock: time.clock, plugins: { ...allPlugins(), metering: { initialCreditUsd: 100, promotionCodes: generous } } });

t.test('redeeming a code adds exactly its amount as one promotion line labelled with the promotion, never the code', async (t) => {
  const before = await balanceMicros(test);
  const { code, id } = await makeCode(test, { usd: 25.123456, label: 'Spring promotion' });
  const response = await redeem(test, code);
  t.equal(response.statusCode, 201, response.body);
  const body = response.json();
  t.match(body, {
    object: 'credit_redemption',
    label: 'Spring promotion',
    amountUsd: 25.123456,
    line: { kind: 'promotion', amountUsd: 25.123456, note: 'Spring promotion', reference: `promotion:${id}` },
  });
  t.equal(await balanceMicros(test), before + 25_123_456n, 'the balance moved by the amount, exactly');
  t.equal(BigInt(Math.round(body.line.balanceAfterUsd * 1e6)), before + 25_123_456n, 'the line records the balance after it');
  const statement = await test.call('GET', '/client/credits/statement');
  t.notOk(statement.body.includes(code) || statement.body.includes(code.replaceAll('-', '')), 'the code is nowhere in the statement');
});

t.test('the summary counts a promotion as an adjustment, not a payment, and still balances exactly', async (t) => {
  const summary = async () => (await test.call('GET', '/client/credits/summary')).json().micros as Record<string, string>;
  const before = await summary();
  const { code } = await makeCode(test, { usd: 7.5 });
  t.equal((await redeem(test, code)).statusCode, 201);
  const after = await summary();
  t.equal(BigInt(after.adjustments!) - BigInt(before.adjustments!), 7_500_000n, 'adjustments grew by the promotion');
  t.equal(after.payments, before.payments, 'payments did not');
  const closing = BigInt(after.opening!) + BigInt(after.payments!) + BigInt(after.adjustments!) - BigInt(after.hosting!) - BigInt(after.ai!);
  t.equal(BigInt(after.closing!), closing, 'opening + payments + adjustments - hosting - AI = closing');
  t.equal(BigInt(after.closing!), await balanceMicros(test), 'and closing is the balance');
});

t.test('the live credit counter admission reserves against moves with the ledger', async (t) => {
  const coordination = test.app.svc.container.resolve(Tokens.Coordination);
  const key = creditCounterKey(test.organizationId);
  await coordination.allowances.seed(key, Number(await balanceMicros(test)), 60_000);
  const { code } = await makeCode(test, { usd: 3 });
  t.equal((await redeem(test, code)).statusCode, 201);
  t.equal((await coordination.allowances.peek([key]))[0], Number(await balanceMicros(test)));
  const again = await redeem(test, code);
  t.equal(again.statusCode, 409);
  t.equal((await coordination.allowances.peek([key]))[0], Number(await balanceMicros(test)), 'a refused redemption gives nothing back to keep');
});

t.test('case, spaces, dashes and look-alike letters in a typed code do not matter', async (t) => {
  const { code } = await makeCode(test, { usd: 1 });
  const typed = ` ${code.toLowerCase().replaceAll('-', ' ').replaceAll('0', 'o').replaceAll('1', 'l')} `;
  t.equal((await redeem(test, typed)).statusCode, 201);
});

t.test('an organisation redeems a code once: again answers 409 promotion_code_already_redeemed and moves nothing', async (t) => {
  const { code } = await makeCode(test, { usd: 2 });
  t.equal((await redeem(test, code)).statusCode, 201);
  const before = await balanceMicros(test);
  const again = await redeem(test, code);
  t.equal(again.statusCode, 409);
  t.same([codeOf(again), again.json().error.param], ['promotion_code_already_redeemed', 'code']);
  t.equal(await balanceMicros(test), before);
});

t.test('an unknown code and a withdrawn one both answer 404 promotion_code_not_found', async (t) => {
  const unknown = await redeem(test, generatePromotionCode());
  t.same([unknown.statusCode, codeOf(unknown)], [404, 'promotion_code_not_found']);
  const { code, id } = await makeCode(test);
  await new SqlPromotionCodes(test.app.svc.container.resolve(Tokens.Database)).revoke(id, new Date());
  const withdrawn = await redeem(test, code);
  t.same([withdrawn.statusCode, codeOf(withdrawn)], [404, 'promotion_code_not_found']);
});

t.test('a code answers 400 promotion_code_expired from its expiry on (injected clock)', async (t) => {
  const { code } = await makeCode(test, { expiresAt: new Date(time.clock().getTime() + 3_600_000) });
  time.advance(3_600_000);
  const expired = await redeem(test, code);
  t.same([expired.statusCode, codeOf(expired)], [400, 'promotion_code_expired']);
});

t.test('a code with a total limit answers 409 promotion_code_used_up once other organisations took them all', async (t) => {
  const { code } = await makeCode(test, { usd: 1, max: 2 });
  const first = await otherOrganization(test, 'First');
  const second = await otherOrganization(test, 'Second');
  t.equal((await redeem(test, code, first.token)).statusCode, 201);
  t.equal((await redeem(test, code, second.token)).statusCode, 201);
  const late = await redeem(test, code);
  t.same([late.statusCode, codeOf(late)], [409, 'promotion_code_used_up']);
  t.equal(await balanceMicros(test, first.token), 1_000_000n + 100_000_000n, 'the other organisation got its credit (over its opening $100)');
});

t.test('only an owner may redeem: an admin, a member and a key holding every scope answer 403 owner_required', async (t) => {
  const { code } = await makeCode(test);
  const admin = await addPerson(test, { role: 'admin' });
  const member = await addPerson(test, { role: 'member' });
  const key = await createKey(test, { name: 'every scope', scopes: ['inference', 'keys:read', 'keys:write', 'usage:read', 'projects:write', 'webhooks:write'] });
  for (const [who, token] of [
    ['admin', admin.token],
    ['member', member.token],
    ['key', key.key],
  ] as const) {
    const refused = await redeem(test, code, token);
    t.same([refused.statusCode, codeOf(refused)], [403, 'owner_required'], who);
  }
  t.equal((await redeem(test, code)).statusCode, 201, 'the code is still there for the owner');
});

t.test('a redemption emits credit.granted with its line, label and code id, never the code', async (t) => {
  const { code, id } = await makeCode(test, { usd: 4, label: 'Conference' });
  const line = (await redeem(test, code)).json().line as Json;
  const db = test.app.svc.container.resolve(Tokens.Database);
  const { rows } = await db.query<{ data: unknown }>("SELECT data FROM events WHERE type = 'credit.granted' AND subject = $1", [line.id]);
  t.equal(rows.length, 1);
  const data = (typeof rows[0]!.data === 'string' ? JSON.parse(rows[0]!.data) : rows[0]!.data) as Json;
  t.same(data, {
    ledgerLineId: line.id,
    kind: 'promotion',
    amountMicros: '4000000',
    balanceAfterMicros: String(Math.round(line.balanceAfterUsd * 1e6)),
    note: 'Conference',
    promotionCodeId: id,
  });
  t.notOk(JSON.stringify(data).includes(code.replaceAll('-', '').slice(0, 8)), 'no part of the code');
});

t.test('the body takes only a code: an unknown field or an empty code answers 400', async (t) => {
  const unknown = await test.call('POST', '/client/credits/redeem', { body: { code: 'X', amountUsd: 100 } });
  t.same([unknown.statusCode, codeOf(unknown), unknown.json().error.param], [400, 'unknown_field', 'amountUsd']);
  const empty = await test.call('POST', '/client/credits/redeem', { body: { code: '  ' } });
  t.same([empty.statusCode, empty.json().error.param], [400, 'code']);
});

t.test('tries are limited per organisation and per client address, refused or not: 429 with retry-after', async (t) => {
  const limited = await buildTestApp(t, { plugins: { ...allPlugins(), metering: { initialCreditUsd: 100, promotionCodes: { attemptsPerOrganization: 3, attemptsPerAddress: 4 } } } });
  const other = await otherOrganization(limited, 'Neighbour');
  const attempt = (token: string, remoteAddress: string) =>
    limited.app.inject({ method: 'POST', url: '/client/credits/redeem', remoteAddress, headers: { authorization: `Bearer ${token}` }, payload: { code: generatePromotionCode() } });
  for (let i = 0; i < 3; i += 1) t.equal((await attempt(limited.ownerToken, '198.51.100.7')).statusCode, 404, `guess ${i + 1}`);
  const byOrganization = await attempt(limited.ownerToken, '203.0.113.9');
  t.same([byOrganization.statusCode, codeOf(byOrganization)], [429, 'too_many_redemption_attempts'], 'the organisation used its tries, from any address');
  t.ok(Number(byOrganization.headers['retry-after']) >= 1, 'retry-after says when');
  t.equal((await attempt(other.token, '198.51.100.7')).statusCode, 404, 'the address has one try left');
  const byAddress = await attempt(other.token, '198.51.100.7');
  t.same([byAddress.statusCode, codeOf(byAddress)], [429, 'too_many_redemption_attempts'], 'the address used its tries, for any organisation');
  t.equal((await attempt(other.token, '192.0.2.44')).statusCode, 404, 'the other organisation still has tries from elsewhere');
});

const servers = realServersConfig();

t.test('redemptions racing on PostgreSQL', { skip: servers ? false : 'needs TEST_PG_URL and TEST_REDIS_URL' }, async (t) => {
  t.teardown(() => servers!.dropSchema());
  const racing = await buildTestApp(t, { config: { storage: servers!.storage }, plugins: { ...allPlugins(), metering: { initialCreditUsd: 100, promotionCodes: generous } } });
  const ledger = racing.app.svc.container.resolve(MeteringTokens.Ledger);

  t.test('two organisations racing for the last redemption: exactly one gets it', async (t) => {
    for (let round = 0; round < 5; round += 1) {
      const { code } = await makeCode(racing, { usd: 5, max: 1 });
      const a = await otherOrganization(racing, `Racer A${round}`);
      const b = await otherOrganization(racing, `Racer B${round}`);
      const answers = await Promise.all([redeem(racing, code, a.token), redeem(racing, code, b.token)]);
      t.same(answers.map((r) => r.statusCode).sort(), [201, 409], `round ${round}: one wins`);
      t.equal(answers.map(codeOf).filter(Boolean).join(), 'promotion_code_used_up');
      const balances = [await ledger.balance(a.organizationId), await ledger.balance(b.organizationId)].map((v) => v ?? 0n);
      t.same(balances.map((v) => v - 100_000_000n).sort(), [0n, 5_000_000n], 'only the winner was credited');
    }
  });

  t.test('one organisation redeeming the same code twice at once: credited once', async (t) => {
    for (let round = 0; round < 5; round += 1) {
      const { code } = await makeCode(racing, { usd: 5 });
      const org = await otherOrganization(racing, `Twice ${round}`);
      const answers = await Promise.all([redeem(racing, code, org.token), redeem(racing, code, org.token), redeem(racing, code, org.token)]);
      t.same(answers.map((r) => r.statusCode).sort(), [201, 409, 409], `round ${round}`);
      t.equal(await ledger.balance(org.organizationId), 105_000_000n, 'credited once, exactly');
      const lines = await ledger.lines(org.organizationId, { kinds: ['promotion'], limit: 10 });
      t.equal(lines.length, 1, 'one promotion line');
    }
  });
});

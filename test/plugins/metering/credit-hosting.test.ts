import t from 'tap';
import { MeteringTokens } from '../../../plugins/metering/index.ts';
import { buildTestApp } from '../../helpers/app.ts';

/** GET /client/credits/hosting: the statement's hosting lines, with its paging and window. */

type Json = Record<string, any>;

const test = await buildTestApp(t);
const ledger = test.app.svc.container.resolve(MeteringTokens.Ledger);
const hosting = async (query = '') => {
  const response = await test.call('GET', `/client/credits/hosting${query}`);
  return { status: response.statusCode, body: response.json() as Json };
};

t.test('an account that hosts nothing has no hosting lines', async (t) => {
  const { status, body } = await hosting();
  t.equal(status, 200);
  t.same(body, { object: 'list', data: [], nextCursor: null });
});

t.test('a metered day is one line with the day and entries it covers; the base fee is a line of its own with a note', async (t) => {
  await ledger.append(test.organizationId, { kind: 'hosting', amountMicros: -300n, note: 'Hosting', coversUtcDay: '2026-11-20', coversEntries: 3 });
  await ledger.append(test.organizationId, { kind: 'hosting_base_fee', amountMicros: -100n, note: 'Hosting base fee, 2026-11-20' });
  const { body } = await hosting();
  t.match(body.data, [
    { kind: 'hosting_base_fee', amountUsd: -0.0001, note: 'Hosting base fee, 2026-11-20', coversUtcDay: null, coversEntries: null },
    { kind: 'hosting', amountUsd: -0.0003, coversUtcDay: '2026-11-20', coversEntries: 3 },
  ]);
});

t.test('only hosting lines: payments, promotions, adjustments and AI usage are left out', async (t) => {
  await ledger.append(test.organizationId, { kind: 'payment', amountMicros: 5_000_000n, note: 'wire' });
  await ledger.append(test.organizationId, { kind: 'ai_usage', amountMicros: -42n });
  await ledger.append(test.organizationId, { kind: 'promotion', amountMicros: 1_000_000n, note: 'Launch week', reference: 'promotion:test' });
  await ledger.append(test.organizationId, { kind: 'adjustment', amountMicros: 7n, note: 'goodwill' });
  const kinds = new Set((await hosting()).body.data.map((line: Json) => line.kind));
  t.same([...kinds].sort(), ['hosting', 'hosting_base_fee']);
});

t.test('the same lines as the statement with lens=hosting, paged the same way', async (t) => {
  for (let day = 1; day <= 5; day += 1) {
    await ledger.append(test.organizationId, { kind: 'hosting', amountMicros: -10n, coversUtcDay: `2026-12-0${day}`, coversEntries: day });
  }
  const lens = (await test.call('GET', '/client/credits/statement?lens=hosting&limit=500')).json();
  t.same((await hosting('?limit=500')).body.data, lens.data);
  const first = await hosting('?limit=4');
  t.equal(first.body.data.length, 4);
  const rest = await hosting(`?limit=4&cursor=${first.body.nextCursor}`);
  t.same(
    [...first.body.data, ...rest.body.data].map((line: Json) => line.id),
    lens.data.map((line: Json) => line.id),
    'pages join up with nothing skipped or repeated',
  );
  t.equal(rest.body.nextCursor, null);
});

t.test('limit is at most 500 and from/to bound the window', async (t) => {
  t.equal((await hosting('?limit=501')).status, 400);
  t.equal((await hosting('?from=2999-01-01')).body.data.length, 0, 'nothing after the window');
  t.equal((await hosting('?to=2000-01-01')).body.data.length, 0, 'nothing before it');
});

import t from 'tap';
import { priceSheet } from '../../../plugins/metering/pricing.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';
import { deferred } from '../../helpers/jobs.ts';
import { estimatedInputTokens, reservedInputTokens, sseFrames, startMeteredGateway, user, waitFor, type ChatResult } from './metered-gateway.ts';

/** Admission on one embedded gateway: headers, concurrency, tokens/min, costs, alert-only caps. */

let offsetMs = 0;
const clock = () => new Date(Date.now() + offsetMs);
const g = await startMeteredGateway(t, { clock });

const REQUEST_HEADERS = ['x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests', 'x-ratelimit-reset-requests'];
const TOKEN_HEADERS = ['x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens'];
const DURATION = /^(\d+ms|\d+(\.\d+)?s|\d+m\d+s)$/;

const present = (r: ChatResult, names: string[]) => names.filter((name) => r.headers.get(name) !== null);

async function logRow(requestId: string | null): Promise<Record<string, any>> {
  await g.flush();
  const { rows } = await g.db.query('SELECT * FROM request_logs WHERE id = $1', [requestId]);
  if (rows.length !== 1) throw new Error(`no request_logs row for ${requestId}`);
  return rows[0]!;
}

t.test('header presence/absence rules', async (t) => {
  t.test('with rpm and tpm limits set, all six x-ratelimit-* headers are on JSON and streamed responses', async (t) => {
    const { id, key } = await g.newKey({ name: 'rpm+tpm' });
    await g.patchKey(id, { rateLimits: { requestsPerMinute: 100, tokensPerMinute: 100_000 } });
    g.upstream.reset();
    const json = await g.chat(key, { model: 'solo', messages: user('hello'), max_tokens: 50 });
    const streamed = await g.chat(key, { model: 'solo', messages: user('hello'), max_tokens: 50, stream: true });
    t.equal(json.status, 200);
    t.equal(streamed.status, 200);
    t.match(streamed.headers.get('content-type'), /text\/event-stream/);
    t.equal(sseFrames(streamed.text).at(-1), '[DONE]', 'the stream ran to the end');
    for (const [label, r] of [
      ['JSON', json],
      ['streamed', streamed],
    ] as const) {
      t.same(present(r, [...REQUEST_HEADERS, ...TOKEN_HEADERS]), [...REQUEST_HEADERS, ...TOKEN_HEADERS], `${label}: all six headers`);
      t.equal(r.headers.get('x-ratelimit-limit-requests'), '100', `${label}: the requests ceiling`);
      t.equal(r.headers.get('x-ratelimit-limit-tokens'), '100000', `${label}: the tokens ceiling`);
      t.ok(Number(r.headers.get('x-ratelimit-remaining-requests')) < 100, `${label}: requests remaining counts this call`);
      t.ok(Number(r.headers.get('x-ratelimit-remaining-tokens')) < 100_000, `${label}: tokens remaining counts this call`);
      t.match(r.headers.get('x-ratelimit-reset-requests'), DURATION, `${label}: reset-requests is a duration`);
      t.match(r.headers.get('x-ratelimit-reset-tokens'), DURATION, `${label}: reset-tokens is a duration`);
    }
  });

  t.test('with no tokens-per-minute limit anywhere, the -tokens headers are absent (never zero)', async (t) => {
    const { id, key } = await g.newKey({ name: 'rpm only' });
    await g.patchKey(id, { rateLimits: { requestsPerMinute: 100 } });
    g.upstream.reset();
    const json = await g.chat(key, { model: 'solo', messages: user('hello'), max_tokens: 50 });
    const streamed = await g.chat(key, { model: 'solo', messages: user('hello'), max_tokens: 50, stream: true });
    for (const [label, r] of [
      ['JSON', json],
      ['streamed', streamed],
    ] as const) {
      t.equal(r.status, 200, label);
      t.same(present(r, REQUEST_HEADERS), REQUEST_HEADERS, `${label}: the -requests headers are there`);
      t.same(present(r, TOKEN_HEADERS), [], `${label}: no -tokens header`);
    }
  });

  t.test('on 429 the headers and retry-after are present', async (t) => {
    const { id, key } = await g.newKey({ name: 'rpm 2' });
    await g.patchKey(id, { rateLimits: { requestsPerMinute: 2, tokensPerMinute: 100_000 } });
    g.upstream.reset();
    for (let i = 0; i < 2; i += 1) t.equal((await g.chat(key, { model: 'solo', messages: user('hello'), max_tokens: 50 })).status, 200);
    const refused = await g.chat(key, { model: 'solo', messages: user('hello'), max_tokens: 50 });
    t.equal(refused.status, 429);
    t.equal(refused.body?.error?.code, 'rate_limit_exceeded');
    t.equal(refused.body?.error?.type, 'rate_limit_error');
    t.match(refused.headers.get('retry-after'), /^[1-9]\d*$/, 'retry-after in whole seconds');
    t.ok(Number(refused.headers.get('retry-after')) <= 60, 'retry-after is within the minute');
    t.equal(refused.headers.get('x-ratelimit-remaining-requests'), '0');
    t.same(present(refused, REQUEST_HEADERS), REQUEST_HEADERS, 'the -requests headers are there');
    // A tokens/min limit is set on this key, so the -tokens headers are measured and must be shown:
    // a missing header would claim the limit is not measured.
    t.same(present(refused, TOKEN_HEADERS), TOKEN_HEADERS, 'the -tokens headers are there too (a tpm limit is set)');
  });

  t.test('a concurrency 429 and a budget 402 carry the headers too (every gateway response does)', async (t) => {
    const { id, key } = await g.newKey({ name: 'headers on refusals' });
    await g.patchKey(id, {
      rateLimits: { requestsPerMinute: 100, tokensPerMinute: 100_000, concurrency: 1 },
      spendCap: { usd: 0.001, period: 'month', mode: 'blocking' },
    });
    g.upstream.reset();
    const release = deferred();
    g.upstream.enqueue({ kind: 'reply', content: Array.from({ length: 10 }, (_, i) => `w${i}`).join(' '), holdUntil: release.promise });
    const slow = g.chat(key, { model: 'solo', messages: user('slow'), max_tokens: 50, stream: true });
    await g.upstream.arrived(); // admitted, and held by the upstream until released below
    t.equal(await g.coordination.leases.active(`conc:key:${id}`), 1, 'the first call holds the one slot');
    const busy = await g.chat(key, { model: 'solo', messages: user('second'), max_tokens: 50 });
    t.equal(busy.status, 429);
    t.same(present(busy, [...REQUEST_HEADERS, ...TOKEN_HEADERS]), [...REQUEST_HEADERS, ...TOKEN_HEADERS], 'concurrency 429: all six headers');
    release.resolve();
    t.equal((await slow).status, 200);
    await g.settled();
    t.equal(await g.coordination.leases.active(`conc:key:${id}`), 0, 'the slot is free again');

    // max_tokens 1000 may cost 2008 µ$, more than the 1000 µ$ cap.
    const over = await g.chat(key, { model: 'solo', messages: user('hi'), max_tokens: 1_000 });
    t.equal(over.status, 402);
    t.equal(over.body?.error?.code, 'budget_exceeded');
    t.match(over.body?.error?.message, /lower max_tokens/);
    t.same(present(over, [...REQUEST_HEADERS, ...TOKEN_HEADERS]), [...REQUEST_HEADERS, ...TOKEN_HEADERS], 'budget 402: all six headers');
  });

  t.test('responses that take nothing (the model list, an unknown model) carry the headers too', async (t) => {
    const { id, key } = await g.newKey({ name: 'peek' });
    await g.patchKey(id, { rateLimits: { requestsPerMinute: 100, tokensPerMinute: 100_000 } });
    const headersOf = (response: Response) => [...REQUEST_HEADERS, ...TOKEN_HEADERS].filter((name) => response.headers.has(name));
    const models = await fetch(`${g.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
    t.equal(models.status, 200);
    t.same(headersOf(models), [...REQUEST_HEADERS, ...TOKEN_HEADERS]);
    t.equal(models.headers.get('x-ratelimit-remaining-requests'), '100', 'reading the list consumed nothing');
    const unknown = await fetch(`${g.url}/v1/models/nope`, { headers: { authorization: `Bearer ${key}` } });
    t.equal(unknown.status, 404);
    t.same(headersOf(unknown), [...REQUEST_HEADERS, ...TOKEN_HEADERS]);
  });
});

t.test('concurrency cap: with concurrency 2, a third simultaneous slow stream gets 429 and, once one finishes, a new one is admitted', async (t) => {
  const { id, key } = await g.newKey({ name: 'two at once' });
  await g.patchKey(id, { rateLimits: { concurrency: 2 } });
  const active = () => g.coordination.leases.active(`conc:key:${id}`);
  g.upstream.reset();
  // Both streams are held by the upstream until the test lets each go: "at the same time" is then
  // a fact, however slow the machine.
  const [releaseA, releaseB] = [deferred(), deferred()];
  const content = Array.from({ length: 20 }, (_, i) => `w${i}`).join(' ');
  g.upstream.enqueue({ kind: 'reply', content, holdUntil: releaseA.promise }, { kind: 'reply', content, holdUntil: releaseB.promise });
  const open = () => g.chat(key, { model: 'solo', messages: user('slow'), stream: true, max_tokens: 100 });
  const streams = [open(), open()];
  await g.upstream.arrived(2);
  t.equal(await active(), 2, 'two streams run, each holding a lease');

  const third = await g.chat(key, { model: 'solo', messages: user('third'), stream: true, max_tokens: 100 });
  t.equal(third.status, 429, 'a third at the same time is refused');
  t.equal(third.body?.error?.code, 'rate_limit_exceeded');
  t.equal(third.body?.error?.type, 'rate_limit_error');
  t.match(third.headers.get('retry-after'), /^[1-9]\d*$/, 'with retry-after');

  releaseA.resolve();
  const first = await Promise.race(streams);
  t.equal(first.status, 200);
  t.match(first.text, /\[DONE\]/, 'the first stream finishes');
  // Its lease is given back as the call settles, just after the client has read the end.
  t.ok(await waitFor(async () => (await active()) === 1), 'the finished stream released its lease');
  const fourth = await g.chat(key, { model: 'solo', messages: user('fourth'), stream: true, max_tokens: 100 });
  t.equal(fourth.status, 200, 'once one finished, a new stream is admitted');
  releaseB.resolve();
  t.same(
    (await Promise.all(streams)).map((r) => r.status),
    [200, 200],
    'both streams ran',
  );
  await g.settled();
  t.equal(await active(), 0, 'every lease is released afterwards');
});

t.test('tokens/min: a request whose estimate exceeds the tpm limit is refused with a message saying to lower max_tokens', async (t) => {
  const { id, key } = await g.newKey({ name: 'tpm 1000' });
  await g.patchKey(id, { rateLimits: { tokensPerMinute: 1_000 } });
  g.upstream.reset();
  const tooBig = await g.chat(key, { model: 'solo', messages: user('hello'), max_tokens: 2_000 });
  t.equal(tooBig.status, 429);
  t.equal(tooBig.body?.error?.code, 'rate_limit_exceeded');
  t.equal(tooBig.body?.error?.type, 'rate_limit_error');
  t.match(tooBig.body?.error?.message, /lower max_tokens/, 'the message says what to do');
  t.match(tooBig.body?.error?.message, new RegExp(String(reservedInputTokens('hello') + 2_000)), 'and names the estimate');
  t.equal(g.upstream.requests.length, 0, 'nothing reached the upstream');

  // The refusal took nothing: a call that fits is served, and one that uses the rest is then refused for the minute.
  g.upstream.enqueue({ kind: 'reply', usage: { prompt_tokens: 8, completion_tokens: 600 } });
  const fits = await g.chat(key, { model: 'solo', messages: user('hello'), max_tokens: 600 });
  t.equal(fits.status, 200, 'a request that fits is served');
  const rest = await g.chat(key, { model: 'solo', messages: user('hello'), max_tokens: 600 });
  t.equal(rest.status, 429, 'the minute’s tokens are used up');
  t.notMatch(rest.body?.error?.message, /lower max_tokens/, 'that refusal is a wait, not a size problem');
});

t.test('a request for n choices reserves max_tokens for each: a blocking cap that fits two choices refuses four', async (t) => {
  const { id, key } = await g.newKey({ name: 'n choices' });
  // 1 µ$ an input token, 2 µ$ an output token: the input bound and two choices of 100 tokens.
  const cap = reservedInputTokens('pick one') + 2 * 100 * 2;
  await g.patchKey(id, { spendCap: { usd: cap / 1e6, period: 'total', mode: 'blocking' } });
  g.upstream.reset();
  g.upstream.enqueue({ kind: 'reply', usage: { prompt_tokens: 10, completion_tokens: 400 } });
  const four = await g.chat(key, { model: 'solo', messages: user('pick one'), max_tokens: 100, n: 4 });
  t.equal(four.status, 402, 'four choices of 100 tokens may cost more than the cap');
  t.equal(four.body?.error?.code, 'budget_exceeded');
  t.equal(g.upstream.requests.length, 0, 'nothing reached the upstream');
  const two = await g.chat(key, { model: 'solo', messages: user('pick one'), max_tokens: 100, n: 2 });
  t.equal(two.status, 200, 'two choices fit');
});

t.test('costs: cost_micros is the hand-computed price from the upstream usage, rounded up; price_version recorded; estimated usage marked', async (t) => {
  const { key } = await g.newKey({ name: 'costs' });
  const version = priceSheet('solo', TEST_PRICES).version;
  g.upstream.reset();

  // 1001 input of which 401 cached, 333 output:
  // 600 × $1/M + 401 × $0.50/M + 333 × $2/M = 600 + 200.5 + 666 = 1466.5 µ$ → 1467 µ$.
  g.upstream.enqueue({ kind: 'reply', usage: { prompt_tokens: 1001, completion_tokens: 333, cached_tokens: 401 } });
  const json = await g.chat(key, { model: 'solo', messages: user('price me'), max_tokens: 500 });
  t.equal(json.status, 200);
  const row = await logRow(json.headers.get('x-request-id'));
  t.equal(row['cost_micros'], 1467n, 'cached tokens at the cached rate, rounded up to the micro-dollar');
  t.same(
    { input: row['input_tokens'], cached: row['cached_input_tokens'], output: row['output_tokens'], estimated: row['usage_estimated'] },
    { input: 1001, cached: 401, output: 333, estimated: false },
  );
  t.equal(row['price_version'], version, 'the price version is recorded');
  const { rows: prices } = await g.db.query('SELECT model, prices FROM price_versions WHERE id = $1', [version]);
  t.same(prices, [{ model: 'solo', prices: TEST_PRICES }], 'and the prices it names are stored');

  // A streamed call with usage from the upstream: same arithmetic. 7 × 1 + 3 × 0.5 + 5 × 2 = 18.5 → 19.
  g.upstream.enqueue({ kind: 'reply', usage: { prompt_tokens: 10, completion_tokens: 5, cached_tokens: 3 } });
  const streamed = await g.chat(key, { model: 'solo', messages: user('price me'), max_tokens: 500, stream: true });
  t.equal(streamed.status, 200);
  const streamedRow = await logRow(streamed.headers.get('x-request-id'));
  t.equal(streamedRow['cost_micros'], 19n);
  t.equal(streamedRow['usage_estimated'], false);
  t.equal(streamedRow['streamed'], true);

  // The upstream streams without usage: the gateway counts what it sent and marks it estimated.
  g.upstream.enqueue({ kind: 'reply', content: 'twelve bytes', usage: false });
  const estimated = await g.chat(key, { model: 'solo', messages: user('no usage from upstream'), max_tokens: 500, stream: true });
  t.equal(estimated.status, 200);
  const estimatedRow = await logRow(estimated.headers.get('x-request-id'));
  t.equal(estimatedRow['usage_estimated'], true, 'usage_estimated is set');
  t.equal(estimatedRow['input_tokens'], estimatedInputTokens('no usage from upstream'), 'input estimated from the prompt');
  t.equal(estimatedRow['output_tokens'], Math.ceil(Buffer.byteLength('twelve bytes') / 4), 'output counted from what was streamed');
  t.equal(estimatedRow['cost_micros'], BigInt(estimatedRow['input_tokens'] + 2 * estimatedRow['output_tokens']), 'and priced like reported usage');
  t.equal(estimatedRow['price_version'], version);
});

t.test('two calls sending the same x-request-id are both logged and both charged', async (t) => {
  const { id: keyId, key } = await g.newKey({ name: 'replayed request id' });
  const before = await g.loggedCost(keyId);
  const call = () =>
    fetch(`${g.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': 'same-id-every-time' },
      body: JSON.stringify({ model: 'solo', messages: user('hello'), max_tokens: 20 }),
    });
  const [first, second] = [await call(), await call()];
  t.equal(first.status, 200);
  t.equal(second.status, 200);
  t.equal(first.headers.get('x-client-request-id'), 'same-id-every-time', 'the caller’s id comes back');
  t.not(first.headers.get('x-request-id'), second.headers.get('x-request-id'), 'each call has its own request id');
  const rows = [await logRow(first.headers.get('x-request-id')), await logRow(second.headers.get('x-request-id'))];
  t.ok(
    rows.every((row) => row['cost_micros'] > 0n),
    'both rows are stored and priced',
  );
  t.equal(await g.loggedCost(keyId), before + rows[0]!['cost_micros'] + rows[1]!['cost_micros'], 'and both are charged');
});

t.test('alert-only caps never block and record exactly one alert per period', async (t) => {
  // A daily alert cap of 10 µ$; every call costs 24 µ$ (12 input + 6 output tokens, the fake's default).
  const { id, key } = await g.newKey({ name: 'alerted' });
  await g.patchKey(id, { spendCap: { usd: 0.00001, period: 'day', mode: 'alert' } });
  g.upstream.reset();
  const alerts = async () =>
    (
      await g.db.query<{ period_start: Date; cap_micros: bigint; spent_micros: bigint }>(
        "SELECT period_start, cap_micros, spent_micros FROM budget_alerts WHERE scope = 'key' AND scope_id = $1 ORDER BY period_start",
        [id],
      )
    ).rows;

  const statuses: number[] = [];
  for (let i = 0; i < 3; i += 1) statuses.push((await g.chat(key, { model: 'solo', messages: user(`sequential ${i}`), max_tokens: 20 })).status);
  const burst = await Promise.all(Array.from({ length: 8 }, (_, i) => g.chat(key, { model: 'solo', messages: user(`burst ${i}`), max_tokens: 20 })));
  statuses.push(...burst.map((r) => r.status));
  t.same([...new Set(statuses)], [200], 'every call is served though the cap is long passed');

  await g.settled(); // every call above has settled: no alert can still come
  const first = await alerts();
  t.equal(first.length, 1, 'exactly one alert for the period');
  t.equal(first[0]!.cap_micros, 10n);
  t.ok(first[0]!.spent_micros >= 10n, 'it records the spend that reached the cap');
  const budget = (await g.test.call('GET', '/client/budget')).json();
  const row = budget.scopes.find((s: { id: string }) => s.id === id);
  t.equal(row?.state, 'alerting', 'GET /client/budget shows the cap alerting, not exceeded');

  // The next day is a new period: one more alert, and still no refusal.
  offsetMs = 24 * 60 * 60_000;
  const nextDay = await Promise.all(Array.from({ length: 4 }, (_, i) => g.chat(key, { model: 'solo', messages: user(`next day ${i}`), max_tokens: 20 })));
  t.same([...new Set(nextDay.map((r) => r.status))], [200], 'still served the next day');
  await g.settled();
  const both = await alerts();
  t.equal(both.length, 2, 'one alert per period');
  t.equal(both[1]!.period_start.getTime() - both[0]!.period_start.getTime(), 24 * 60 * 60_000, 'for consecutive days');
});

import t, { type Test } from 'tap';
import { estimateResponsesInputTokens } from '../../../providers/token-estimate.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';
import { startGovernedGateway } from './governed-gateway.ts';

/**
 * What /v1/responses costs: the final response's tokens at the model's prices, plus each hosted
 * web search at its `perWebSearchUsd`. The fake upstream reports 12 input and 6 output tokens and
 * one `web_search_call` per call offering `web_search` (or as many as scripted); at TEST_PRICES
 * the tokens cost 12 + 2 × 6 = 24 µ$, a search 10,000 µ$.
 */

t.setTimeout(240_000);

const g = await startGovernedGateway(t, [], {
  searcher: { routes: [{ provider: 'primary', model: 'up-searcher' }], builtinTools: { webSearch: { reservePerCall: 2 } }, prices: { ...TEST_PRICES, perWebSearchUsd: 0.01 } },
});
t.beforeEach(() => g.upstream.reset());

const TOKENS_MICROS = 12n + 2n * 6n;
const SEARCH_MICROS = 10_000n;
const searchBody = { model: 'searcher', input: 'What happened today?', tools: [{ type: 'web_search' }] };

async function respond(t: Test, key: string, body: Record<string, unknown>) {
  const response = await g.test.call('POST', '/v1/responses', { token: key, body });
  t.equal(response.statusCode, 200, 'answered');
  return String(response.headers['x-request-id']);
}

const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);

t.test('a call is logged with the final response’s tokens, JSON and streamed', async (t) => {
  const { key } = await g.newKey();
  const json = await g.logRow(await respond(t, key, { model: 'searcher', input: 'hi' }));
  t.match(json, { endpoint: '/v1/responses', model: 'searcher', provider: 'primary', status_code: 200, input_tokens: 12, output_tokens: 6, streamed: false });
  t.equal(BigInt(json.cost_micros), TOKENS_MICROS, 'tokens at the model’s prices');
  const streamed = await g.logRow(await respond(t, key, { model: 'searcher', input: 'hi', stream: true }));
  t.match(streamed, { endpoint: '/v1/responses', status_code: 200, input_tokens: 12, output_tokens: 6, streamed: true });
  t.ok(streamed.ttft_ms !== null, 'time to the first output event');
  t.equal(BigInt(streamed.cost_micros), TOKENS_MICROS);
});

t.test('web searches are billed per search on top of tokens; request log, ledger and usage report agree', async (t) => {
  const { id, key } = await g.newKey();
  const before = await g.charged();
  const one = await respond(t, key, searchBody);
  g.upstream.enqueue({ kind: 'reply', webSearches: 2 });
  const two = await respond(t, key, { ...searchBody, stream: true });
  const rows = [await g.logRow(one), await g.logRow(two)];
  t.match(rows[0], { web_searches: 1, input_tokens: 12, output_tokens: 6 });
  t.equal(BigInt(rows[0]!.units_cost_micros), SEARCH_MICROS, 'one search');
  t.equal(BigInt(rows[0]!.cost_micros), TOKENS_MICROS + SEARCH_MICROS, 'tokens and the search');
  t.match(rows[1], { web_searches: 2, streamed: true });
  t.equal(BigInt(rows[1]!.cost_micros), TOKENS_MICROS + 2n * SEARCH_MICROS, 'tokens and both searches of the stream');
  t.equal((await g.charged()) - before, 2n * TOKENS_MICROS + 3n * SEARCH_MICROS, 'the ledger charged exactly what the log says');

  const detail = await g.test.call('GET', `/client/requests/${one}`);
  t.equal(detail.statusCode, 200);
  t.match(detail.json(), { units: { webSearches: 1, costUsd: 0.01 }, costUsd: 0.010024 });
  const usage = await g.test.call('GET', `/client/usage?from=${day(-1)}&to=${day(1)}&keyId=${id}`);
  t.equal(usage.statusCode, 200);
  t.match(usage.json().totals, { requests: 2, costUsd: 0.030048, units: { webSearches: 3, costUsd: 0.03 } });
});

t.test('a stream broken after its search began still bills the search', async (t) => {
  const { key } = await g.newKey();
  // response.created, response.in_progress, the search's output_item.added, web_search_call.in_progress: then the cut.
  g.upstream.enqueue({ kind: 'stream-cut', afterChunks: 4 });
  const body = { ...searchBody, stream: true };
  const row = await g.logRow(await respond(t, key, body));
  // No usage came: the input as counted locally, no output text was sent yet.
  const input = estimateResponsesInputTokens(body);
  t.match(row, { status_code: 502, error_code: 'upstream_error', web_searches: 1, input_tokens: input, output_tokens: 0 });
  t.equal(BigInt(row.cost_micros), BigInt(input) + SEARCH_MICROS, 'the search and the input, to the micro-dollar');
});

t.test('a call offering web_search reserves the model’s reservePerCall searches before it runs', async (t) => {
  // Two searches reserved cost $0.02: more than this cap, while the tokens alone fit many times over.
  const { key } = await g.newKey({ spendCap: { usd: 0.015, period: 'day' } });
  const small = { model: 'searcher', input: 'What happened today?', max_output_tokens: 16 };
  const refused = await g.test.call('POST', '/v1/responses', { token: key, body: { ...small, tools: [{ type: 'web_search' }] } });
  t.equal(refused.statusCode, 402);
  t.equal(refused.json().error.code, 'budget_exceeded');
  t.equal(g.upstream.requests.length, 0, 'refused before any upstream call');
  t.equal((await g.test.call('POST', '/v1/responses', { token: key, body: small })).statusCode, 200, 'the same call without the tool fits');
  t.equal(
    (await g.test.call('POST', '/v1/responses', { token: key, body: { ...small, tools: [{ type: 'web_search' }], tool_choice: 'none' } })).statusCode,
    200,
    'and with every tool forbidden',
  );
});

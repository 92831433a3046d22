import t from 'tap';
import { EVALUATE_CONCURRENCY } from '../../../plugins/inference/evaluate-capability.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';
import { startMeteredGateway } from '../metering/metered-gateway.ts';

/**
 * POST /v1/evaluate on the `openai` provider, against the fake upstream speaking chat completions
 * with `logprobs` as OpenAI does: what each question sends, how the first token's
 * `top_logprobs` become label probabilities, what the upstream's usage bills, and failures.
 */

t.setTimeout(240_000);

const g = await startMeteredGateway(t, {
  inference: {
    models: {
      judge: { routes: [{ provider: 'primary', model: 'up-judge' }], evaluation: {}, prices: TEST_PRICES },
    },
  },
});
const { key } = await g.newKey({ name: 'evaluate openai' });
t.beforeEach(() => g.upstream.reset());

const evaluate = (body: unknown) => g.test.call('POST', '/v1/evaluate', { token: key, body });
const close = (a: number, b: number) => Math.abs(a - b) < 1e-9;
const ln = Math.log;

/** A reply whose first token weighs every kind of label at once (yes/no and letters), so the order calls arrive in does not matter. */
const anyLabel = {
  kind: 'reply' as const,
  topLogprobs: [
    { token: 'yes', logprob: ln(0.4) },
    { token: 'A', logprob: ln(0.3) },
    { token: 'no', logprob: ln(0.1) },
    { token: 'B', logprob: ln(0.1) },
  ],
};

t.test('one chat call per question: one output token, logprobs with top_logprobs 20, the state prefix shared', async (t) => {
  g.upstream.enqueue(anyLabel, anyLabel, anyLabel);
  const state = { order: 1234, items: ['kettle'], note: 'arrived broken' };
  const response = await evaluate({
    model: 'judge',
    state,
    questions: {
      damaged: { type: 'boolean', question: 'Did the item arrive damaged?' },
      action: { type: 'choice', question: 'What should we do?', options: ['refund', 'replace', 'nothing'] },
      anger: { type: 'score', question: 'How upset is the customer?', rungs: [0, 5, 10] },
    },
  });
  t.equal(response.statusCode, 200, response.body);
  const requests = g.upstream.requests;
  t.equal(requests.length, 3, 'one call per question');
  for (const request of requests) {
    t.equal(request.path, '/v1/chat/completions');
    t.match(request.body, { model: 'up-judge', max_tokens: 1, logprobs: true, top_logprobs: 20 });
    t.notOk('stream' in request.body || 'temperature' in request.body, "no stream, no temperature: the model's own log probabilities");
    t.same(request.body.messages.slice(0, 2), requests[0]!.body.messages.slice(0, 2), 'the same leading messages, so the prompt cache applies');
    t.equal(request.body.messages.length, 3);
  }
  t.match(requests[0]!.body.messages[1].content, JSON.stringify(state), 'the state as compact JSON');
  const asked = requests.map((request) => request.body.messages[2].content as string);
  t.match(asked[0], /Did the item arrive damaged\?\nAnswer yes or no\./, 'the first question goes first, alone');
  const choice = asked.find((text) => text.includes('What should we do?'))!;
  t.match(choice, /Options:\nA\. refund\nB\. replace\nC\. nothing\nAnswer with the letter of one option: A, B, C\./);
  const score = asked.find((text) => text.includes('How upset'))!;
  t.match(score, /Scale:\nA\. 0\nB\. 5\nC\. 10\n/);
});

t.test("the first token's alternatives become the labels' probabilities: spellings added up, renormalised over the labels", async (t) => {
  g.upstream.enqueue({
    kind: 'reply',
    topLogprobs: [
      { token: 'Yes', logprob: ln(0.5) },
      { token: 'No', logprob: ln(0.2) },
      { token: ' yes', logprob: ln(0.1) },
      { token: 'Maybe', logprob: ln(0.15) },
      { token: 'NO', logprob: ln(0.05) },
    ],
  });
  const { answers } = (await evaluate({ model: 'judge', state: 'S', questions: { q: { type: 'boolean', question: 'Q?' } } })).json();
  // yes: 0.5 + 0.1, no: 0.2 + 0.05; `Maybe` is no label.
  t.ok(close(answers.q.probability, 0.6 / 0.85), `${answers.q.probability}`);
});

t.test("a label the upstream did not list gets the least likely listed token's probability, as a bound", async (t) => {
  g.upstream.enqueue({
    kind: 'reply',
    topLogprobs: [
      { token: 'A', logprob: ln(0.6) },
      { token: 'B', logprob: ln(0.25) },
      { token: 'The', logprob: ln(0.05) },
    ],
  });
  const { answers } = (await evaluate({ model: 'judge', state: 'S', questions: { q: { type: 'choice', question: 'Q?', options: ['x', 'y', 'z'] } } })).json();
  const { selected, probabilities } = answers.q;
  t.equal(selected, 'x');
  t.ok(close(probabilities.x, 0.6 / 0.9) && close(probabilities.y, 0.25 / 0.9) && close(probabilities.z, 0.05 / 0.9), JSON.stringify(probabilities));
});

t.test("billed on the upstream's input tokens only, cached ones at the cached price", async (t) => {
  const reply = { ...anyLabel, usage: { prompt_tokens: 1000, completion_tokens: 1, cached_tokens: 800 } };
  g.upstream.enqueue(reply, reply);
  const response = await evaluate({
    model: 'judge',
    state: 'S',
    questions: { a: { type: 'boolean', question: 'A?' }, b: { type: 'boolean', question: 'B?' } },
  });
  t.equal(response.statusCode, 200, response.body);
  t.same(response.json().usage, { prompt_tokens: 2000, completion_tokens: 0, total_tokens: 2000, prompt_tokens_details: { cached_tokens: 1600 } });
  await g.settled();
  const { rows } = await g.db.query<Record<string, unknown>>('SELECT endpoint, input_tokens, cached_input_tokens, output_tokens, cost_micros FROM request_logs WHERE id = $1', [
    response.headers['x-request-id'],
  ]);
  t.match(rows[0], { endpoint: '/v1/evaluate', input_tokens: 2000, cached_input_tokens: 1600, output_tokens: 0 });
  // 400 uncached at 1 µ$ and 1600 cached at 0.5 µ$; the two output tokens the upstream reported are not billed.
  t.equal(BigInt(rows[0]!['cost_micros'] as bigint), 1200n);
});

t.test('a reply beginning with none of the labels is a protocol failure: 502, billed nothing', async (t) => {
  g.upstream.enqueue({
    kind: 'reply',
    topLogprobs: [
      { token: 'I', logprob: ln(0.7) },
      { token: 'As', logprob: ln(0.2) },
    ],
  });
  const response = await evaluate({ model: 'judge', state: 'S', questions: { q: { type: 'boolean', question: 'Q?' } } });
  t.equal(response.statusCode, 502);
  t.equal(response.json().error.code, 'upstream_error');
  await g.settled();
  const { rows } = await g.db.query<Record<string, unknown>>('SELECT status_code, cost_micros FROM request_logs WHERE id = $1', [response.headers['x-request-id']]);
  t.match(rows[0], { status_code: 502 });
  t.equal(BigInt(rows[0]!['cost_micros'] as bigint), 0n);
});

t.test('an upstream that answers without log probabilities is a protocol failure: 502', async (t) => {
  g.upstream.enqueue({
    kind: 'raw',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      id: 'x',
      object: 'chat.completion',
      created: 1,
      model: 'up-judge',
      choices: [{ index: 0, message: { role: 'assistant', content: 'yes' }, finish_reason: 'length', logprobs: null }],
    }),
  });
  const response = await evaluate({ model: 'judge', state: 'S', questions: { q: { type: 'boolean', question: 'Q?' } } });
  t.equal(response.statusCode, 502);
});

t.test('an upstream refusing the request is a 400 naming it', async (t) => {
  g.upstream.enqueue({ kind: 'status', status: 400, message: "This model does not support 'logprobs'" });
  const response = await evaluate({ model: 'judge', state: 'S', questions: { q: { type: 'boolean', question: 'Q?' } } });
  t.equal(response.statusCode, 400);
  t.equal(response.json().error.code, 'upstream_rejected_request');
});

t.test('the first failing question stops the ones in flight', async (t) => {
  const concurrent = Math.min(EVALUATE_CONCURRENCY, 2);
  // The first question alone, then two at once: one hangs, one fails.
  g.upstream.enqueue(anyLabel, { kind: 'hang' }, { kind: 'status', status: 500 });
  const response = await evaluate({
    model: 'judge',
    state: 'S',
    questions: { a: { type: 'boolean', question: 'A?' }, b: { type: 'boolean', question: 'B?' }, c: { type: 'boolean', question: 'C?' } },
  });
  t.equal(response.statusCode, 502);
  t.equal(g.upstream.requests.length, 1 + concurrent);
  const outcomes = await Promise.all(g.upstream.requests.map((request) => request.outcome));
  t.ok(outcomes.includes('closed'), `the hung call was cut: ${outcomes.join(', ')}`);
});

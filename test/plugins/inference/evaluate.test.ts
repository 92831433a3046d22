import t from 'tap';
import { IDENTITY, calibratedProbabilities } from '../../../plugins/inference/evaluate-calibration.ts';
import { questionPrompts } from '../../../plugins/inference/evaluate-prompts.ts';
import { MAX_QUESTIONS, parseEvaluateRequest } from '../../../plugins/inference/evaluate-request.ts';
import { mockLabelLogprobs } from '../../../providers/mock/mock-evaluation.ts';
import { estimateChatInputTokens } from '../../../providers/token-estimate.ts';
import { closedPort } from '../../helpers/closed-port.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';
import { startMeteredGateway } from '../metering/metered-gateway.ts';

/**
 * POST /v1/evaluate over HTTP on the offline mock: the three question types, calibration as
 * configured, every 400, and billing on input tokens only through the one call path (request log,
 * ledger, rate-limit headers, metrics, failover). Prices: TEST_PRICES, 1 µ$ an input token.
 */

t.setTimeout(240_000);

const judge = (calibration?: Record<string, unknown>) => ({
  routes: [{ provider: 'mock', model: 'mock-judge' }],
  evaluation: calibration ? { calibration } : {},
  prices: TEST_PRICES,
});
const g = await startMeteredGateway(t, {
  inference: {
    providers: {
      mock: { type: 'mock' },
      // Nothing listens there: a route to it fails to connect.
      dead: { type: 'openai', baseUrl: `http://127.0.0.1:${await closedPort()}/v1`, apiKey: 'sk-dead', allowPrivateNetwork: true },
    },
    models: {
      // Three evaluation models on one upstream model: the mock answers each the same, so they differ by calibration only.
      judge: judge(),
      'judge-t2': judge({ method: 'temperature', temperature: 2 }),
      'judge-platt': judge({ method: 'platt', a: 0.5, b: 1 }),
      'judge-after-dead': { ...judge(), routes: [{ provider: 'dead', model: 'up-dead' }, ...judge().routes] },
      'mock-small': { routes: [{ provider: 'mock', model: 'mock-small' }], prices: TEST_PRICES },
    },
    failover: { initialBackoffMs: 5, maxBackoffMs: 20, deadlineMs: 10_000, ttftTimeoutMs: 10_000, maxRetryAfterMs: 1_500, retriesPerRoute: 0, maxAttempts: 3 },
  },
});
const { id: keyId, key } = await g.newKey({ name: 'evaluate' });

const evaluate = (body: unknown, token = key) => g.test.call('POST', '/v1/evaluate', { token, body });

const state = { ticket: 'My invoice shows two charges for March.', customer: { plan: 'pro', months: 14 } };
const questions = {
  refund: { type: 'boolean', question: 'Does the customer ask for money back?' },
  topic: { type: 'choice', question: 'What is the ticket about?', options: ['billing', 'outage', 'feature request'] },
  urgency: { type: 'score', question: 'How urgent is it?', rungs: [1, 2, 3, 4, 5] },
};
const body = { model: 'judge', state, questions };

/** What the mock weighs each label at for this body's question `key`, renormalised and calibrated as `parameters` say. */
function expectedProbabilities(request: unknown, key: string, parameters = IDENTITY): number[] {
  const prompt = questionPrompts(parseEvaluateRequest(request)).find((p) => p.key === key)!;
  return calibratedProbabilities(mockLabelLogprobs({ model: 'mock-judge', messages: prompt.messages, labels: prompt.labels }).logprobs, parameters, prompt.question.type === 'boolean');
}

const close = (a: number, b: number) => Math.abs(a - b) < 1e-9;
const sum = (values: Iterable<number>) => [...values].reduce((a, b) => a + b, 0);

t.test('an answer per question key, in the evaluation shape', async (t) => {
  const response = await evaluate(body);
  t.equal(response.statusCode, 200, response.body);
  const answer = response.json();
  t.equal(answer.object, 'evaluation');
  t.equal(answer.model, 'judge');
  t.same(Object.keys(answer.answers), ['refund', 'topic', 'urgency'], 'the request order');
  t.same(Object.keys(answer.answers.refund), ['probability']);
  t.same(Object.keys(answer.answers.topic).sort(), ['probabilities', 'selected']);
  t.same(Object.keys(answer.answers.urgency).sort(), ['probabilities', 'value']);
  t.notOk('choices' in answer || 'messages' in answer, 'not a completion shape');
  t.equal(response.headers['x-svc-provider'], 'mock');
});

t.test('boolean: the probability of yes, from the labels renormalised', async (t) => {
  const { answers } = (await evaluate(body)).json();
  const [yes] = expectedProbabilities(body, 'refund');
  t.ok(close(answers.refund.probability, yes!), `${answers.refund.probability} ≈ ${yes}`);
  t.ok(answers.refund.probability > 0 && answers.refund.probability < 1);
});

t.test('choice: a probability per option summing to 1, and the likeliest selected', async (t) => {
  const { answers } = (await evaluate(body)).json();
  const { selected, probabilities } = answers.topic;
  t.same(Object.keys(probabilities), ['billing', 'outage', 'feature request']);
  t.ok(close(sum(Object.values<number>(probabilities)), 1), 'sums to 1');
  const expected = expectedProbabilities(body, 'topic');
  questions.topic.options.forEach((option, i) => {
    t.ok(close(probabilities[option], expected[i]!), option);
  });
  const best = Math.max(...Object.values<number>(probabilities));
  t.equal(probabilities[selected], best, `${selected} is the likeliest`);
});

t.test('score: a probability per rung summing to 1, and the value their probability-weighted mean', async (t) => {
  const { answers } = (await evaluate(body)).json();
  const { value, probabilities } = answers.urgency;
  t.same(Object.keys(probabilities), ['1', '2', '3', '4', '5']);
  t.ok(close(sum(Object.values<number>(probabilities)), 1), 'sums to 1');
  const interpolated = sum(questions.urgency.rungs.map((rung) => rung * probabilities[String(rung)]));
  t.ok(close(value, interpolated), `${value} = Σ rung · p = ${interpolated}`);
  t.ok(value > 1 && value < 5, 'between the ends of the scale');
});

t.test('rungs need not be evenly spaced or ordered: the value interpolates what was given', async (t) => {
  const rungs = [10, 0, 2.5];
  const { answers } = (await evaluate({ model: 'judge', state: 'A short state.', questions: { q: { type: 'score', question: 'How much?', rungs } } })).json();
  const { value, probabilities } = answers.q;
  t.same(Object.keys(probabilities).sort(), ['0', '10', '2.5']);
  t.ok(close(value, 10 * probabilities['10'] + 2.5 * probabilities['2.5']));
});

t.test('the same request answers the same; another state answers otherwise', async (t) => {
  const first = (await evaluate(body)).json().answers;
  const again = (await evaluate(body)).json().answers;
  t.same(again, first);
  const other = (await evaluate({ ...body, state: 'Our site is down since 9:00.' })).json().answers;
  t.not(other.refund.probability, first.refund.probability);
});

t.test('a string state and an object state are both taken', async (t) => {
  const response = await evaluate({ model: 'judge', state: 'The user wrote: thanks, all fixed!', questions: { solved: { type: 'boolean', question: 'Is it solved?' } } });
  t.equal(response.statusCode, 200, response.body);
  t.type(response.json().answers.solved.probability, 'number');
});

t.test('calibration as configured: temperature 2 takes the square root of the odds', async (t) => {
  const raw = (await evaluate(body)).json().answers;
  const warm = (await evaluate({ ...body, model: 'judge-t2' })).json().answers;
  const odds = (p: number) => p / (1 - p);
  t.ok(close(odds(warm.refund.probability), Math.sqrt(odds(raw.refund.probability))), 'yes/no');
  const rawTopic = Object.values<number>(raw.topic.probabilities);
  const softened = rawTopic.map((p) => Math.sqrt(p) / sum(rawTopic.map(Math.sqrt)));
  Object.values<number>(warm.topic.probabilities).forEach((p, i) => {
    t.ok(close(p, softened[i]!), `option ${i}: p^(1/2), renormalised`);
  });
  t.ok(Math.max(...Object.values<number>(warm.topic.probabilities)) < Math.max(...rawTopic), 'less confident');
});

t.test('calibration as configured: Platt is σ(a · logit p + b) on yes', async (t) => {
  const raw = (await evaluate(body)).json().answers.refund.probability;
  const platt = (await evaluate({ ...body, model: 'judge-platt' })).json().answers.refund.probability;
  t.ok(close(platt, 1 / (1 + Math.exp(-(0.5 * Math.log(raw / (1 - raw)) + 1)))), `${platt}`);
});

t.test('one short call per question: every question is billed its input, output 0, in the request log as /v1/evaluate', async (t) => {
  await g.settled();
  const before = (await g.ledger.balance(g.test.organizationId)) ?? 0n;
  const response = await evaluate(body);
  t.equal(response.statusCode, 200);
  const requestId = response.headers['x-request-id'];
  const expectedInput = sum(questionPrompts(parseEvaluateRequest(body)).map((prompt) => estimateChatInputTokens({ messages: prompt.messages })));
  t.same(response.json().usage, { prompt_tokens: expectedInput, completion_tokens: 0, total_tokens: expectedInput, prompt_tokens_details: { cached_tokens: 0 } });
  await g.settled();
  const { rows } = await g.db.query<Record<string, unknown>>(
    'SELECT endpoint, model, provider, status_code, input_tokens, output_tokens, cost_micros, key_id FROM request_logs WHERE id = $1',
    [requestId],
  );
  t.match(rows[0], { endpoint: '/v1/evaluate', model: 'judge', provider: 'mock', status_code: 200, input_tokens: expectedInput, output_tokens: 0, key_id: keyId });
  t.equal(BigInt(rows[0]!['cost_micros'] as bigint), BigInt(expectedInput), 'input tokens at $1/M, no output, though the model prices output');
  t.equal(before - ((await g.ledger.balance(g.test.organizationId)) ?? 0n), BigInt(expectedInput), 'the ledger took the same');
});

t.test('counted in the metrics under /v1/evaluate', async (t) => {
  await evaluate(body);
  const metrics = (await g.test.call('GET', '/metrics', { token: null })).body;
  t.match(metrics, /svc_gateway_requests_total\{endpoint="\/v1\/evaluate",model="judge",provider="mock",status="200"\} [1-9]/);
});

t.test('a route that cannot be reached fails over to the next, all questions on one route', async (t) => {
  const response = await evaluate({ ...body, model: 'judge-after-dead' });
  t.equal(response.statusCode, 200, response.body);
  t.equal(response.headers['x-svc-provider'], 'mock');
  t.equal(response.headers['x-svc-attempts'], '2');
  t.same(response.json().answers, (await evaluate(body)).json().answers, 'the same answers as from the mock directly');
});

t.test('the rate-limit headers are on answers and refusals alike', async (t) => {
  const limited = await g.newKey({ name: 'limited evaluate' });
  await g.patchKey(limited.id, { rateLimits: { requestsPerMinute: 50, tokensPerMinute: 1_000_000 } });
  const ok = await evaluate(body, limited.key);
  t.equal(ok.statusCode, 200);
  t.equal(ok.headers['x-ratelimit-limit-requests'], '50');
  t.ok(ok.headers['x-ratelimit-remaining-tokens']);
  const refused = await evaluate({ ...body, questions: {} }, limited.key);
  t.equal(refused.statusCode, 400);
  t.equal(refused.headers['x-ratelimit-limit-requests'], '50');
});

t.test('400s', async (t) => {
  const refused = async (request: unknown, code: string, param: string | null, message: RegExp) => {
    const response = await evaluate(request);
    t.equal(response.statusCode, 400, `${code} ${param}`);
    t.match(response.json().error, { code, param, message }, response.body);
  };
  const one = (question: unknown) => ({ model: 'judge', state: 'S', questions: { verdict: question } });

  t.test('a model that is not an evaluation model, naming the ones that are', async () => {
    await refused({ ...body, model: 'mock-small' }, 'unsupported_model', 'model', /"mock-small" does not answer evaluations.*judge, judge-t2, judge-platt, judge-after-dead/);
  });
  t.test('unknown fields, every one named', async () => {
    await refused({ ...body, messages: [], temperature: 0 }, 'unknown_field', 'messages', /Unknown fields in body: messages, temperature/);
    await refused(one({ type: 'boolean', question: 'Q?', options: ['a', 'b'] }), 'unknown_field', 'questions.verdict.options', /questions\.verdict\.options/);
  });
  t.test('missing fields', async () => {
    await refused({ model: 'judge', questions }, 'invalid_parameter', 'state', /'state' in body: this field is required/);
    await refused({ model: 'judge', state: 'S' }, 'invalid_parameter', 'questions', /this field is required/);
    await refused({ state: 'S', questions }, 'invalid_parameter', 'model', /this field is required/);
  });
  t.test('a state that is neither text nor an object', async () => {
    await refused({ ...body, state: ['a'] }, 'invalid_parameter', 'state', /non-empty string or a JSON object/);
    await refused({ ...body, state: '' }, 'invalid_parameter', 'state', /non-empty string or a JSON object/);
  });
  t.test('no questions', async () => {
    await refused({ ...body, questions: {} }, 'invalid_parameter', 'questions', /at least one question/);
  });
  t.test(`more than ${MAX_QUESTIONS} questions`, async () => {
    const many = Object.fromEntries(Array.from({ length: MAX_QUESTIONS + 1 }, (_, i) => [`q${i}`, { type: 'boolean', question: `Is ${i} even?` }]));
    await refused({ ...body, questions: many }, 'invalid_parameter', 'questions', new RegExp(`holds ${MAX_QUESTIONS + 1} questions; at most ${MAX_QUESTIONS}`));
  });
  t.test('a malformed question of each type, naming its key', async () => {
    await refused(one('yes?'), 'invalid_parameter', 'questions.verdict', /Question 'verdict' must be an object/);
    await refused(one({ type: 'ranking', question: 'Q?' }), 'invalid_parameter', 'questions.verdict.type', /Question 'verdict': 'type' must be one of/);
    await refused(one({ question: 'Q?' }), 'invalid_parameter', 'questions.verdict.type', /Question 'verdict'/);
    // boolean
    await refused(one({ type: 'boolean' }), 'invalid_parameter', 'questions.verdict.question', /this field is required/);
    await refused(one({ type: 'boolean', question: '' }), 'invalid_parameter', 'questions.verdict.question', /at least 1 character/);
    await refused(one({ type: 'boolean', question: 7 }), 'invalid_parameter', 'questions.verdict.question', /expected string, got number/);
    // choice
    await refused(one({ type: 'choice', question: 'Q?' }), 'invalid_parameter', 'questions.verdict.options', /Question 'verdict': 'options' must be an array/);
    await refused(one({ type: 'choice', question: 'Q?', options: ['only'] }), 'invalid_parameter', 'questions.verdict.options', /Question 'verdict': 'options' holds 1; 2 to 20/);
    await refused(one({ type: 'choice', question: 'Q?', options: ['a', 'a'] }), 'invalid_parameter', 'questions.verdict.options[1]', /Question 'verdict': 'options\[1\]' repeats "a"/);
    await refused(one({ type: 'choice', question: 'Q?', options: ['a', 3] }), 'invalid_parameter', 'questions.verdict.options[1]', /must be a non-empty string/);
    const letters = Array.from({ length: 21 }, (_, i) => `option ${i}`);
    await refused(one({ type: 'choice', question: 'Q?', options: letters }), 'invalid_parameter', 'questions.verdict.options', /holds 21; 2 to 20/);
    // score
    await refused(one({ type: 'score', question: 'Q?', options: [1, 2] }), 'unknown_field', 'questions.verdict.options', /Unknown field in body: questions\.verdict\.options/);
    await refused(one({ type: 'score', question: 'Q?', rungs: [1] }), 'invalid_parameter', 'questions.verdict.rungs', /Question 'verdict': 'rungs' holds 1/);
    await refused(one({ type: 'score', question: 'Q?', rungs: [1, '2'] }), 'invalid_parameter', 'questions.verdict.rungs[1]', /must be a finite number/);
    await refused(one({ type: 'score', question: 'Q?', rungs: [1, 2, 1] }), 'invalid_parameter', 'questions.verdict.rungs[2]', /repeats 1/);
  });
  t.test('a malformed question key', async () => {
    await refused({ ...body, questions: { 'has space': questions.refund } }, 'invalid_parameter', 'questions.has space', /Question key "has space" is malformed/);
  });
  t.test('a body that is not an object', async () => {
    const response = await g.test.call('POST', '/v1/evaluate', { token: key, body: [1, 2] });
    t.equal(response.statusCode, 400);
    t.equal(response.json().error.code, 'invalid_body');
  });
  t.test('a refusal is billed nothing and sends nothing upstream', async (t) => {
    await g.settled();
    const before = await g.loggedCost();
    await evaluate({ ...body, model: 'mock-small' });
    await g.settled();
    t.equal(await g.loggedCost(), before);
  });
});

t.test('a key without the inference scope is refused', async (t) => {
  const other = await g.newKey({ name: 'no inference', scopes: ['usage:read'] });
  const response = await evaluate(body, other.key);
  t.equal(response.statusCode, 403);
});

t.test('GET /v1 lists the route', async (t) => {
  const { endpoints } = (await g.test.call('GET', '/v1', { token: key })).json();
  t.ok(endpoints.includes('POST /v1/evaluate'));
});

t.test('the catalogue shows which models evaluate, and their calibration', async (t) => {
  const { data } = (await g.test.call('GET', '/client/models')).json();
  const byId = Object.fromEntries(data.map((model: { id: string; capabilities: unknown }) => [model.id, model.capabilities]));
  t.same(byId['judge-t2'].evaluation, { calibration: { method: 'temperature', temperature: 2 } });
  t.same(byId.judge.evaluation, { calibration: { method: 'none' } });
  t.equal(byId['mock-small'].evaluation, null);
});

import t from 'tap';
import type { ChatRequestBody, Provider } from '../../core/gateway/provider.ts';
import { mockProviderType } from '../../providers/mock/index.ts';
import { createProviderContext } from '../../providers/provider-context.ts';
import { estimateTokens } from '../../providers/token-estimate.ts';
import { callOptions as options, chunksOf, collect } from './provider-test-kit.ts';

/** The chat options SDKs rely on, honoured by the mock as OpenAI documents them. */

const mock: Provider = mockProviderType.create('mock', mockProviderType.configSchema.parse({}), createProviderContext());
const chat = (request: ChatRequestBody) => mock.language!.chat(request, options());
const stream = async (request: ChatRequestBody) => chunksOf(await collect(mock.language!.chatStream(request, options())));
const body = (content: string, extra: Partial<ChatRequestBody> = {}): ChatRequestBody => ({ model: 'mock-small', messages: [{ role: 'user', content }], ...extra });

t.test('every message and first delta says refusal null; completions and chunks carry a system_fingerprint', async (t) => {
  const { completion } = await chat(body('hello there'));
  t.equal(completion.choices[0]?.message.refusal, null);
  t.ok(Object.hasOwn(completion.choices[0]?.message ?? {}, 'refusal'), 'present, not just undefined');
  t.equal(completion.choices[0]?.logprobs, null, 'logprobs null when not asked');
  t.match(completion['system_fingerprint'], /^fp_[0-9a-f]{10}$/);
  const chunks = await stream(body('hello there'));
  t.same(chunks[0]?.choices[0]?.delta, { role: 'assistant', content: '', refusal: null });
  for (const chunk of chunks) {
    t.equal(chunk['system_fingerprint'], completion['system_fingerprint']);
    t.ok(Object.hasOwn(chunk.choices[0]!, 'logprobs'), 'every chunk choice has logprobs (null)');
  }
});

t.test('n asks for that many choices, each with its index, usage adding up their output', async (t) => {
  const { completion, usage } = await chat(body('Give me three answers', { n: 3 }));
  t.same(
    completion.choices.map((choice) => choice.index),
    [0, 1, 2],
  );
  const texts = completion.choices.map((choice) => choice.message.content as string);
  t.ok(new Set(texts).size > 1, 'the choices are not all the same');
  t.equal(
    usage.outputTokens,
    texts.reduce((sum, text) => sum + estimateTokens(text), 0),
  );
});

t.test('a streamed n interleaves the choices, each ending with its own finish chunk', async (t) => {
  const chunks = await stream(body('Give me two answers', { n: 2 }));
  const order = chunks.map((chunk) => chunk.choices[0]!.index);
  t.same(order.slice(0, 4), [0, 1, 0, 1], 'one chunk per choice in turn');
  const { completion } = await chat(body('Give me two answers', { n: 2 }));
  for (const index of [0, 1]) {
    const own = chunks.filter((chunk) => chunk.choices[0]!.index === index);
    t.equal(own.map((chunk) => chunk.choices[0]!.delta.content ?? '').join(''), completion.choices[index]!.message.content);
    t.equal(own.at(-1)?.choices[0]?.finish_reason, 'stop');
  }
});

t.test('logprobs with top_logprobs follow OpenAI’s shape and spell out the reply', async (t) => {
  const { completion } = await chat(body('What is two plus two?', { logprobs: true, top_logprobs: 3 }));
  const choice = completion.choices[0]!;
  const logprobs = choice.logprobs as { content: any[]; refusal: null };
  t.equal(logprobs.refusal, null);
  t.equal(logprobs.content.map((entry) => entry.token).join(''), choice.message.content);
  for (const entry of logprobs.content) {
    t.same(entry.bytes, Array.from(Buffer.from(entry.token, 'utf8')));
    t.ok(entry.logprob <= 0);
    t.equal(entry.top_logprobs.length, 3);
    t.same(entry.top_logprobs[0], { token: entry.token, logprob: entry.logprob, bytes: entry.bytes }, 'the chosen token is the likeliest');
    const total = entry.top_logprobs.reduce((sum: number, top: { logprob: number }) => sum + Math.exp(top.logprob), 0);
    t.ok(total <= 1 + 1e-6, 'the probabilities form a distribution');
  }
  const again = await chat(body('What is two plus two?', { logprobs: true }));
  t.same((again.completion.choices[0]!.logprobs as any).content[0].top_logprobs, [], 'no alternatives without top_logprobs');
});

t.test('streamed logprobs come with each content chunk, matching the JSON answer', async (t) => {
  const request = body('What is two plus two?', { logprobs: true, top_logprobs: 2 });
  const { completion } = await chat(request);
  const chunks = await stream(request);
  const streamed = chunks.flatMap((chunk) => ((chunk.choices[0]?.logprobs as { content: unknown[] } | null)?.content ?? []) as unknown[]);
  t.same(streamed, (completion.choices[0]!.logprobs as { content: unknown[] }).content);
  for (const chunk of chunks.filter((c) => typeof c.choices[0]?.delta.content === 'string' && c.choices[0]?.delta.content !== '')) {
    t.equal((chunk.choices[0]!.logprobs as any).content[0].token, chunk.choices[0]!.delta.content);
  }
});

t.test('stop cuts the reply before the first stop sequence, finish_reason stop', async (t) => {
  const { completion } = await chat(body('alpha beta gamma delta', { stop: ['gamma', 'beta'] }));
  t.equal(completion.choices[0]!.message.content, 'You said: "alpha ');
  t.equal(completion.choices[0]!.finish_reason, 'stop');
  const chunks = await stream(body('alpha beta gamma delta', { stop: 'delta' }));
  t.equal(chunks.map((chunk) => chunk.choices[0]!.delta.content ?? '').join(''), 'You said: "alpha beta gamma ');
});

t.test('the same seed and input give the same output; another seed another', async (t) => {
  const request = (seed: number) => body('Tell me something', { seed, n: 2, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: numbers } } });
  const numbers = { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'number' } }, required: ['a', 'b'] };
  const first = await chat(request(7));
  const second = await chat(request(7));
  const other = await chat(request(8));
  const contents = (result: typeof first) => result.completion.choices.map((choice) => choice.message.content);
  t.same(contents(first), contents(second));
  t.notSame(contents(first), contents(other));
  const text = await chat(body('Tell me something', { seed: 3 }));
  t.equal(text.completion.choices[0]!.message.content, (await chat(body('Tell me something', { seed: 3 }))).completion.choices[0]!.message.content);
});

t.test('json_object answers a JSON object', async (t) => {
  const { completion } = await chat(body('Answer in JSON', { response_format: { type: 'json_object' } }));
  const parsed = JSON.parse(completion.choices[0]!.message.content as string);
  t.type(parsed, 'object');
  t.notOk(Array.isArray(parsed));
  t.match(parsed.reply, /Answer in JSON/);
});

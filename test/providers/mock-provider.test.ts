import t from 'tap';
import { modalitiesOf, type ChatRequestBody, type Provider } from '../../core/gateway/provider.ts';
import { mockProviderType } from '../../providers/mock/index.ts';
import { createProviderContext } from '../../providers/provider-context.ts';
import { callOptions as options, chunksOf, collect, failure } from './provider-test-kit.ts';
import { estimateTokens } from '../../providers/token-estimate.ts';

function provider(config: Record<string, unknown> = {}): Provider {
  return mockProviderType.create('mock', mockProviderType.configSchema.parse(config), createProviderContext());
}

const body = (content: string, extra: Partial<ChatRequestBody> = {}): ChatRequestBody => ({ model: 'mock-small', messages: [{ role: 'user', content }], ...extra });
const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' }, unit: { type: 'string', enum: ['c', 'f'] } }, required: ['city', 'days', 'unit'] },
    },
  },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } },
];

t.test('the reply echoes part of the last user message', async (t) => {
  const result = await provider().language!.chat(body('What is the capital of Norway?'), options());
  t.match(result.completion.choices[0]?.message.content, 'What is the capital of Norway?');
  t.equal(result.completion.choices[0]?.finish_reason, 'stop');
  t.equal(result.completion.model, 'mock-small');
});

t.test('the same request gets the same reply', async (t) => {
  const a = await provider().language!.chat(body('Repeat after me'), options());
  const b = await provider().language!.chat(body('Repeat after me'), options());
  t.equal(a.completion.choices[0]?.message.content, b.completion.choices[0]?.message.content);
  t.equal(a.completion.id, b.completion.id);
  const c = await provider().language!.chat(body('Something else'), options());
  t.not(a.completion.choices[0]?.message.content, c.completion.choices[0]?.message.content);
});

t.test('usage is counted with the shared estimator and is not marked estimated', async (t) => {
  const result = await provider().language!.chat(body('Count me'), options());
  const text = result.completion.choices[0]?.message.content as string;
  t.equal(result.usage.outputTokens, estimateTokens(text));
  t.ok(result.usage.inputTokens > 0);
  t.equal(result.usage.estimated, false);
  t.match(result.completion.usage, { prompt_tokens: result.usage.inputTokens, completion_tokens: result.usage.outputTokens });
});

t.test('stream sends a role chunk, word chunks, the finish chunk, then usage', async (t) => {
  const p = provider();
  const events = await collect(p.language!.chatStream(body('Stream this please'), options()));
  const chunks = events.flatMap((event) => (event.type === 'chunk' ? [event.chunk] : []));
  t.same(chunks[0]?.choices[0]?.delta, { role: 'assistant', content: '', refusal: null });
  t.ok(chunks.length > 5, 'several word chunks');
  t.equal(chunks.at(-1)?.choices[0]?.finish_reason, 'stop');
  t.equal(events.at(-1)?.type, 'usage');
  const streamed = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('');
  const whole = await p.language!.chat(body('Stream this please'), options());
  t.equal(streamed, whole.completion.choices[0]?.message.content);
  const usage = events.at(-1);
  if (usage?.type === 'usage') t.same(usage.usage, whole.usage);
});

t.test('max_tokens truncates the reply with finish_reason length', async (t) => {
  const result = await provider().language!.chat(body('Tell me a long story about many things', { max_tokens: 5 }), options());
  const text = result.completion.choices[0]?.message.content as string;
  t.equal(result.completion.choices[0]?.finish_reason, 'length');
  t.ok(estimateTokens(text) <= 5);
  t.ok(result.usage.outputTokens <= 5);
  const events = await collect(provider().language!.chatStream(body('Tell me a long story about many things', { max_completion_tokens: 5 }), options()));
  const finish = events.flatMap((event) => (event.type === 'chunk' ? [event.chunk.choices[0]?.finish_reason] : [])).at(-1);
  t.equal(finish, 'length');
});

t.test('tool_choice required calls the first tool with arguments from its schema', async (t) => {
  const result = await provider().language!.chat(body('Oslo please', { tools, tool_choice: 'required' }), options());
  const choice = result.completion.choices[0];
  t.equal(choice?.finish_reason, 'tool_calls');
  t.equal(choice?.message.content, null);
  t.equal(choice?.message.tool_calls?.length, 1);
  const call = choice?.message.tool_calls?.[0];
  t.equal(call?.function.name, 'get_weather');
  const args = JSON.parse(call?.function.arguments ?? '');
  t.equal(args.city, 'Oslo please', 'free text comes from what the user said');
  t.ok(Number.isInteger(args.days));
  t.ok(['c', 'f'].includes(args.unit));
  t.match(call?.id, /^call_/);
});

t.test('a message naming several tools to call gets parallel tool calls, in the order named', async (t) => {
  const result = await provider().language!.chat(body('call get_time and then get_weather for Oslo', { tools }), options());
  const calls = result.completion.choices[0]?.message.tool_calls ?? [];
  t.same(
    calls.map((call) => call.function.name),
    ['get_time', 'get_weather'],
  );
  t.equal(new Set(calls.map((call) => call.id)).size, 2, 'each call has its own id');
  t.equal(result.completion.choices[0]?.finish_reason, 'tool_calls');
});

t.test('"call all tools" calls every tool; parallel_tool_calls false keeps the first', async (t) => {
  const all = await provider().language!.chat(body('call all tools please', { tools }), options());
  t.equal(all.completion.choices[0]?.message.tool_calls?.length, 2);
  const one = await provider().language!.chat(body('call all tools please', { tools, parallel_tool_calls: false }), options());
  t.same(
    one.completion.choices[0]?.message.tool_calls?.map((call) => call.function.name),
    ['get_weather'],
  );
});

t.test('streamed parallel tool calls carry their indexes, names first, arguments in pieces', async (t) => {
  const events = await collect(provider().language!.chatStream(body('call get_weather and get_time', { tools }), options()));
  const deltas = chunksOf(events).flatMap((chunk) => (chunk.choices[0]?.delta.tool_calls as any[]) ?? []);
  const byIndex = new Map<number, { name: string; arguments: string }>();
  for (const delta of deltas) {
    const entry = byIndex.get(delta.index) ?? { name: '', arguments: '' };
    if (delta.function.name) entry.name = delta.function.name;
    entry.arguments += delta.function.arguments ?? '';
    byIndex.set(delta.index, entry);
  }
  t.same([...byIndex.keys()], [0, 1]);
  t.equal(byIndex.get(0)?.name, 'get_weather');
  t.equal(byIndex.get(1)?.name, 'get_time');
  t.same(JSON.parse(byIndex.get(1)!.arguments), {});
  t.ok(deltas.filter((delta) => delta.index === 0).length > 2, 'arguments arrive in several deltas');
});

t.test('a named tool_choice calls that tool', async (t) => {
  const result = await provider().language!.chat(body('hi', { tools, tool_choice: { type: 'function', function: { name: 'get_time' } } }), options());
  const call = result.completion.choices[0]?.message.tool_calls?.[0];
  t.equal(call?.function.name, 'get_time');
  t.equal(call?.function.arguments, '{}');
});

t.test('"call <tool>" in the last user message calls that tool', async (t) => {
  const result = await provider().language!.chat(body('Please call get_time now', { tools }), options());
  t.equal(result.completion.choices[0]?.message.tool_calls?.[0]?.function.name, 'get_time');
});

t.test('no tool call without tools, with tool_choice none, or for an unknown tool name', async (t) => {
  const p = provider();
  for (const request of [body('call get_time'), body('call get_time', { tools, tool_choice: 'none' }), body('call nothing_here', { tools })]) {
    const result = await p.language!.chat(request, options());
    t.notOk(result.completion.choices[0]?.message.tool_calls);
  }
});

t.test('after a tool result the mock answers in text', async (t) => {
  const result = await provider().language!.chat(
    {
      model: 'mock-small',
      tools,
      messages: [
        { role: 'user', content: 'call get_time' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_time', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: '12:00' },
      ],
    },
    options(),
  );
  t.match(result.completion.choices[0]?.message.content, /get_time tool returned: "12:00"/);
  t.equal(result.completion.choices[0]?.finish_reason, 'stop');
});

t.test('streamed tool calls arrive as OpenAI tool-call deltas', async (t) => {
  const events = await collect(provider().language!.chatStream(body('x', { tools, tool_choice: 'required' }), options()));
  const deltas = events.flatMap((event) => (event.type === 'chunk' ? ((event.chunk.choices[0]?.delta.tool_calls as any[]) ?? []) : []));
  t.equal(deltas[0].function.name, 'get_weather');
  t.ok(JSON.parse(deltas.map((delta) => delta.function.arguments).join('')));
  const finish = events.flatMap((event) => (event.type === 'chunk' ? [event.chunk.choices[0]?.finish_reason] : [])).at(-1);
  t.equal(finish, 'tool_calls');
});

t.test('embeddings are deterministic unit vectors of the configured size', async (t) => {
  const p = provider({ embeddingDimensions: 16 });
  const result = await p.embeddings!.embed({ model: 'mock-embed', input: ['alpha', 'beta', 'alpha'] }, options());
  const data = result.body['data'] as Array<{ embedding: number[]; index: number }>;
  t.equal(data.length, 3);
  t.equal(data[0]?.embedding.length, 16);
  t.same(data[0]?.embedding, data[2]?.embedding);
  t.notSame(data[0]?.embedding, data[1]?.embedding);
  t.ok(Math.abs(Math.hypot(...(data[1]?.embedding ?? [])) - 1) < 1e-6);
  t.equal(result.usage.inputTokens, 5);
  t.equal(result.usage.estimated, false);
});

t.test('embeddings default to 64 dimensions and honour the request’s dimensions', async (t) => {
  const p = provider();
  const byDefault = await p.embeddings!.embed({ model: 'e', input: 'x' }, options());
  t.equal((byDefault.body['data'] as any[])[0].embedding.length, 64);
  const asked = await p.embeddings!.embed({ model: 'e', input: 'x', dimensions: 5 }, options());
  t.equal((asked.body['data'] as any[])[0].embedding.length, 5);
});

t.test('embeddings can be base64 float32, as the SDKs ask by default', async (t) => {
  const p = provider({ embeddingDimensions: 8 });
  const floats = await p.embeddings!.embed({ model: 'e', input: 'x' }, options());
  const packed = await p.embeddings!.embed({ model: 'e', input: 'x', encoding_format: 'base64' }, options());
  const bytes = Buffer.from((packed.body['data'] as any[])[0].embedding as string, 'base64');
  const decoded = Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4));
  t.same(decoded, (floats.body['data'] as any[])[0].embedding);
});

t.test('latency can be cut short by the caller', async (t) => {
  const controller = new AbortController();
  // The call is waiting out its latency once chat() returns its promise; a minute is longer than
  // tap lets a test run, so ending at all means the wait was cut.
  const pending = failure(() => provider({ latencyMs: 60_000 }).language!.chat(body('x'), options(controller.signal)));
  controller.abort();
  t.equal((await pending).kind, 'aborted');
});

t.test('an abort between chunks stops the stream', async (t) => {
  const controller = new AbortController();
  let chunks = 0;
  const { kind } = await failure(async () => {
    for await (const event of provider({ chunkDelayMs: 5 }).language!.chatStream(body('one two three four five six'), options(controller.signal))) {
      if (event.type === 'chunk' && ++chunks === 2) controller.abort();
    }
  });
  t.equal(kind, 'aborted');
  t.equal(chunks, 2);
});

t.test('offers every modality', async (t) => {
  t.same(modalitiesOf(provider()), ['language', 'embeddings', 'images', 'speech', 'transcription', 'responses', 'evaluation']);
});

t.test('evaluation: label log probabilities, the same for the same prompt, most of the probability on the labels', async (t) => {
  const ask = (content: string, labels = ['A', 'B', 'C']) => provider().evaluation!.labelLogprobs({ model: 'mock-judge', messages: [{ role: 'user', content }], labels }, options());
  const first = await ask('Which one?');
  t.same((await ask('Which one?')).logprobs, first.logprobs, 'deterministic');
  t.not((await ask('Which other one?')).logprobs[0], first.logprobs[0], 'another prompt, other weights');
  const mass = first.logprobs.reduce((sum, logprob) => sum + Math.exp(logprob), 0);
  t.ok(mass > 0.79 && mass < 0.99 + 1e-6, `the labels share ${mass}, the rest of the vocabulary the remainder`);
  t.match(first.usage, { outputTokens: 1, estimated: false });
  t.ok(first.usage.inputTokens > 0);
});

t.test('evaluation: a cancelled call stops', async (t) => {
  const controller = new AbortController();
  controller.abort();
  const { kind } = await failure(() => provider().evaluation!.labelLogprobs({ model: 'm', messages: [{ role: 'user', content: 'x' }], labels: ['yes', 'no'] }, options(controller.signal)));
  t.equal(kind, 'aborted');
});

import t from 'tap';
import type { ResponsesPassthrough, ResponsesRequestBody, ResponsesStreamEvent } from '../../core/gateway/provider.ts';
import { openAIProviderType } from '../../providers/openai/index.ts';
import { createProviderContext } from '../../providers/provider-context.ts';
import { startFakeOpenAIUpstream, type FakeOpenAIUpstream } from '../fakes/fake-openai-upstream.ts';
import { callOptions as options, failure } from './provider-test-kit.ts';

const context = createProviderContext({ timeouts: { connectMs: 300, firstByteMs: 400, totalMs: 2000 } });

let fake: FakeOpenAIUpstream;
t.before(async () => {
  fake = await startFakeOpenAIUpstream();
});
t.teardown(() => fake.close());
t.beforeEach(() => fake.reset());

function responses(config: Record<string, unknown> = {}): ResponsesPassthrough {
  const settings = openAIProviderType.configSchema.parse({ baseUrl: fake.baseUrl, apiKey: 'sk-test', allowPrivateNetwork: true, ...config });
  const created = openAIProviderType.create('openai-test', settings, context);
  t.teardown(() => created.close?.());
  return created.responses!;
}

const body = (extra: Partial<ResponsesRequestBody> = {}): ResponsesRequestBody => ({ model: 'gpt-test', input: 'Say hello', ...extra });
const webSearch = { tools: [{ type: 'web_search' }] };

async function collect(stream: AsyncIterable<ResponsesStreamEvent>): Promise<ResponsesStreamEvent[]> {
  const events: ResponsesStreamEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

const namesOf = (events: ResponsesStreamEvent[]) => events.flatMap((event) => (event.type === 'event' ? [event.event] : []));

t.test('create returns the response and its token usage, cached and reasoning tokens included', async (t) => {
  fake.enqueue({ kind: 'reply', content: 'Hello there', usage: { prompt_tokens: 40, completion_tokens: 15, cached_tokens: 32, reasoning_tokens: 7 } });
  const result = await responses().create(body(), options());
  t.equal(result.body['object'], 'response');
  t.equal(result.body['status'], 'completed');
  t.same((result.body['output'] as any[])[0].content[0].text, 'Hello there');
  t.same(result.usage, {
    tokens: { inputTokens: 40, cachedInputTokens: 32, cacheWriteTokens: 0, outputTokens: 15, reasoningTokens: 7, estimated: false },
    webSearches: 0,
  });
});

t.test('create posts the body to /responses as it came, without stream fields', async (t) => {
  await responses().create(body({ instructions: 'Be brief', stream: false, stream_options: { include_obfuscation: false }, store: false }), options());
  const sent = fake.requests[0]!;
  t.equal(sent.path, '/v1/responses');
  t.equal(sent.headers['x-client-request-id'], 'req-123');
  t.same(sent.body, { model: 'gpt-test', input: 'Say hello', instructions: 'Be brief', store: false });
});

t.test('create counts one web search per web_search_call output item', async (t) => {
  fake.enqueue({ kind: 'reply', webSearches: 3 });
  const result = await responses().create(body(webSearch), options());
  t.equal((result.body['output'] as any[]).filter((item) => item.type === 'web_search_call').length, 3);
  t.equal(result.usage.webSearches, 3);
});

t.test('create estimates tokens when the upstream reports no usage', async (t) => {
  fake.enqueue({ kind: 'reply', content: 'x'.repeat(40), usage: false });
  const result = await responses().create(body(), options());
  t.equal(result.usage.tokens.estimated, true);
  t.equal(result.usage.tokens.outputTokens, 10);
  t.ok(result.usage.tokens.inputTokens > 0);
});

t.test('create: a response the upstream reports as failed is an UpstreamError of its code', async (t) => {
  const failed = { id: 'resp_1', object: 'response', status: 'failed', output: [], error: { code: 'rate_limit_exceeded', message: 'Slow down' }, usage: null };
  fake.enqueue({ kind: 'raw', body: JSON.stringify(failed) });
  const error = await failure(() => responses().create(body(), options()));
  t.equal(error.kind, 'rate_limited');
  t.match(error.message, 'Slow down');
});

t.test('create: an answer that is not a response is a protocol error', async (t) => {
  fake.enqueue({ kind: 'raw', body: JSON.stringify({ object: 'chat.completion', choices: [] }) });
  const error = await failure(() => responses().create(body(), options()));
  t.equal(error.kind, 'protocol');
});

t.test('stream forwards every event in order, named, then the usage from response.completed', async (t) => {
  fake.enqueue({ kind: 'reply', content: 'one two three', usage: { prompt_tokens: 20, completion_tokens: 3, cached_tokens: 4, reasoning_tokens: 1 } });
  const events = await collect(responses().stream(body(), options()));
  t.same(namesOf(events), [
    'response.created',
    'response.in_progress',
    'response.output_item.added',
    'response.content_part.added',
    'response.output_text.delta',
    'response.output_text.delta',
    'response.output_text.delta',
    'response.output_text.done',
    'response.content_part.done',
    'response.output_item.done',
    'response.completed',
  ]);
  const data = events.flatMap((event) => (event.type === 'event' ? [event.data] : []));
  t.same(
    data.map((event) => event['sequence_number']),
    data.map((_, index) => index),
    'sequence numbers as the upstream sent them',
  );
  t.ok(
    data.every((event, index) => event['type'] === namesOf(events)[index]),
    'each event keeps its payload',
  );
  t.same(events.at(-1), {
    type: 'usage',
    usage: { tokens: { inputTokens: 20, cachedInputTokens: 4, cacheWriteTokens: 0, outputTokens: 3, reasoningTokens: 1, estimated: false }, webSearches: 0 },
  });
  t.equal(fake.requests[0]?.body.stream, true);
});

t.test('stream counts the web searches of the completed response', async (t) => {
  const events = await collect(responses().stream(body(webSearch), options()));
  const names = namesOf(events);
  t.ok(names.includes('response.web_search_call.searching'));
  t.ok(names.indexOf('response.web_search_call.completed') < names.indexOf('response.output_text.delta'), 'the search runs before the answer');
  const usage = events.at(-1);
  t.equal(usage?.type === 'usage' && usage.usage.webSearches, 1);
});

t.test('stream passes function-call events through', async (t) => {
  fake.enqueue({ kind: 'reply', toolCalls: [{ id: 'call_7', name: 'lookup', arguments: { q: 'tap' } }] });
  const events = await collect(responses().stream(body({ tools: [{ type: 'function', name: 'lookup', parameters: { type: 'object' } }] }), options()));
  const deltas = events.flatMap((event) => (event.type === 'event' && event.event === 'response.function_call_arguments.delta' ? [event.data['delta']] : []));
  t.equal(deltas.join(''), '{"q":"tap"}');
  t.same(fake.requests[0]?.body.tools, [{ type: 'function', name: 'lookup', parameters: { type: 'object' } }]);
});

t.test('stream: an error event mid-stream is thrown after the events before it', async (t) => {
  fake.enqueue({ kind: 'stream-error', afterChunks: 4, error: { message: 'The model is overloaded', code: 'server_error' } });
  const seen: ResponsesStreamEvent[] = [];
  const error = await failure(async () => {
    for await (const event of responses().stream(body(), options())) seen.push(event);
  });
  t.equal(error.kind, 'server');
  t.match(error.message, 'The model is overloaded');
  t.equal(seen.length, 4);
});

t.test('stream: response.failed is thrown as an UpstreamError of its code', async (t) => {
  fake.enqueue({ kind: 'stream-error', afterChunks: 2, failedResponse: true, error: { message: 'Invalid prompt', code: 'invalid_prompt' } });
  const seen: ResponsesStreamEvent[] = [];
  const error = await failure(async () => {
    for await (const event of responses().stream(body(), options())) seen.push(event);
  });
  t.equal(error.kind, 'client');
  t.match(error.message, 'Invalid prompt');
  t.same(namesOf(seen), ['response.created', 'response.in_progress']);
});

t.test('stream: a connection cut mid-stream fails as a retryable server error, without usage', async (t) => {
  fake.enqueue({ kind: 'stream-cut', afterChunks: 5 });
  const seen: ResponsesStreamEvent[] = [];
  const error = await failure(async () => {
    for await (const event of responses().stream(body(), options())) seen.push(event);
  });
  t.equal(error.kind, 'server');
  t.equal(error.retryable, true);
  t.equal(seen.length, 5);
  t.notOk(seen.some((event) => event.type === 'usage'));
});

t.test('stream: a stream that ends before response.completed is a protocol error', async (t) => {
  const created = { type: 'response.created', sequence_number: 0, response: { id: 'resp_1', object: 'response', status: 'in_progress', output: [] } };
  fake.enqueue({ kind: 'raw', headers: { 'content-type': 'text/event-stream' }, body: `event: response.created\ndata: ${JSON.stringify(created)}\n\n` });
  const error = await failure(() => collect(responses().stream(body(), options())));
  t.equal(error.kind, 'protocol');
});

t.test('stream: a failure up front is thrown before the first event', async (t) => {
  fake.enqueue({ kind: 'status', status: 429, retryAfter: '3' });
  const iterator = responses().stream(body(), options())[Symbol.asyncIterator]();
  const error = await failure(() => iterator.next());
  t.equal(error.kind, 'rate_limited');
  t.equal(error.retryAfterMs, 3000);
});

t.test('stream: aborting mid-stream stops the upstream call', async (t) => {
  fake.enqueue({ kind: 'reply', content: 'a b c d e f g h i j k l', chunkDelayMs: 20 });
  const controller = new AbortController();
  let seen = 0;
  const error = await failure(async () => {
    for await (const _ of responses().stream(body(), options(controller.signal))) if (++seen === 3) controller.abort();
  });
  t.equal(error.kind, 'aborted');
  t.equal(await fake.requests[0]?.outcome, 'closed');
});

t.test('create and stream map each upstream failure to its kind', async (t) => {
  const cases = [
    { fault: { kind: 'reset' }, kind: 'connect' },
    { fault: { kind: 'hang' }, kind: 'timeout' },
    { fault: { kind: 'status', status: 500 }, kind: 'server' },
    { fault: { kind: 'status', status: 503 }, kind: 'server' },
    { fault: { kind: 'status', status: 429, retryAfter: '1' }, kind: 'rate_limited', retryAfterMs: 1000 },
    { fault: { kind: 'status', status: 400 }, kind: 'client' },
    { fault: { kind: 'status', status: 401 }, kind: 'auth' },
  ] as const;
  const api = responses();
  for (const { fault, kind, ...rest } of cases) {
    for (const [mode, call] of [
      ['create', () => api.create(body(), options())],
      ['stream', () => collect(api.stream(body(), options()))],
    ] as const) {
      fake.enqueue(fault);
      const error = await failure(call);
      t.equal(error.kind, kind, `${mode}: ${JSON.stringify(fault)}`);
      if ('retryAfterMs' in rest) t.equal(error.retryAfterMs, rest.retryAfterMs);
    }
  }
});

t.test('Azure sends responses to its resource-wide Responses API, the deployment named in the body', async (t) => {
  const api = responses({ baseUrl: fake.url, azure: { apiVersion: '2025-04-01-preview' } });
  await api.create(body({ model: 'my-deployment' }), options());
  await collect(api.stream(body({ model: 'my-deployment' }), options()));
  for (const request of fake.requests) {
    t.equal(request.path, '/openai/responses?api-version=2025-04-01-preview');
    t.equal(request.body.model, 'my-deployment');
    t.equal(request.headers['api-key'], 'sk-test');
  }
});

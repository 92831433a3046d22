import t from 'tap';
import { modalitiesOf, type ChatRequestBody, type ChatStreamEvent, type Provider } from '../../core/gateway/provider.ts';
import { openAIProviderType } from '../../providers/openai/index.ts';
import { openAIChatEvents } from '../../providers/openai/chat-stream.ts';
import { createProviderContext } from '../../providers/provider-context.ts';
import { callOptions as options, collect, failure } from './provider-test-kit.ts';
import { startFakeOpenAIUpstream, type FakeOpenAIUpstream } from '../fakes/fake-openai-upstream.ts';
import { GatewayCallOptions } from '../../core/gateway/call-options.ts';
import { CallSignal } from '../../core/gateway/call-signal.ts';

const API_KEY = 'sk-openai-test-key-abcdef123456';
const context = createProviderContext({ timeouts: { connectMs: 300, firstByteMs: 400, totalMs: 2000 } });

let fake: FakeOpenAIUpstream;
t.before(async () => {
  fake = await startFakeOpenAIUpstream();
});
t.teardown(() => fake.close());
t.beforeEach(() => fake.reset());

function provider(config: Record<string, unknown> = {}): Provider {
  const created = openAIProviderType.create('openai-test', openAIProviderType.configSchema.parse({ baseUrl: fake.baseUrl, apiKey: API_KEY, allowPrivateNetwork: true, ...config }), context);
  t.teardown(() => created.close?.());
  return created;
}

const body = (extra: Partial<ChatRequestBody> = {}): ChatRequestBody => ({ model: 'gpt-test', messages: [{ role: 'user', content: 'Say hello' }], ...extra });

t.test('non-stream chat returns the completion and normalised usage', async (t) => {
  fake.enqueue({ kind: 'reply', content: 'Hello there', usage: { prompt_tokens: 20, completion_tokens: 9, cached_tokens: 8, reasoning_tokens: 4 } });
  const result = await provider().language!.chat(body(), options());
  t.equal(result.completion.choices[0]?.message.content, 'Hello there');
  t.same(result.usage, { inputTokens: 20, cachedInputTokens: 8, cacheWriteTokens: 0, outputTokens: 9, reasoningTokens: 4, estimated: false });
});

t.test('non-stream chat sends the body through with provider-specific fields, without stream fields', async (t) => {
  await provider().language!.chat(body({ temperature: 0.2, seed: 7, logit_bias: { '50256': -100 }, stream: true, stream_options: { include_usage: true } }), options());
  const sent = fake.requests[0]?.body;
  t.equal(sent.model, 'gpt-test');
  t.equal(sent.temperature, 0.2);
  t.equal(sent.seed, 7);
  t.same(sent.logit_bias, { '50256': -100 });
  t.notOk('stream' in sent);
  t.notOk('stream_options' in sent);
  t.equal(fake.requests[0]?.path, '/v1/chat/completions');
});

t.test('sends the bearer key, the configured headers and the request id', async (t) => {
  await provider({ headers: { 'openai-organization': 'org-1', 'x-extra': 'yes' } }).language!.chat(body(), options());
  const headers = fake.requests[0]?.headers ?? {};
  t.equal(headers['authorization'], `Bearer ${API_KEY}`);
  t.equal(headers['openai-organization'], 'org-1');
  t.equal(headers['x-extra'], 'yes');
  t.equal(headers['x-client-request-id'], 'req-123');
});

t.test('omits authorization when no key is configured (local servers)', async (t) => {
  await provider({ apiKey: undefined }).language!.chat(body(), options());
  t.notOk(fake.requests[0]?.headers['authorization']);
});

t.test('non-stream chat estimates usage when the upstream reports none', async (t) => {
  fake.enqueue({ kind: 'reply', content: 'x'.repeat(40), usage: false });
  const result = await provider().language!.chat(body(), options());
  t.equal(result.usage.estimated, true);
  t.equal(result.usage.outputTokens, 10);
  t.ok(result.usage.inputTokens > 0);
});

t.test('non-stream tool calls come back as sent', async (t) => {
  fake.enqueue({ kind: 'reply', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: { city: 'Oslo' } }] });
  const result = await provider().language!.chat(body({ tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }] }), options());
  const choice = result.completion.choices[0];
  t.equal(choice?.finish_reason, 'tool_calls');
  t.same(choice?.message.tool_calls, [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }]);
  t.same(fake.requests[0]?.body.tools, [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }]);
});

t.test('stream yields chunks, then the usage that arrives after the finish chunk', async (t) => {
  fake.enqueue({ kind: 'reply', content: 'one two three four', usage: { prompt_tokens: 11, completion_tokens: 4, cached_tokens: 3 } });
  const events = await collect(provider().language!.chatStream(body(), options()));
  const last = events.at(-1);
  t.same(last, { type: 'usage', usage: { inputTokens: 11, cachedInputTokens: 3, cacheWriteTokens: 0, outputTokens: 4, reasoningTokens: 0, estimated: false } });
  const chunks = events.filter((event) => event.type === 'chunk').map((event) => event.chunk);
  t.equal(chunks[0]?.choices[0]?.delta.role, 'assistant');
  t.equal(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join(''), 'one two three four');
  t.equal(chunks.at(-1)?.choices[0]?.finish_reason, 'stop');
  t.equal(events.filter((event) => event.type === 'usage').length, 1);
  t.ok(
    chunks.every((chunk) => !('usage' in chunk)),
    'chunks carry no usage: the usage event does',
  );
});

t.test("stream chunks offer the upstream's own text, which says what the chunk says", async (t) => {
  fake.enqueue({ kind: 'reply', content: 'one two' });
  const events = await collect(provider().language!.chatStream(body(), options()));
  const chunks = events.filter((event) => event.type === 'chunk');
  t.ok(chunks.length >= 3);
  for (const event of chunks) {
    t.type(event.raw, 'string');
    // OpenAI sends `"usage": null` on every chunk once include_usage is asked; the chunk drops it.
    t.same({ ...JSON.parse(event.raw!), usage: undefined }, { ...event.chunk, usage: undefined });
  }
});

t.test('a chunk that carries usage offers no text of its own: the usage is not forwarded', async (t) => {
  const frames = [
    { id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: 'hi' }, finish_reason: null }] },
    { id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 1 } },
  ];
  const bytes = new TextEncoder().encode(`${frames.map((frame) => `data: ${JSON.stringify(frame)}\n\n`).join('')}data: [DONE]\n\n`);
  const open = async () => ({
    body: (async function* () {
      yield bytes;
    })(),
  });
  const events = await collect(openAIChatEvents(open, body(), { label: 'openai-test', secrets: [] }));
  const [first, second] = events.filter((event) => event.type === 'chunk');
  t.type(first?.raw, 'string');
  t.equal(second?.raw, undefined);
  t.notOk(second && 'usage' in second.chunk);
  t.same(events.at(-1), { type: 'usage', usage: { inputTokens: 3, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 1, reasoningTokens: 0, estimated: false } });
});

t.test('stream asks for include_usage without clobbering other stream_options', async (t) => {
  await collect(provider().language!.chatStream(body({ stream_options: { continuous_usage_stats: true } }), options()));
  const sent = fake.requests[0]?.body;
  t.equal(sent.stream, true);
  t.same(sent.stream_options, { continuous_usage_stats: true, include_usage: true });
});

t.test('stream leaves stream_options alone when includeStreamUsage is off', async (t) => {
  await collect(provider({ includeStreamUsage: false }).language!.chatStream(body(), options()));
  t.notOk('stream_options' in (fake.requests[0]?.body ?? {}));
});

t.test('stream estimates usage when no usage chunk arrives', async (t) => {
  fake.enqueue({ kind: 'reply', content: 'abcd efgh', usage: false });
  const events = await collect(provider().language!.chatStream(body(), options()));
  const usage = events.at(-1);
  t.equal(usage?.type, 'usage');
  if (usage?.type !== 'usage') return;
  t.equal(usage.usage.estimated, true);
  t.equal(usage.usage.outputTokens, 3);
  t.ok(usage.usage.inputTokens > 0);
});

t.test('stream passes tool-call deltas through', async (t) => {
  fake.enqueue({ kind: 'reply', toolCalls: [{ id: 'call_9', name: 'lookup', arguments: '{"q":"tap"}' }] });
  const events = await collect(provider().language!.chatStream(body(), options()));
  const deltas = events.flatMap((event) => (event.type === 'chunk' ? ((event.chunk.choices[0]?.delta.tool_calls as any[]) ?? []) : []));
  t.equal(deltas[0].id, 'call_9');
  t.equal(deltas[0].function.name, 'lookup');
  t.equal(deltas.map((delta) => delta.function.arguments ?? '').join(''), '{"q":"tap"}');
});

t.test('a fully read stream leaves its connection open for reuse', async (t) => {
  const p = provider();
  for (let i = 0; i < 4; i++) await collect(p.language!.chatStream(body(), options()));
  t.equal(await fake.requests[0]?.outcome, 'completed');
  // undici frees a socket a tick after the body ends, so back-to-back calls may open a second one
  t.ok(new Set(fake.requests.map((request) => request.remotePort)).size <= 2);
});

t.test('an in-stream error frame becomes a thrown UpstreamError', async (t) => {
  fake.enqueue({ kind: 'stream-error', afterChunks: 2, error: { message: 'The model is overloaded', type: 'server_error' } });
  const seen: ChatStreamEvent[] = [];
  const error = await failure(async () => {
    for await (const event of provider().language!.chatStream(body(), options())) seen.push(event);
  });
  t.equal(error.kind, 'server');
  t.match(error.message, 'The model is overloaded');
  t.equal(seen.length, 2, 'chunks before the error were delivered');
});

t.test('a stream cut mid-way fails as a server error after the chunks already read', async (t) => {
  fake.enqueue({ kind: 'stream-cut', afterChunks: 3 });
  const seen: ChatStreamEvent[] = [];
  const error = await failure(async () => {
    for await (const event of provider().language!.chatStream(body(), options())) seen.push(event);
  });
  t.equal(error.kind, 'server');
  t.equal(error.retryable, true);
  t.equal(seen.length, 3);
  t.notOk(seen.some((event) => event.type === 'usage'));
});

t.test('a stream that fails up front throws before the first event', async (t) => {
  fake.enqueue({ kind: 'status', status: 429, retryAfter: '2' });
  const iterator = provider().language!.chatStream(body(), options())[Symbol.asyncIterator]();
  const error = await failure(() => iterator.next());
  t.equal(error.kind, 'rate_limited');
  t.equal(error.retryAfterMs, 2000);
});

t.test('aborting mid-stream stops the upstream call', async (t) => {
  fake.enqueue({ kind: 'reply', content: 'a b c d e f g h i j k l m n o p', chunkDelayMs: 30 });
  const controller = new AbortController();
  let chunks = 0;
  const error = await failure(async () => {
    for await (const event of provider().language!.chatStream(body(), options(controller.signal))) {
      if (event.type === 'chunk' && ++chunks === 2) controller.abort();
    }
  });
  t.equal(error.kind, 'aborted');
  t.equal(await fake.requests[0]?.outcome, 'closed', 'the upstream saw the connection close');
});

t.test('leaving a stream early closes the upstream connection', async (t) => {
  fake.enqueue({ kind: 'reply', content: 'a b c d e f g h i j k l m n o p', chunkDelayMs: 30 });
  for await (const event of provider().language!.chatStream(body(), options())) {
    if (event.type === 'chunk') break;
  }
  t.equal(await fake.requests[0]?.outcome, 'closed');
});

t.test('aborting a non-stream call stops the upstream call', async (t) => {
  fake.enqueue({ kind: 'hang' });
  const controller = new AbortController();
  const pending = failure(() => provider().language!.chat(body(), options(controller.signal)));
  await fake.arrived(); // abort while the upstream holds the call
  controller.abort();
  const error = await pending;
  t.equal(error.kind, 'aborted');
  t.equal(await fake.requests[0]?.outcome, 'closed');
});

t.test("the gateway's cheaper cancel stops the upstream call without the provider making an AbortSignal", async (t) => {
  fake.enqueue({ kind: 'hang' });
  let signalRead = false;
  const cancel = new (class extends CallSignal {
    override get signal(): AbortSignal {
      signalRead = true;
      return super.signal;
    }
  })();
  const callOptions = new GatewayCallOptions(cancel, 'req-123');
  const pending = failure(() => provider().language!.chat(body(), callOptions));
  // Cancel once the upstream holds the request, however slow the machine is.
  await fake.arrived();
  cancel.abort(new Error('client gone'));
  const error = await pending;
  t.equal(error.kind, 'aborted');
  t.equal(await fake.requests[0]?.outcome, 'closed');
  t.equal(signalRead, false, 'the AbortSignal was never asked for');
});

t.test('an upstream that hangs times out', async (t) => {
  fake.enqueue({ kind: 'hang' });
  const error = await failure(() => provider().language!.chat(body(), options()));
  t.equal(error.kind, 'timeout');
});

t.test('reset before any response maps to connect', async (t) => {
  fake.enqueue({ kind: 'reset' });
  const error = await failure(() => provider().language!.chat(body(), options()));
  t.equal(error.kind, 'connect');
});

t.test('status codes map to kinds', async (t) => {
  const p = provider();
  for (const [status, kind] of [
    [400, 'client'],
    [401, 'auth'],
    [403, 'auth'],
    [429, 'rate_limited'],
    [500, 'server'],
    [503, 'server'],
  ] as const) {
    fake.enqueue({ kind: 'status', status });
    const error = await failure(() => p.language!.chat(body(), options()));
    t.equal(error.kind, kind, `status ${status}`);
    t.equal(error.status, status);
  }
});

t.test('the API key never appears in error messages', async (t) => {
  fake.enqueue({ kind: 'status', status: 401, message: `Incorrect API key provided: ${API_KEY}.` }, { kind: 'stream-error', afterChunks: 1, error: { message: `bad key ${API_KEY}` } });
  const p = provider();
  const first = await failure(() => p.language!.chat(body(), options()));
  const second = await failure(() => collect(p.language!.chatStream(body(), options())));
  for (const error of [first, second]) {
    t.notMatch(error.message, API_KEY);
    t.notMatch(JSON.stringify(error.upstreamBody), API_KEY);
    t.match(error.message, '[redacted]');
  }
});

t.test('Azure mode uses the deployment URL, api-version and the api-key header', async (t) => {
  const azure = provider({ baseUrl: fake.url, azure: { apiVersion: '2024-10-21' } });
  await azure.language!.chat(body({ model: 'my-deployment' }), options());
  await collect(azure.language!.chatStream(body({ model: 'my-deployment' }), options()));
  for (const request of fake.requests) {
    t.equal(request.path, '/openai/deployments/my-deployment/chat/completions?api-version=2024-10-21');
    t.equal(request.headers['api-key'], API_KEY);
    t.notOk(request.headers['authorization']);
  }
});

t.test('embeddings pass through and report the upstream usage', async (t) => {
  fake.enqueue({ kind: 'reply', usage: { prompt_tokens: 5, completion_tokens: 0 } });
  const result = await provider().embeddings!.embed({ model: 'text-embedding-test', input: ['a', 'b'], dimensions: 8 }, options());
  t.equal((result.body['data'] as unknown[]).length, 2);
  t.equal(fake.requests[0]?.path, '/v1/embeddings');
  t.equal(fake.requests[0]?.body.dimensions, 8);
  t.same(result.usage, { inputTokens: 5, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0, estimated: false });
});

t.test('embeddings estimate usage when the upstream reports none', async (t) => {
  fake.enqueue({ kind: 'reply', usage: false });
  const result = await provider().embeddings!.embed({ model: 'text-embedding-test', input: 'twelve chars' }, options());
  t.same(result.usage, { inputTokens: 3, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0, estimated: true });
});

t.test('Azure embeddings use the deployment URL', async (t) => {
  await provider({ baseUrl: fake.url, azure: { apiVersion: '2024-10-21' } }).embeddings!.embed({ model: 'emb', input: 'x' }, options());
  t.equal(fake.requests[0]?.path, '/openai/deployments/emb/embeddings?api-version=2024-10-21');
});

t.test('a private base URL is refused unless allowPrivateNetwork is set', async (t) => {
  t.throws(() => openAIProviderType.create('x', openAIProviderType.configSchema.parse({ baseUrl: fake.baseUrl }), context), { code: 'ERR_OUTBOUND_URL_REFUSED' });
});

t.test("offers every modality by default, as OpenAI's own API does", async (t) => {
  t.same(modalitiesOf(provider()), ['language', 'embeddings', 'images', 'speech', 'transcription', 'responses', 'evaluation']);
});

t.test('offers narrows the modalities for an upstream without some endpoints (no Responses API)', async (t) => {
  const narrowed = provider({ offers: ['language', 'embeddings'] });
  t.same(modalitiesOf(narrowed), ['language', 'embeddings']);
  t.equal(narrowed.responses, undefined);
});

t.test('offers accepts only known modalities, at least one', async (t) => {
  const parse = (offers: unknown) => openAIProviderType.configSchema.safeParse({ baseUrl: fake.baseUrl, offers }).success;
  t.equal(parse(['language', 'moderation']), false);
  t.equal(parse([]), false);
  t.equal(parse(['responses']), true);
});

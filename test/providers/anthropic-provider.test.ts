import t from 'tap';
import { modalitiesOf, type ChatRequestBody, type Provider } from '../../core/gateway/provider.ts';
import { anthropicProviderType } from '../../providers/anthropic/index.ts';
import { createProviderContext } from '../../providers/provider-context.ts';
import { callOptions as options, chunksOf, collect, failure } from './provider-test-kit.ts';
import { startFakeAnthropicUpstream, type FakeAnthropicUpstream } from '../fakes/fake-anthropic-upstream.ts';

const API_KEY = 'sk-ant-test-key-0123456789abcdef';
const context = createProviderContext({ timeouts: { connectMs: 300, firstByteMs: 300, totalMs: 2000 } });

let fake: FakeAnthropicUpstream;
t.before(async () => {
  fake = await startFakeAnthropicUpstream();
});
t.teardown(() => fake.close());
t.beforeEach(() => fake.reset());

function provider(config: Record<string, unknown> = {}): Provider {
  const created = anthropicProviderType.create(
    'anthropic-test',
    anthropicProviderType.configSchema.parse({ baseUrl: fake.url, apiKey: API_KEY, allowPrivateNetwork: true, ...config }),
    context,
  );
  t.teardown(() => created.close?.());
  return created;
}

const body = (extra: Partial<ChatRequestBody> = {}): ChatRequestBody => ({
  model: 'claude-test',
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Say hello' },
  ],
  ...extra,
});
const weatherTool = { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } };

t.test('non-stream chat converts the request and the answer', async (t) => {
  fake.enqueue({ kind: 'reply', content: 'Hello!', usage: { input_tokens: 10, output_tokens: 3 } });
  const result = await provider().language!.chat(body({ max_tokens: 50 }), options());
  const sent = fake.requests[0]?.body;
  t.equal(fake.requests[0]?.path, '/v1/messages');
  t.same(sent.system, [{ type: 'text', text: 'Be brief.' }]);
  t.same(sent.messages, [{ role: 'user', content: [{ type: 'text', text: 'Say hello' }] }]);
  t.equal(sent.max_tokens, 50);
  t.notOk('stream' in sent);
  t.equal(result.completion.object, 'chat.completion');
  t.equal(result.completion.choices[0]?.message.content, 'Hello!');
  t.equal(result.completion.choices[0]?.finish_reason, 'stop');
  t.same(result.usage, { inputTokens: 10, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 3, reasoningTokens: 0, estimated: false });
});

t.test('sends x-api-key, anthropic-version and configured headers, never a bearer token', async (t) => {
  await provider({ headers: { 'anthropic-beta': 'prompt-caching-2024-07-31' } }).language!.chat(body(), options());
  const headers = fake.requests[0]?.headers ?? {};
  t.equal(headers['x-api-key'], API_KEY);
  t.equal(headers['anthropic-version'], '2023-06-01');
  t.equal(headers['anthropic-beta'], 'prompt-caching-2024-07-31');
  t.notOk(headers['authorization']);
});

t.test('the configured version is sent', async (t) => {
  await provider({ version: '2099-01-01' }).language!.chat(body(), options());
  t.equal(fake.requests[0]?.headers['anthropic-version'], '2099-01-01');
});

t.test('a base URL ending in /v1 is not doubled', async (t) => {
  await provider({ baseUrl: `${fake.url}/v1` }).language!.chat(body(), options());
  t.equal(fake.requests[0]?.path, '/v1/messages');
});

t.test('the default max_tokens applies when the request names none', async (t) => {
  await provider({ defaultMaxTokens: 777 }).language!.chat(body(), options());
  t.equal(fake.requests[0]?.body.max_tokens, 777);
});

t.test('cache reads and writes are included in input tokens and named apart', async (t) => {
  fake.enqueue({ kind: 'reply', usage: { input_tokens: 4, output_tokens: 8, cache_read_input_tokens: 1000, cache_creation_input_tokens: 200 } });
  const result = await provider().language!.chat(body(), options());
  t.same(result.usage, { inputTokens: 1204, cachedInputTokens: 1000, cacheWriteTokens: 200, outputTokens: 8, reasoningTokens: 0, estimated: false });
  t.match(result.completion.usage, { prompt_tokens: 1204, prompt_tokens_details: { cached_tokens: 1000 } });
});

t.test('tools go out as input_schema tools and tool_use comes back as tool_calls', async (t) => {
  fake.enqueue({ kind: 'reply', toolCalls: [{ id: 'toolu_1', name: 'get_weather', input: { city: 'Oslo' } }] });
  const result = await provider().language!.chat(body({ tools: [weatherTool], tool_choice: 'required' }), options());
  const sent = fake.requests[0]?.body;
  t.same(sent.tools, [{ name: 'get_weather', input_schema: weatherTool.function.parameters }]);
  t.same(sent.tool_choice, { type: 'any' });
  const choice = result.completion.choices[0];
  t.equal(choice?.finish_reason, 'tool_calls');
  t.equal(choice?.message.content, null);
  t.same(choice?.message.tool_calls, [{ id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }]);
});

t.test('a tool round trip sends tool_use and tool_result blocks', async (t) => {
  await provider().language!.chat(
    body({
      messages: [
        { role: 'user', content: 'Weather?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
        { role: 'tool', tool_call_id: 'toolu_1', content: 'Sunny' },
      ],
      tools: [weatherTool],
    }),
    options(),
  );
  t.same(fake.requests[0]?.body.messages.slice(1), [
    { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Oslo' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'Sunny' }] },
  ]);
});

t.test('images are sent as base64 and url sources', async (t) => {
  await provider().language!.chat(
    body({
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image_url', image_url: { url: 'data:image/jpeg;base64,/9j/4AAQ' } },
            { type: 'image_url', image_url: { url: 'https://example.com/a.png' } },
            { type: 'text', text: 'Compare' },
          ],
        },
      ],
    }),
    options(),
  );
  t.same(fake.requests[0]?.body.messages[0].content, [
    { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: '/9j/4AAQ' } },
    { type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } },
    { type: 'text', text: 'Compare' },
  ]);
});

t.test('a request that cannot be converted fails as a client error without calling upstream', async (t) => {
  const error = await failure(() => provider().language!.chat(body({ messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: {} }] }] }), options()));
  t.equal(error.kind, 'client');
  t.equal(fake.requests.length, 0);
});

t.test('stream converts text events into chunks, then usage', async (t) => {
  fake.enqueue({ kind: 'reply', content: 'Hello there friend', usage: { input_tokens: 9, output_tokens: 4, cache_read_input_tokens: 5 } });
  const events = await collect(provider().language!.chatStream(body(), options()));
  const chunks = chunksOf(events);
  t.equal(fake.requests[0]?.body.stream, true);
  t.same(chunks[0]?.choices[0]?.delta, { role: 'assistant', content: '', refusal: null });
  t.equal(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join(''), 'Hello there friend');
  t.equal(chunks.at(-1)?.choices[0]?.finish_reason, 'stop');
  t.ok(chunks.every((chunk) => chunk.object === 'chat.completion.chunk' && chunk.id.startsWith('msg_fake_')));
  t.same(events.at(-1), { type: 'usage', usage: { inputTokens: 14, cachedInputTokens: 5, cacheWriteTokens: 0, outputTokens: 4, reasoningTokens: 0, estimated: false } });
});

t.test('stream converts tool_use blocks into tool-call deltas', async (t) => {
  fake.enqueue({
    kind: 'reply',
    content: 'Checking.',
    toolCalls: [
      { id: 'toolu_a', name: 'get_weather', input: { city: 'Oslo' } },
      { id: 'toolu_b', name: 'get_time', input: { tz: 'CET' } },
    ],
  });
  const chunks = chunksOf(await collect(provider().language!.chatStream(body({ tools: [weatherTool] }), options())));
  const calls = chunks.flatMap((chunk) => (chunk.choices[0]?.delta.tool_calls as any[]) ?? []);
  const starts = calls.filter((call) => call.id);
  t.same(starts, [
    { index: 0, id: 'toolu_a', type: 'function', function: { name: 'get_weather', arguments: '' } },
    { index: 1, id: 'toolu_b', type: 'function', function: { name: 'get_time', arguments: '' } },
  ]);
  const args = (index: number) =>
    calls
      .filter((call) => call.index === index)
      .map((call) => call.function.arguments)
      .join('');
  t.equal(args(0), '{"city":"Oslo"}');
  t.equal(args(1), '{"tz":"CET"}');
  t.equal(chunks.at(-1)?.choices[0]?.finish_reason, 'tool_calls');
});

t.test('stream passes thinking as reasoning_content', async (t) => {
  fake.enqueue({ kind: 'reply', thinking: 'Let me think.', content: 'Done.' });
  const chunks = chunksOf(await collect(provider().language!.chatStream(body(), options())));
  t.equal(chunks.map((chunk) => chunk.choices[0]?.delta['reasoning_content'] ?? '').join(''), 'Let me think.');
});

t.test('stream estimates usage when the upstream reports none', async (t) => {
  fake.enqueue({ kind: 'reply', content: 'abcdefgh', usage: false });
  const events = await collect(provider().language!.chatStream(body(), options()));
  const last = events.at(-1);
  t.equal(last?.type, 'usage');
  if (last?.type !== 'usage') return;
  t.equal(last.usage.estimated, true);
  t.equal(last.usage.outputTokens, 2);
});

t.test('an overloaded_error event mid-stream is a retryable server error', async (t) => {
  fake.enqueue({ kind: 'stream-error', afterEvents: 4 });
  const error = await failure(() => collect(provider().language!.chatStream(body(), options())));
  t.equal(error.kind, 'server');
  t.equal(error.retryable, true);
  t.match(error.message, 'Overloaded');
  t.match(error.upstreamBody, { error: { type: 'overloaded_error' } });
});

t.test('a rate_limit_error event mid-stream is rate_limited', async (t) => {
  fake.enqueue({ kind: 'stream-error', afterEvents: 2, error: { type: 'rate_limit_error', message: 'slow down' } });
  const error = await failure(() => collect(provider().language!.chatStream(body(), options())));
  t.equal(error.kind, 'rate_limited');
});

t.test('a stream cut mid-way fails as a server error', async (t) => {
  fake.enqueue({ kind: 'stream-cut', afterEvents: 4 });
  const error = await failure(() => collect(provider().language!.chatStream(body(), options())));
  t.equal(error.kind, 'server');
});

t.test('status codes map to kinds, 529 overloaded included', async (t) => {
  const p = provider();
  for (const [status, kind] of [
    [400, 'client'],
    [401, 'auth'],
    [403, 'auth'],
    [404, 'client'],
    [429, 'rate_limited'],
    [500, 'server'],
    [529, 'server'],
  ] as const) {
    fake.enqueue({ kind: 'status', status, retryAfter: status === 429 ? '4' : undefined });
    const error = await failure(() => p.language!.chat(body(), options()));
    t.equal(error.kind, kind, `status ${status}`);
    if (status === 429) t.equal(error.retryAfterMs, 4000);
  }
});

t.test('reset maps to connect and a hang times out', async (t) => {
  fake.enqueue({ kind: 'reset' }, { kind: 'hang' });
  const p = provider();
  t.equal((await failure(() => p.language!.chat(body(), options()))).kind, 'connect');
  t.equal((await failure(() => p.language!.chat(body(), options()))).kind, 'timeout');
});

t.test('aborting mid-stream stops the upstream call', async (t) => {
  fake.enqueue({ kind: 'reply', content: 'a b c d e f g h i j k l', chunkDelayMs: 25 });
  const controller = new AbortController();
  let chunks = 0;
  const error = await failure(async () => {
    for await (const event of provider().language!.chatStream(body(), options(controller.signal))) {
      if (event.type === 'chunk' && ++chunks === 2) controller.abort();
    }
  });
  t.equal(error.kind, 'aborted');
  t.equal(await fake.requests[0]?.outcome, 'closed');
});

t.test('the API key never appears in error messages', async (t) => {
  fake.enqueue({ kind: 'status', status: 401, message: `invalid x-api-key ${API_KEY}` });
  const error = await failure(() => provider().language!.chat(body(), options()));
  t.equal(error.kind, 'auth');
  t.notMatch(error.message, API_KEY);
  t.notMatch(JSON.stringify(error.upstreamBody), API_KEY);
});

t.test('declares chat and stream', async (t) => {
  t.same(modalitiesOf(provider()), ['language']);
});

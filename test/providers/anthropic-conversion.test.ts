import t from 'tap';
import type { ChatRequestBody } from '../../core/gateway/provider.ts';
import { toAnthropicRequest, UnconvertibleRequestError } from '../../providers/anthropic/request-conversion.ts';
import { fromAnthropicMessage } from '../../providers/anthropic/response-conversion.ts';
import { AnthropicStreamTranslator } from '../../providers/anthropic/stream-translator.ts';

const convert = (body: Partial<ChatRequestBody>) => toAnthropicRequest({ model: 'claude-test', messages: [], ...body }, 4096) as any;

t.test('system and developer messages become the system blocks', async (t) => {
  const request = convert({
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'developer', content: [{ type: 'text', text: 'Answer in English.', cache_control: { type: 'ephemeral' } }] },
      { role: 'user', content: 'Hi' },
    ],
  });
  t.same(request.system, [
    { type: 'text', text: 'Be brief.' },
    { type: 'text', text: 'Answer in English.', cache_control: { type: 'ephemeral' } },
  ]);
  t.same(request.messages, [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }]);
});

t.test('multi-turn conversations keep their order and roles', async (t) => {
  const request = convert({
    messages: [
      { role: 'user', content: 'One' },
      { role: 'assistant', content: 'Two' },
      { role: 'user', content: 'Three' },
    ],
  });
  t.same(
    request.messages.map((m: any) => [m.role, m.content[0].text]),
    [
      ['user', 'One'],
      ['assistant', 'Two'],
      ['user', 'Three'],
    ],
  );
});

t.test('consecutive messages of the same role are merged into one turn', async (t) => {
  const request = convert({
    messages: [
      { role: 'user', content: 'a' },
      { role: 'user', content: 'b' },
      { role: 'assistant', content: 'c' },
    ],
  });
  t.same(request.messages, [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'a' },
        { type: 'text', text: 'b' },
      ],
    },
    { role: 'assistant', content: [{ type: 'text', text: 'c' }] },
  ]);
});

t.test('a data-URL image becomes a base64 source', async (t) => {
  const request = convert({
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is this?' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
        ],
      },
    ],
  });
  t.same(request.messages[0].content[1], { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } });
});

t.test('an http image URL becomes a url source', async (t) => {
  const request = convert({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/cat.jpg', detail: 'high' } }] }] });
  t.same(request.messages[0].content[0], { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } });
});

t.test('an image URL of another scheme is refused as the caller’s error', async (t) => {
  t.throws(() => convert({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'file:///etc/passwd' } }] }] }), UnconvertibleRequestError);
});

t.test('an inline PDF file becomes a document block', async (t) => {
  const request = convert({ messages: [{ role: 'user', content: [{ type: 'file', file: { file_data: 'data:application/pdf;base64,JVBERi0=', filename: 'a.pdf' } }] }] });
  t.same(request.messages[0].content[0], { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' }, title: 'a.pdf' });
});

t.test('function tools become input_schema tools', async (t) => {
  const parameters = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
  const request = convert({
    tools: [
      { type: 'function', function: { name: 'get_weather', description: 'Weather now', parameters } },
      { type: 'function', function: { name: 'ping' } },
    ],
  });
  t.same(request.tools, [
    { name: 'get_weather', description: 'Weather now', input_schema: parameters },
    { name: 'ping', input_schema: { type: 'object', properties: {} } },
  ]);
});

t.test('tool_choice auto, none, required and named map to auto, none, any and tool', async (t) => {
  const tools = [{ type: 'function', function: { name: 'f' } }];
  t.same(convert({ tools, tool_choice: 'auto' }).tool_choice, { type: 'auto' });
  t.same(convert({ tools, tool_choice: 'none' }).tool_choice, { type: 'none' });
  t.same(convert({ tools, tool_choice: 'required' }).tool_choice, { type: 'any' });
  t.same(convert({ tools, tool_choice: { type: 'function', function: { name: 'f' } } }).tool_choice, { type: 'tool', name: 'f' });
  t.notOk('tool_choice' in convert({ tools }));
});

t.test('parallel_tool_calls false disables parallel tool use', async (t) => {
  const tools = [{ type: 'function', function: { name: 'f' } }];
  t.same(convert({ tools, parallel_tool_calls: false }).tool_choice, { type: 'auto', disable_parallel_tool_use: true });
  t.same(convert({ tools, tool_choice: 'required', parallel_tool_calls: false }).tool_choice, { type: 'any', disable_parallel_tool_use: true });
});

t.test('assistant tool_calls become tool_use blocks and tool messages become tool_result blocks in one user turn', async (t) => {
  const request = convert({
    messages: [
      { role: 'user', content: 'Weather in Oslo and Rome?' },
      {
        role: 'assistant',
        content: 'Checking.',
        tool_calls: [
          { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
          { id: 'call_b', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_a', content: '3°C' },
      { role: 'tool', tool_call_id: 'call_b', content: [{ type: 'text', text: '18°C' }] },
      { role: 'user', content: 'Thanks' },
    ],
  });
  t.same(request.messages, [
    { role: 'user', content: [{ type: 'text', text: 'Weather in Oslo and Rome?' }] },
    {
      role: 'assistant',
      content: [
        { type: 'text', text: 'Checking.' },
        { type: 'tool_use', id: 'call_a', name: 'get_weather', input: { city: 'Oslo' } },
        { type: 'tool_use', id: 'call_b', name: 'get_weather', input: { city: 'Rome' } },
      ],
    },
    {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'call_a', content: '3°C' },
        { type: 'tool_result', tool_use_id: 'call_b', content: [{ type: 'text', text: '18°C' }] },
        { type: 'text', text: 'Thanks' },
      ],
    },
  ]);
});

t.test('an assistant turn with only tool calls has no empty text block', async (t) => {
  const request = convert({
    messages: [
      { role: 'user', content: 'x' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '' } }] },
    ],
  });
  t.same(request.messages[1].content, [{ type: 'tool_use', id: 'c', name: 'f', input: {} }]);
});

t.test('tool call arguments that are not JSON are refused', async (t) => {
  t.throws(
    () => convert({ messages: [{ role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{oops' } }] }] }),
    UnconvertibleRequestError,
  );
});

t.test('stop, temperature, top_p and max tokens are carried over', async (t) => {
  const request = convert({ stop: ['END', ''], temperature: 0.3, top_p: 0.9, max_tokens: 100 });
  t.same(request.stop_sequences, ['END']);
  t.equal(request.temperature, 0.3);
  t.equal(request.top_p, 0.9);
  t.equal(request.max_tokens, 100);
  t.same(convert({ stop: 'STOP' }).stop_sequences, ['STOP']);
});

t.test('max_completion_tokens wins over max_tokens, and the default applies when neither is set', async (t) => {
  t.equal(convert({ max_tokens: 100, max_completion_tokens: 50 }).max_tokens, 50);
  t.equal(convert({}).max_tokens, 4096);
});

t.test('OpenAI-only fields are dropped and user becomes metadata.user_id', async (t) => {
  const request = convert({ frequency_penalty: 1, n: 1, logprobs: true, user: 'u-1', top_k: 5 });
  t.notOk('frequency_penalty' in request);
  t.notOk('logprobs' in request);
  t.same(request.metadata, { user_id: 'u-1' });
  t.equal(request.top_k, 5);
});

t.test('a message with text and tool_use converts back to content and tool_calls', async (t) => {
  const { completion, usage } = fromAnthropicMessage(
    {
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      model: 'claude-test',
      content: [
        { type: 'text', text: 'Let me check.' },
        { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Oslo' } },
      ],
      stop_reason: 'tool_use',
      usage: { input_tokens: 10, output_tokens: 20, cache_read_input_tokens: 100, cache_creation_input_tokens: 5 },
    },
    1700000000,
  );
  const choice = completion.choices[0];
  t.equal(choice?.message.content, 'Let me check.');
  t.equal(choice?.message['refusal'], null, 'refusal is present, null, as OpenAI’s reference requires');
  t.same(choice?.message.tool_calls, [{ id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }]);
  t.equal(choice?.finish_reason, 'tool_calls');
  t.same(usage, { inputTokens: 115, cachedInputTokens: 100, cacheWriteTokens: 5, outputTokens: 20, reasoningTokens: 0, estimated: false });
  t.match(completion.usage, { prompt_tokens: 115, completion_tokens: 20, total_tokens: 135, prompt_tokens_details: { cached_tokens: 100 } });
});

t.test('stop reasons map to finish reasons', async (t) => {
  const finish = (stop: string) => fromAnthropicMessage({ id: 'm', type: 'message', role: 'assistant', model: 'c', content: [], stop_reason: stop }, 0).completion.choices[0]?.finish_reason;
  t.equal(finish('end_turn'), 'stop');
  t.equal(finish('stop_sequence'), 'stop');
  t.equal(finish('max_tokens'), 'length');
  t.equal(finish('tool_use'), 'tool_calls');
  t.equal(finish('refusal'), 'content_filter');
});

t.test('the stream translator numbers tool calls apart from content blocks', async (t) => {
  const translator = new AnthropicStreamTranslator('claude-test');
  const chunks = [
    { type: 'message_start', message: { id: 'msg_s', model: 'claude-test', usage: { input_tokens: 7, output_tokens: 1, cache_read_input_tokens: 3 } } },
    { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
    { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } },
    { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'toolu_x', name: 'f' } },
    { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"a":' } },
    { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '1}' } },
    { type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 12 } },
    { type: 'message_stop' },
  ].flatMap((event) => translator.translate(event));
  t.same(
    chunks.map((chunk) => chunk.choices[0]?.delta),
    [
      { role: 'assistant', content: '', refusal: null },
      { content: 'Hi' },
      { tool_calls: [{ index: 0, id: 'toolu_x', type: 'function', function: { name: 'f', arguments: '' } }] },
      { tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] },
      { tool_calls: [{ index: 0, function: { arguments: '1}' } }] },
      {},
    ],
  );
  t.equal(chunks.at(-1)?.choices[0]?.finish_reason, 'tool_calls');
  t.ok(chunks.every((chunk) => chunk.id === 'msg_s'));
  t.same(translator.usage(), { inputTokens: 10, cachedInputTokens: 3, cacheWriteTokens: 0, outputTokens: 12, reasoningTokens: 0, estimated: false });
});

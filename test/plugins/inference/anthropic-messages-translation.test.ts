import t from 'tap';
import type { ChatCompletion, ChatCompletionChunk, ChatStreamEvent, Usage } from '../../../core/gateway/provider.ts';
import { ApiError } from '../../../core/kernel/errors.ts';
import { anthropicErrorBody, anthropicErrorType } from '../../../plugins/inference/anthropic-messages/messages-errors.ts';
import { parseMessagesRequest } from '../../../plugins/inference/anthropic-messages/messages-request.ts';
import { toAnthropicMessage } from '../../../plugins/inference/anthropic-messages/messages-response.ts';
// Catalogues model_not_found, which the error shape is shown on.
import '../../../plugins/inference/inference-errors.ts';
import { MessageStreamEncoder, type AnthropicStreamEvent, type StreamTranslation } from '../../../plugins/inference/anthropic-messages/messages-stream.ts';

const PNG_BASE64 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

function refusal(body: unknown): ApiError {
  try {
    parseMessagesRequest(body);
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  throw new Error('the request was accepted');
}

const usage = (over: Partial<Usage> = {}): Usage => ({
  inputTokens: 20,
  cachedInputTokens: 0,
  cacheWriteTokens: 0,
  outputTokens: 5,
  reasoningTokens: 0,
  estimated: false,
  ...over,
});

function completion(message: ChatCompletion['choices'][0]['message'], finishReason: string | null, choice: Record<string, unknown> = {}): ChatCompletion {
  return {
    id: 'chatcmpl-abc123',
    object: 'chat.completion',
    created: 1_760_000_000,
    model: 'gpt-4o-2024-08-06',
    choices: [{ index: 0, message, finish_reason: finishReason, logprobs: null, ...choice }],
  };
}

t.test('request translation', async (t) => {
  t.test('a text conversation with a system prompt becomes chat messages with the same limits', async (t) => {
    const { chat } = parseMessagesRequest({
      model: 'duo',
      max_tokens: 256,
      system: 'You are terse.',
      messages: [
        { role: 'user', content: 'Hello' },
        { role: 'assistant', content: [{ type: 'text', text: 'Hi.' }] },
        { role: 'user', content: [{ type: 'text', text: 'Name a colour.' }] },
      ],
      temperature: 0.2,
      top_p: 0.9,
      stop_sequences: ['\n\nHuman:', 'END'],
      metadata: { user_id: 'user-42' },
    });
    t.same(chat, {
      model: 'duo',
      max_tokens: 256,
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Hello' },
        { role: 'assistant', content: 'Hi.' },
        { role: 'user', content: [{ type: 'text', text: 'Name a colour.' }] },
      ],
      temperature: 0.2,
      top_p: 0.9,
      stop: ['\n\nHuman:', 'END'],
      user: 'user-42',
    });
  });

  t.test('system text blocks become the system message parts', async (t) => {
    const { chat } = parseMessagesRequest({
      model: 'm',
      max_tokens: 1,
      system: [
        { type: 'text', text: 'One.' },
        { type: 'text', text: 'Two.' },
      ],
      messages: [],
    });
    t.same(chat.messages[0], {
      role: 'system',
      content: [
        { type: 'text', text: 'One.' },
        { type: 'text', text: 'Two.' },
      ],
    });
  });

  t.test('base64 and url images become image_url parts', async (t) => {
    const { chat } = parseMessagesRequest({
      model: 'm',
      max_tokens: 10,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG_BASE64 } },
            { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
            { type: 'text', text: 'Compare these.' },
          ],
        },
      ],
    });
    t.same(chat.messages[0]?.content, [
      { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG_BASE64}` } },
      { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } },
      { type: 'text', text: 'Compare these.' },
    ]);
  });

  t.test('a base64 PDF document becomes an inline file, a text document its text', async (t) => {
    const { chat } = parseMessagesRequest({
      model: 'm',
      max_tokens: 10,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'document', title: 'report.pdf', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0xLjQK' } },
            { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'plain notes' } },
          ],
        },
      ],
    });
    t.same(chat.messages[0]?.content, [
      { type: 'file', file: { file_data: 'data:application/pdf;base64,JVBERi0xLjQK', filename: 'report.pdf' } },
      { type: 'text', text: 'plain notes' },
    ]);
  });

  t.test('tools, a tool use and its result round-trip as function tools, tool calls and tool messages', async (t) => {
    const { chat } = parseMessagesRequest({
      model: 'm',
      max_tokens: 100,
      tools: [{ name: 'get_weather', description: 'Weather by city', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }],
      tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true },
      messages: [
        { role: 'user', content: 'Weather in Oslo and Lima?' },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Checking.' },
            { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Oslo' } },
            { type: 'tool_use', id: 'toolu_02', name: 'get_weather', input: { city: 'Lima' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_01', content: '4°C, rain' },
            { type: 'tool_result', tool_use_id: 'toolu_02', content: [{ type: 'text', text: 'unknown city' }], is_error: true },
            { type: 'text', text: 'Summarise.' },
          ],
        },
      ],
    });
    t.same(chat.tools, [
      {
        type: 'function',
        function: { name: 'get_weather', description: 'Weather by city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
      },
    ]);
    t.same(chat['tool_choice'], { type: 'function', function: { name: 'get_weather' } });
    t.equal(chat['parallel_tool_calls'], false);
    t.same(chat.messages.slice(1), [
      {
        role: 'assistant',
        content: 'Checking.',
        tool_calls: [
          { id: 'toolu_01', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
          { id: 'toolu_02', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Lima"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'toolu_01', content: '4°C, rain' },
      { role: 'tool', tool_call_id: 'toolu_02', content: 'Error: unknown city' },
      { role: 'user', content: [{ type: 'text', text: 'Summarise.' }] },
    ]);
  });

  t.test('tool_choice any and none become required and none', async (t) => {
    const tools = [{ name: 'f', input_schema: { type: 'object' } }];
    t.equal(parseMessagesRequest({ model: 'm', max_tokens: 1, messages: [], tools, tool_choice: { type: 'any' } }).chat['tool_choice'], 'required');
    t.equal(parseMessagesRequest({ model: 'm', max_tokens: 1, messages: [], tools, tool_choice: { type: 'none' } }).chat['tool_choice'], 'none');
  });

  t.test('top_k passes on as a chat field and stream is kept', async (t) => {
    const { chat } = parseMessagesRequest({ model: 'm', max_tokens: 1, messages: [], top_k: 40, stream: true });
    t.equal(chat['top_k'], 40);
    t.equal(chat.stream, true);
  });

  t.test('thinking turned off is accepted, and earlier thinking blocks are not replayed', async (t) => {
    const { chat } = parseMessagesRequest({
      model: 'm',
      max_tokens: 1,
      thinking: { type: 'disabled' },
      messages: [
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'hmm', signature: 'sig' },
            { type: 'text', text: 'Done.' },
          ],
        },
      ],
    });
    t.same(chat.messages, [{ role: 'assistant', content: 'Done.' }]);
  });
});

t.test('request refusals name the field', async (t) => {
  const cases: Array<[string, unknown, string]> = [
    ['max_tokens is required', { model: 'm', messages: [] }, 'max_tokens'],
    ['model is required', { max_tokens: 1, messages: [] }, 'model'],
    ['a message role other than user or assistant', { model: 'm', max_tokens: 1, messages: [{ role: 'system', content: 'x' }] }, 'messages[0].role'],
    ['an unknown top-level field', { model: 'm', max_tokens: 1, messages: [], service_tier: 'auto' }, 'service_tier'],
    ['temperature above Anthropic’s 1', { model: 'm', max_tokens: 1, messages: [], temperature: 1.5 }, 'temperature'],
    ['extended thinking', { model: 'm', max_tokens: 2000, messages: [], thinking: { type: 'enabled', budget_tokens: 1024 } }, 'thinking'],
    ['a server tool', { model: 'm', max_tokens: 1, messages: [], tools: [{ type: 'web_search_20250305', name: 'web_search' }] }, 'tools[0].type'],
    ['a tool without input_schema', { model: 'm', max_tokens: 1, messages: [], tools: [{ name: 'f' }] }, 'tools[0].input_schema'],
    ['a tool choice of type tool without a name', { model: 'm', max_tokens: 1, messages: [], tools: [{ name: 'f', input_schema: {} }], tool_choice: { type: 'tool' } }, 'tool_choice.name'],
    [
      'an image from a file id',
      { model: 'm', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'file', file_id: 'file_1' } }] }] },
      'messages[0].content[0].source.type',
    ],
    ['a text block without text', { model: 'm', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'text' }] }] }, 'messages[0].content[0].text'],
    [
      'an image inside a tool result',
      {
        model: 'm',
        max_tokens: 1,
        messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: [{ type: 'image', source: { type: 'url', url: 'https://x/y.png' } }] }] }],
      },
      'messages[0].content[0].content[0]',
    ],
  ];
  for (const [name, body, param] of cases) {
    t.test(name, async (t) => {
      const error = refusal(body);
      t.equal(error.status, 400);
      t.equal(error.param, param);
      t.same(anthropicErrorBody(error), { type: 'error', error: { type: 'invalid_request_error', message: error.message } });
    });
  }
});

t.test('response translation', async (t) => {
  t.test('a text answer becomes a message with msg_ id, the public model and Anthropic usage', async (t) => {
    const message = toAnthropicMessage(completion({ role: 'assistant', content: 'Blue.' }, 'stop'), usage(), 'duo', []);
    t.same(message, {
      id: 'msg_chatcmpl-abc123',
      type: 'message',
      role: 'assistant',
      model: 'duo',
      content: [{ type: 'text', text: 'Blue.', citations: null }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      container: null,
      stop_details: null,
      diagnostics: null,
      usage: {
        input_tokens: 20,
        output_tokens: 5,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0,
        output_tokens_details: null,
        server_tool_use: null,
        cache_creation: null,
        inference_geo: null,
        service_tier: null,
        speed: null,
      },
    });
  });

  t.test('input_tokens exclude cache reads and writes, which are named apart', async (t) => {
    const message = toAnthropicMessage(
      completion({ role: 'assistant', content: 'x' }, 'stop'),
      usage({ inputTokens: 1_300, cachedInputTokens: 1_000, cacheWriteTokens: 200, outputTokens: 7 }),
      'claude',
      [],
    );
    t.match(message.usage, { input_tokens: 100, output_tokens: 7, cache_creation_input_tokens: 200, cache_read_input_tokens: 1_000 });
  });

  t.test('tool calls become tool_use blocks with parsed input and stop_reason tool_use', async (t) => {
    const message = toAnthropicMessage(
      completion(
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
            { id: 'call_2', type: 'function', function: { name: 'now', arguments: '' } },
          ],
        },
        'tool_calls',
      ),
      usage(),
      'duo',
      [],
    );
    t.same(message.content, [
      { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Oslo' }, caller: { type: 'direct' } },
      { type: 'tool_use', id: 'call_2', name: 'now', input: {}, caller: { type: 'direct' } },
    ]);
    t.equal(message.stop_reason, 'tool_use');
  });

  t.test('length is max_tokens, content_filter is refusal', async (t) => {
    t.equal(toAnthropicMessage(completion({ role: 'assistant', content: 'cut' }, 'length'), usage(), 'm', []).stop_reason, 'max_tokens');
    t.equal(toAnthropicMessage(completion({ role: 'assistant', content: '' }, 'content_filter'), usage(), 'm', []).stop_reason, 'refusal');
  });

  t.test('a matched stop sequence the upstream reports is stop_sequence with the sequence', async (t) => {
    const stopped = completion({ role: 'assistant', content: 'one, two' }, 'stop', { stop_reason: 'END' });
    const message = toAnthropicMessage(stopped, usage(), 'm', ['END']);
    t.equal(message.stop_reason, 'stop_sequence');
    t.equal(message.stop_sequence, 'END');
    t.equal(toAnthropicMessage(stopped, usage(), 'm', []).stop_reason, 'end_turn', 'a sequence the caller did not ask for is no stop sequence');
  });

  t.test('a refusal is answered as its text with stop_reason refusal', async (t) => {
    const message = toAnthropicMessage(completion({ role: 'assistant', content: null, refusal: 'I cannot help with that.' }, 'stop'), usage(), 'm', []);
    t.same(message.content, [{ type: 'text', text: 'I cannot help with that.', citations: null }]);
    t.equal(message.stop_reason, 'refusal');
  });
});

function chunk(delta: Record<string, unknown>, finishReason: string | null = null): ChatStreamEvent {
  const value: ChatCompletionChunk = {
    id: 'chatcmpl-s1',
    object: 'chat.completion.chunk',
    created: 1_760_000_000,
    model: 'up-model',
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  };
  return { type: 'chunk', chunk: value };
}

/** The events a whole chat stream becomes, as the route's stream writer emits them. */
function translate(events: ChatStreamEvent[], translation: StreamTranslation): AnthropicStreamEvent[] {
  const encoder = new MessageStreamEncoder(translation);
  return [...events.flatMap((event) => [...encoder.push(event)]), ...encoder.finish()];
}

t.test('stream translation', async (t) => {
  t.test('a text stream is Anthropic’s exact event sequence, usage at the end', async (t) => {
    const events = translate(
      [
        chunk({ role: 'assistant', content: '' }),
        chunk({ content: 'Hello' }),
        chunk({ content: ' there' }),
        chunk({}, 'stop'),
        { type: 'usage', usage: usage({ inputTokens: 30, cachedInputTokens: 10, outputTokens: 2 }) },
      ],
      { model: 'duo', stopSequences: [], inputTokens: 31 },
    );
    t.same(
      events.map((e) => e.event),
      ['message_start', 'ping', 'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'],
    );
    t.same(events[0]?.data, {
      type: 'message_start',
      message: {
        id: 'msg_chatcmpl-s1',
        type: 'message',
        role: 'assistant',
        model: 'duo',
        content: [],
        stop_reason: null,
        stop_sequence: null,
        container: null,
        stop_details: null,
        diagnostics: null,
        usage: {
          input_tokens: 31,
          output_tokens: 0,
          cache_creation_input_tokens: 0,
          cache_read_input_tokens: 0,
          output_tokens_details: null,
          server_tool_use: null,
          cache_creation: null,
          inference_geo: null,
          service_tier: null,
          speed: null,
        },
      },
    });
    t.same(events[2]?.data, { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '', citations: null } });
    t.same(events[3]?.data, { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello' } });
    t.same(events[5]?.data, { type: 'content_block_stop', index: 0 });
    t.same(events[6]?.data, {
      type: 'message_delta',
      delta: { stop_reason: 'end_turn', stop_sequence: null, container: null, stop_details: null },
      usage: { input_tokens: 20, output_tokens: 2, cache_creation_input_tokens: 0, cache_read_input_tokens: 10, output_tokens_details: null, server_tool_use: null },
    });
    t.same(events[7]?.data, { type: 'message_stop' });
  });

  t.test('text then two tool calls are three blocks, arguments as input_json_delta', async (t) => {
    const events = translate(
      [
        chunk({ role: 'assistant', content: 'Let me check.' }),
        chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }),
        chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'now', arguments: '{}' } }] }),
        chunk({}, 'tool_calls'),
        { type: 'usage', usage: usage() },
      ],
      { model: 'duo', stopSequences: [] },
    );
    const blocks = events.filter((e) => e.event.startsWith('content_block')).map((e) => e.data);
    t.same(blocks, [
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '', citations: null } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Let me check.' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'call_a', name: 'get_weather', input: {}, caller: { type: 'direct' } } },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"city":' } },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '"Oslo"}' } },
      { type: 'content_block_stop', index: 1 },
      { type: 'content_block_start', index: 2, content_block: { type: 'tool_use', id: 'call_b', name: 'now', input: {}, caller: { type: 'direct' } } },
      { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '{}' } },
      { type: 'content_block_stop', index: 2 },
    ]);
    t.match(events.at(-2)?.data['delta'], { stop_reason: 'tool_use', stop_sequence: null });
  });

  t.test('a stream that ends with no content still starts and stops its message', async (t) => {
    const events = translate([chunk({}, 'length')], { model: 'm', stopSequences: [] });
    t.same(
      events.map((e) => e.event),
      ['message_start', 'ping', 'message_delta', 'message_stop'],
    );
    t.match(events[2]?.data['delta'], { stop_reason: 'max_tokens', stop_sequence: null });
  });
});

t.test('gateway errors map to Anthropic error types by status', async (t) => {
  const expected: Array<[number, string]> = [
    [400, 'invalid_request_error'],
    [401, 'authentication_error'],
    [402, 'billing_error'],
    [403, 'permission_error'],
    [404, 'not_found_error'],
    [413, 'request_too_large'],
    [422, 'invalid_request_error'],
    [429, 'rate_limit_error'],
    [500, 'api_error'],
    [502, 'api_error'],
    [503, 'overloaded_error'],
    [504, 'timeout_error'],
    [529, 'overloaded_error'],
  ];
  t.same(
    expected.map(([status]) => [status, anthropicErrorType(status)]),
    expected,
  );
  t.same(anthropicErrorBody(new ApiError('model_not_found')), {
    type: 'error',
    error: { type: 'not_found_error', message: 'The model does not exist or this key cannot use it; GET /v1/models lists the ones it can' },
  });
});

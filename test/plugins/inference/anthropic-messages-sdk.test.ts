import t from 'tap';
import Anthropic from '@anthropic-ai/sdk';
import { closedPort } from '../../helpers/closed-port.ts';
import { startGateway, TEST_PRICES, type Gateway } from '../../helpers/gateway.ts';

/**
 * `POST /v1/messages` on the gateway call path, driven by the official Anthropic SDK over a real
 * socket, in front of fake upstreams speaking OpenAI's and Anthropic's real wire formats and the
 * in-process mock: any model of the catalogue answers in Anthropic's shapes.
 */

t.setTimeout(240_000);

const tools: Anthropic.Tool[] = [
  { name: 'get_weather', description: 'Current weather in a city', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
];

t.test('the Anthropic SDK against /v1/messages', async (t) => {
  const gw: Gateway = await startGateway(t);
  // SDK 1.x sends its apiKey as a bearer token.
  const anthropic = new Anthropic({ apiKey: gw.key, baseURL: gw.url, maxRetries: 0, timeout: 20_000 });
  t.beforeEach(() => {
    gw.primary.reset();
    gw.secondary.reset();
    gw.anthropic.reset();
  });

  t.test('messages.create answers a Message with the public model, stop reason and usage', async (t) => {
    gw.primary.enqueue({ kind: 'reply', content: 'Blue.', usage: { prompt_tokens: 14, completion_tokens: 2 } });
    const { data, response } = await anthropic.messages
      .create({ model: 'duo', max_tokens: 64, system: 'Be terse.', messages: [{ role: 'user', content: 'Name a colour.' }], stop_sequences: ['END'] })
      .withResponse();
    t.match(data.id, /^msg_/);
    t.equal(data.type, 'message');
    t.equal(data.role, 'assistant');
    t.equal(data.model, 'duo');
    t.same(data.content, [{ type: 'text', text: 'Blue.', citations: null }]);
    t.equal(data.stop_reason, 'end_turn');
    t.match(data.usage, { input_tokens: 14, output_tokens: 2, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
    t.equal(response.headers.get('x-svc-provider'), 'primary');
    const sent = gw.primary.requests[0]?.body;
    t.equal(sent.model, 'up-primary', 'the upstream gets its own model name');
    t.same(sent.messages, [
      { role: 'system', content: 'Be terse.' },
      { role: 'user', content: 'Name a colour.' },
    ]);
    t.equal(sent.max_tokens, 64);
    t.same(sent.stop, ['END']);
  });

  t.test('the key is taken from x-api-key, as Anthropic’s API documents and earlier SDKs send it', async (t) => {
    gw.primary.enqueue({ kind: 'reply', content: 'one' });
    // An x-api-key among the default headers replaces the SDK's own credential headers.
    const client = new Anthropic({ apiKey: null, defaultHeaders: { 'x-api-key': gw.key }, baseURL: gw.url, maxRetries: 0 });
    const { data, response } = await client.messages.create({ model: 'duo', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }).withResponse();
    t.match(data.content, [{ type: 'text', text: 'one' }]);
    t.equal(response.status, 200);
  });

  t.test('a wrong x-api-key is an authentication_error in Anthropic’s shape', async (t) => {
    const stranger = new Anthropic({ apiKey: null, defaultHeaders: { 'x-api-key': 'svc_live_not_a_key' }, baseURL: gw.url, maxRetries: 0 });
    const error = await stranger.messages.create({ model: 'duo', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    t.type(error, Anthropic.AuthenticationError);
    t.equal((error as InstanceType<typeof Anthropic.AuthenticationError>).status, 401);
    t.match((error as InstanceType<typeof Anthropic.AuthenticationError>).error, { type: 'error', error: { type: 'authentication_error' } });
  });

  t.test('x-api-key is taken on this route only', async (t) => {
    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': gw.key },
      body: JSON.stringify({ model: 'duo', messages: [{ role: 'user', content: 'x' }] }),
    });
    t.equal(response.status, 401);
    t.match(await response.json(), { error: { code: 'missing_api_key' } });
  });

  t.test('x-api-key and Authorization together are refused as two credentials', async (t) => {
    const response = await fetch(`${gw.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': gw.key, authorization: `Bearer ${gw.key}` },
      body: JSON.stringify({ model: 'duo', max_tokens: 8, messages: [] }),
    });
    t.equal(response.status, 400);
    t.same(await response.json(), {
      type: 'error',
      error: { type: 'invalid_request_error', message: 'The request carries both Authorization and x-api-key; send exactly one credential' },
    });
  });

  t.test('an unknown model is a NotFoundError', async (t) => {
    const error = await anthropic.messages.create({ model: 'nope', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    t.type(error, Anthropic.NotFoundError);
    t.match((error as InstanceType<typeof Anthropic.NotFoundError>).error, { type: 'error', error: { type: 'not_found_error', message: /"nope"/ } });
  });

  t.test('an invalid request is a BadRequestError naming the field, and reaches no upstream', async (t) => {
    const error = await anthropic.messages
      .create({ model: 'duo', max_tokens: 8, messages: [{ role: 'user', content: 'x' }], thinking: { type: 'enabled', budget_tokens: 1024 } })
      .catch((e: unknown) => e);
    t.type(error, Anthropic.BadRequestError);
    t.match((error as InstanceType<typeof Anthropic.BadRequestError>).error, { type: 'error', error: { type: 'invalid_request_error', message: /'thinking'/ } });
    t.equal(gw.primary.requests.length, 0);
  });

  t.test('a body that is not JSON is refused in Anthropic’s shape too', async (t) => {
    const response = await fetch(`${gw.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': gw.key }, body: '{"model":' });
    t.equal(response.status, 400);
    t.match(await response.json(), { type: 'error', error: { type: 'invalid_request_error', message: /not valid JSON/ } });
  });

  t.test('messages.stream delivers the text and the final message with usage', async (t) => {
    gw.primary.enqueue({ kind: 'reply', content: 'one two three four', usage: { prompt_tokens: 11, completion_tokens: 4 } });
    const stream = anthropic.messages.stream({ model: 'duo', max_tokens: 64, messages: [{ role: 'user', content: 'count' }] });
    const names: string[] = [];
    let text = '';
    for await (const event of stream) {
      names.push(event.type);
      if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
    }
    const final = await stream.finalMessage();
    t.equal(text, 'one two three four');
    t.equal(names[0], 'message_start');
    t.equal(names.at(-1), 'message_stop');
    t.equal(names.at(-2), 'message_delta');
    t.match(final.content, [{ type: 'text', text: 'one two three four' }]);
    t.equal(final.model, 'duo');
    t.equal(final.stop_reason, 'end_turn');
    t.equal(final.usage.output_tokens, 4);
    t.equal(final.usage.input_tokens, 11);
  });

  t.test('the stream is named server-sent events with a ping, as Anthropic sends them', async (t) => {
    gw.primary.enqueue({ kind: 'reply', content: 'hi' });
    const response = await fetch(`${gw.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': gw.key, 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'duo', max_tokens: 8, stream: true, messages: [{ role: 'user', content: 'x' }] }),
    });
    t.match(response.headers.get('content-type'), /^text\/event-stream/);
    const frames = (await response.text()).trim().split('\n\n');
    t.same(
      frames.map((frame) => frame.split('\n')[0]),
      ['event: message_start', 'event: ping', 'event: content_block_start', 'event: content_block_delta', 'event: content_block_stop', 'event: message_delta', 'event: message_stop'],
    );
    t.match(frames[1], /\ndata: \{"type":"ping"\}$/);
  });

  t.test('a tool use comes back as a tool_use block, and its result goes up as a tool message', async (t) => {
    gw.primary.enqueue({ kind: 'reply', toolCalls: [{ id: 'call_w1', name: 'get_weather', arguments: { city: 'Oslo' } }] });
    const question: Anthropic.MessageParam = { role: 'user', content: 'Weather in Oslo?' };
    const first = await anthropic.messages.create({ model: 'duo', max_tokens: 64, tools, tool_choice: { type: 'any' }, messages: [question] });
    t.equal(first.stop_reason, 'tool_use');
    t.match(first.content, [{ type: 'tool_use', id: 'call_w1', name: 'get_weather', input: { city: 'Oslo' } }]);
    t.same(gw.primary.requests[0]?.body.tools, [{ type: 'function', function: { name: 'get_weather', description: 'Current weather in a city', parameters: tools[0]!.input_schema } }]);
    t.equal(gw.primary.requests[0]?.body.tool_choice, 'required');

    gw.primary.enqueue({ kind: 'reply', content: 'It is 4°C and raining in Oslo.' });
    const second = await anthropic.messages.create({
      model: 'duo',
      max_tokens: 64,
      tools,
      messages: [question, { role: 'assistant', content: first.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_w1', content: '4°C, rain' }] }],
    });
    t.match(second.content, [{ type: 'text', text: 'It is 4°C and raining in Oslo.' }]);
    t.same(gw.primary.requests[1]?.body.messages.slice(1), [
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_w1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
      { role: 'tool', tool_call_id: 'call_w1', content: '4°C, rain' },
    ]);
  });

  t.test('a streamed tool use arrives as input_json_delta and ends as a parsed input', async (t) => {
    gw.primary.enqueue({ kind: 'reply', toolCalls: [{ id: 'call_s1', name: 'get_weather', arguments: { city: 'Lima' } }] });
    const stream = anthropic.messages.stream({ model: 'duo', max_tokens: 64, tools, messages: [{ role: 'user', content: 'Weather in Lima?' }] });
    let partial = '';
    stream.on('inputJson', (delta) => {
      partial += delta;
    });
    const final = await stream.finalMessage();
    t.same(JSON.parse(partial), { city: 'Lima' });
    t.match(final.content, [{ type: 'tool_use', id: 'call_s1', name: 'get_weather', input: { city: 'Lima' } }]);
    t.equal(final.stop_reason, 'tool_use');
  });

  t.test('an image goes up as an image_url data URL', async (t) => {
    gw.primary.enqueue({ kind: 'reply', content: 'A red pixel.' });
    const data = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
    await anthropic.messages.create({
      model: 'duo',
      max_tokens: 16,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data } },
            { type: 'text', text: 'What is this?' },
          ],
        },
      ],
    });
    t.same(gw.primary.requests[0]?.body.messages[0].content, [
      { type: 'image_url', image_url: { url: `data:image/png;base64,${data}` } },
      { type: 'text', text: 'What is this?' },
    ]);
  });

  t.test('through the Anthropic provider, cache reads and writes come back out of input_tokens', async (t) => {
    gw.anthropic.enqueue({ kind: 'reply', content: 'Cached.', usage: { input_tokens: 50, output_tokens: 3, cache_read_input_tokens: 900, cache_creation_input_tokens: 100 } });
    // top_k is Anthropic's API, though the SDK's types no longer list it.
    const message = await anthropic.messages.create({ model: 'claude', max_tokens: 32, top_k: 5, messages: [{ role: 'user', content: 'hi' }] } as Anthropic.MessageCreateParamsNonStreaming);
    t.match(message.usage, { input_tokens: 50, output_tokens: 3, cache_creation_input_tokens: 100, cache_read_input_tokens: 900 });
    t.equal(gw.anthropic.requests[0]?.body.top_k, 5, 'top_k reaches an upstream that takes it');
  });

  t.test('a stream that breaks after its first content ends with an in-band error the SDK raises', async (t) => {
    gw.primary.enqueue({ kind: 'stream-cut', afterChunks: 3 });
    const stream = anthropic.messages.stream({ model: 'duo', max_tokens: 64, messages: [{ role: 'user', content: 'go' }] });
    let text = '';
    const error = await (async () => {
      for await (const event of stream) if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
    })().catch((e: unknown) => e);
    t.ok(text.length > 0, 'some text arrived first');
    t.type(error, Anthropic.APIError);
    t.match(String((error as Error).message), /api_error/);
    t.equal(gw.secondary.requests.length, 0, 'no failover after the commit point');
  });

  t.test('GET /v1 lists POST /v1/messages', async (t) => {
    const response = await fetch(`${gw.url}/v1`, { headers: { authorization: `Bearer ${gw.key}` } });
    t.ok(((await response.json()) as { endpoints: string[] }).endpoints.includes('POST /v1/messages'));
  });

  t.test('the mock model answers offline, JSON and streamed', async (t) => {
    const message = await anthropic.messages.create({ model: 'mock-small', max_tokens: 64, messages: [{ role: 'user', content: 'Say hello.' }] });
    t.equal(message.model, 'mock-small');
    t.equal(message.content[0]?.type, 'text');
    t.ok(message.usage.input_tokens > 0 && message.usage.output_tokens > 0, 'the mock counts tokens');
    const final = await anthropic.messages.stream({ model: 'mock-small', max_tokens: 64, messages: [{ role: 'user', content: 'Say hello.' }] }).finalMessage();
    t.equal(final.model, 'mock-small');
    t.match(final.content, [{ type: 'text', text: /\S/ }]);
    t.equal(final.stop_reason, 'end_turn');
  });

  t.test('the mock model calls a tool the request offers', async (t) => {
    const message = await anthropic.messages.create({ model: 'mock-small', max_tokens: 64, tools, tool_choice: { type: 'any' }, messages: [{ role: 'user', content: 'Weather?' }] });
    t.equal(message.stop_reason, 'tool_use');
    t.match(message.content, [{ type: 'tool_use', name: 'get_weather', input: { city: String } }]);
  });

  t.test('the Anthropic-upstream model streams through both translations to a final message', async (t) => {
    gw.anthropic.enqueue({ kind: 'reply', content: 'Round trip.', usage: { input_tokens: 9, output_tokens: 3 } });
    const stream = anthropic.messages.stream({ model: 'claude', max_tokens: 32, messages: [{ role: 'user', content: 'hi' }] });
    const final = await stream.finalMessage();
    t.match(final.content, [{ type: 'text', text: 'Round trip.' }]);
    t.equal(final.model, 'claude');
    t.match(final.usage, { input_tokens: 9, output_tokens: 3 });
    t.equal(gw.anthropic.requests[0]?.body.model, 'claude-test');
  });

  t.test('a 5xx fails over to the next route', async (t) => {
    gw.primary.enqueue({ kind: 'status', status: 500 }, { kind: 'status', status: 503 });
    gw.secondary.enqueue({ kind: 'reply', content: 'from secondary' });
    const { data, response } = await anthropic.messages.create({ model: 'duo', max_tokens: 16, messages: [{ role: 'user', content: 'x' }] }).withResponse();
    t.match(data.content, [{ type: 'text', text: 'from secondary' }]);
    t.equal(response.headers.get('x-svc-provider'), 'secondary');
    t.equal(response.headers.get('x-svc-attempts'), '3');
  });

  t.test('a 429 with a short retry-after is waited out on the same route', async (t) => {
    gw.primary.enqueue({ kind: 'status', status: 429, retryAfter: '1' }, { kind: 'reply', content: 'after waiting' });
    const started = Date.now();
    const { data, response } = await anthropic.messages.create({ model: 'duo', max_tokens: 16, messages: [{ role: 'user', content: 'x' }] }).withResponse();
    t.match(data.content, [{ type: 'text', text: 'after waiting' }]);
    t.equal(response.headers.get('x-svc-provider'), 'primary');
    t.ok(Date.now() - started >= 950, 'waited for retry-after');
    t.equal(gw.secondary.requests.length, 0);
  });

  t.test('a stream that fails before its first content fails over; the SDK sees one clean stream', async (t) => {
    gw.primary.enqueue({ kind: 'status', status: 500 }, { kind: 'stream-error', afterChunks: 0 });
    gw.secondary.enqueue({ kind: 'reply', content: 'clean stream' });
    const { data: stream, response } = await anthropic.messages.create({ model: 'duo', max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'x' }] }).withResponse();
    let text = '';
    for await (const event of stream) if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
    t.equal(text, 'clean stream');
    t.equal(response.headers.get('x-svc-provider'), 'secondary');
  });

  t.test('when every route fails: 502 in Anthropic’s shape, an api_error', async (t) => {
    gw.primary.enqueue({ kind: 'status', status: 500 }, { kind: 'status', status: 500 });
    gw.secondary.enqueue({ kind: 'status', status: 502 }, { kind: 'status', status: 502 });
    const error = await anthropic.messages.create({ model: 'duo', max_tokens: 16, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    t.type(error, Anthropic.InternalServerError);
    t.equal((error as InstanceType<typeof Anthropic.APIError>).status, 502);
    t.match((error as InstanceType<typeof Anthropic.APIError>).error, { type: 'error', error: { type: 'api_error', message: /safe to retry/ } });
  });

  t.test('calls are counted in the metrics under /v1/messages with their provider', async (t) => {
    gw.primary.enqueue({ kind: 'reply', content: 'counted' });
    await anthropic.messages.create({ model: 'solo', max_tokens: 16, messages: [{ role: 'user', content: 'x' }] });
    const metrics = await gw.test.app.inject({ method: 'GET', url: '/metrics' });
    t.match(metrics.body, /svc_gateway_requests_total\{endpoint="\/v1\/messages",model="solo",provider="primary",status="200"\} 1\n/);
  });
});

t.test('every kind of catalogue model serves the Anthropic SDK: JSON, stream, a tool round trip, an image', async (t) => {
  const gw = await startGateway(t);
  const anthropic = new Anthropic({ apiKey: gw.key, baseURL: gw.url, maxRetries: 0, timeout: 20_000 });
  const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
  /** Per model: how its upstream is told to answer text or a tool call, and the image part it last received (the mock answers by itself). */
  const models: Array<{ model: string; text(content: string): void; toolCall(): void; imageSent?(): unknown }> = [
    {
      model: 'solo',
      text: (content) => gw.primary.enqueue({ kind: 'reply', content }),
      toolCall: () => gw.primary.enqueue({ kind: 'reply', toolCalls: [{ id: 'call_t', name: 'get_weather', arguments: { city: 'Oslo' } }] }),
      imageSent: () => gw.primary.requests.at(-1)?.body.messages[0].content[0],
    },
    {
      model: 'claude',
      text: (content) => gw.anthropic.enqueue({ kind: 'reply', content }),
      toolCall: () => gw.anthropic.enqueue({ kind: 'reply', toolCalls: [{ id: 'toolu_t', name: 'get_weather', input: { city: 'Oslo' } }] }),
      imageSent: () => gw.anthropic.requests.at(-1)?.body.messages[0].content[0],
    },
    { model: 'mock-small', text: () => undefined, toolCall: () => undefined },
  ];
  for (const { model, text, toolCall, imageSent } of models) {
    t.test(model, async (t) => {
      text('Plain answer.');
      const json = await anthropic.messages.create({ model, max_tokens: 64, messages: [{ role: 'user', content: 'Hi' }] });
      t.match(json, { type: 'message', role: 'assistant', model, stop_reason: 'end_turn', content: [{ type: 'text', text: /\S/ }] });

      text('Streamed answer.');
      const stream = anthropic.messages.stream({ model, max_tokens: 64, messages: [{ role: 'user', content: 'Hi' }] });
      const kinds = new Set<string>();
      for await (const event of stream) kinds.add(event.type);
      const final = await stream.finalMessage();
      t.match(final, { model, stop_reason: 'end_turn', content: [{ type: 'text', text: /\S/ }] });
      t.ok(final.usage.output_tokens > 0, 'the final usage counts the output');
      t.same([...kinds], ['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']);

      toolCall();
      const question: Anthropic.MessageParam = { role: 'user', content: 'Weather in Oslo?' };
      const first = await anthropic.messages.create({ model, max_tokens: 64, tools, tool_choice: { type: 'any' }, messages: [question] });
      t.equal(first.stop_reason, 'tool_use');
      const use = first.content.find((block) => block.type === 'tool_use');
      t.match(use, { name: 'get_weather', input: { city: String } });
      text('It is cold.');
      const second = await anthropic.messages.create({
        model,
        max_tokens: 64,
        tools,
        messages: [question, { role: 'assistant', content: first.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use!.id, content: '4°C' }] }],
      });
      t.match(second, { stop_reason: 'end_turn', content: [{ type: 'text', text: /\S/ }] });

      text('A pixel.');
      const seen = await anthropic.messages.create({
        model,
        max_tokens: 64,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
              { type: 'text', text: 'What is this?' },
            ],
          },
        ],
      });
      t.match(seen.content, [{ type: 'text', text: /\S/ }]);
      if (imageSent) t.match(imageSent(), { type: /^image/ }, 'the image went upstream as an image');
    });
  }
});

t.test('a connect error fails over to the next route', async (t) => {
  const deadPort = await closedPort();
  const gw = await startGateway(t, {
    inference: {
      providers: { dead: { type: 'openai', baseUrl: `http://127.0.0.1:${deadPort}/v1`, apiKey: 'sk-dead', allowPrivateNetwork: true }, mock: { type: 'mock' } },
      models: {
        'mock-after-dead': {
          routes: [
            { provider: 'dead', model: 'up-dead' },
            { provider: 'mock', model: 'mock-small' },
          ],
          prices: TEST_PRICES,
        },
      },
    },
  });
  const anthropic = new Anthropic({ apiKey: gw.key, baseURL: gw.url, maxRetries: 0, timeout: 20_000 });
  const { data, response } = await anthropic.messages.create({ model: 'mock-after-dead', max_tokens: 16, messages: [{ role: 'user', content: 'x' }] }).withResponse();
  t.equal(data.model, 'mock-after-dead');
  t.equal(response.headers.get('x-svc-provider'), 'mock');
  t.equal(response.headers.get('x-svc-attempts'), '3', 'the refused route was tried twice');
});

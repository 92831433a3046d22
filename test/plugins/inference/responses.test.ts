import OpenAI from 'openai';
import t, { type Test } from 'tap';
import { failoverModels, startGateway, TEST_PRICES } from '../../helpers/gateway.ts';

/** POST /v1/responses through the gateway, driven with the official openai package. */

t.setTimeout(240_000);

const searching = { builtinTools: { webSearch: { reservePerCall: 2 } }, prices: { ...TEST_PRICES, perWebSearchUsd: 0.01 } };
const gw = await startGateway(t, {
  inference: {
    models: {
      ...failoverModels('resp', 'resp', searching),
      'resp-solo': { routes: [{ provider: 'primary', model: 'up-resp-solo' }], prices: TEST_PRICES },
      'resp-mock': { ...searching, routes: [{ provider: 'mock', model: 'mock-small' }] },
      claude: { routes: [{ provider: 'claude', model: 'claude-test' }], prices: TEST_PRICES },
      'embed-mock': { routes: [{ provider: 'mock', model: 'mock-embed' }], modalities: { input: ['text'], output: ['embedding'] }, prices: TEST_PRICES },
    },
  },
});
const primary = gw.primary;
const secondary = gw.secondary;
t.beforeEach(() => {
  primary.reset();
  secondary.reset();
});

/** Every event of a stream, in order. */
async function eventsOf(stream: AsyncIterable<OpenAI.Responses.ResponseStreamEvent>): Promise<OpenAI.Responses.ResponseStreamEvent[]> {
  const events: OpenAI.Responses.ResponseStreamEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

t.test('responses.create answers the upstream response under our model id', async (t) => {
  const { data: response, response: raw } = await gw.client.responses.create({ model: 'resp-duo', input: 'Say hello', instructions: 'Be brief' }).withResponse();
  t.equal(response.object, 'response');
  t.equal(response.status, 'completed');
  t.equal(response.model, 'resp-duo', 'our model id, not the upstream one');
  t.equal(response.output_text, 'Hello from the fake upstream.');
  t.same(response.usage, {
    input_tokens: 12,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: 6,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: 18,
  });
  t.equal(raw.headers.get('x-svc-provider'), 'primary');
  const sent = primary.requests[0]?.body;
  t.equal(sent.model, 'up-resp-primary');
  t.same([sent.input, sent.instructions], ['Say hello', 'Be brief'], 'the request passed through as sent');
});

t.test('stream: true forwards every upstream event in order under its own name, then the final usage', async (t) => {
  const direct = new OpenAI({ apiKey: 'x', baseURL: primary.baseUrl, maxRetries: 0 });
  const expected = (await eventsOf(await direct.responses.create({ model: 'm', input: 'hi', stream: true }))).map((event) => event.type);
  primary.reset();
  const events = await eventsOf(await gw.client.responses.create({ model: 'resp-duo', input: 'hi', stream: true }));
  t.same(
    events.map((event) => event.type),
    expected,
    'the same events in the same order as the upstream sent them',
  );
  t.same(
    events.map((event) => event.sequence_number),
    events.map((_, index) => index),
    'sequence numbers run on unbroken',
  );
  t.same(expected.slice(0, 3), ['response.created', 'response.in_progress', 'response.output_item.added']);
  const created = events[0] as OpenAI.Responses.ResponseCreatedEvent;
  const completed = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
  t.equal(created.response.model, 'resp-duo', 'our model id in the opening event');
  t.equal(completed.type, 'response.completed');
  t.equal(completed.response.model, 'resp-duo', 'and in the final response');
  t.equal(completed.response.usage?.total_tokens, 18, 'the final usage');
  t.equal(primary.requests[0]?.body.model, 'up-resp-primary');
});

t.test('the SDK’s responses.stream() helper assembles the text and the final response', async (t) => {
  const stream = gw.client.responses.stream({ model: 'resp-duo', input: 'hi' });
  let text = '';
  stream.on('response.output_text.delta', (event) => {
    text += event.delta;
  });
  const final = await stream.finalResponse();
  t.equal(text, 'Hello from the fake upstream.');
  t.equal(final.output_text, 'Hello from the fake upstream.');
  t.equal(final.model, 'resp-duo');
  t.equal(final.usage?.output_tokens, 6);
});

t.test('the mock serves responses offline: text, function calls and a web search', async (t) => {
  const plain = await gw.client.responses.create({ model: 'resp-mock', input: 'Say something short' });
  t.equal(plain.model, 'resp-mock');
  t.ok(plain.output_text.length > 0);
  const searched = await gw.client.responses.create({ model: 'resp-mock', input: 'What is the latest news?', tools: [{ type: 'web_search' }] });
  t.same(
    searched.output.map((item) => item.type),
    ['web_search_call', 'message'],
  );
  const called = await gw.client.responses.create({
    model: 'resp-mock',
    input: 'What is the weather in Paris?',
    tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }, strict: true }],
    tool_choice: 'required',
  });
  const call = called.output.find((item) => item.type === 'function_call');
  t.equal(call?.type === 'function_call' ? call.name : null, 'get_weather');
});

t.test('function and custom tools pass through to the upstream', async (t) => {
  const tools = [
    { type: 'function' as const, name: 'lookup', parameters: { type: 'object', properties: {} }, strict: false },
    { type: 'custom' as const, name: 'grammar_tool', description: 'free text' },
  ];
  await gw.client.responses.create({ model: 'resp-solo', input: 'x', tools });
  t.same(primary.requests[0]?.body.tools, tools);
});

t.test('failover before the first output event', async (t) => {
  t.test('JSON: a 5xx is retried, then the next route serves', async (t) => {
    primary.enqueue({ kind: 'status', status: 500 }, { kind: 'status', status: 503 });
    const { response } = await gw.client.responses.create({ model: 'resp-duo', input: 'x' }).withResponse();
    t.equal(response.headers.get('x-svc-provider'), 'secondary');
    t.equal(response.headers.get('x-svc-attempts'), '3');
  });

  t.test('JSON: a 429 with a short retry-after is waited out on the same route', async (t) => {
    primary.enqueue({ kind: 'status', status: 429, retryAfter: '1' });
    const started = Date.now();
    const { response } = await gw.client.responses.create({ model: 'resp-duo', input: 'x' }).withResponse();
    t.equal(response.headers.get('x-svc-provider'), 'primary');
    t.ok(Date.now() - started >= 950, 'waited for retry-after');
    t.equal(secondary.requests.length, 0);
  });

  t.test('JSON: a connect error moves on to the next route', async (t) => {
    const { response } = await gw.client.responses.create({ model: 'resp-after-dead', input: 'x' }).withResponse();
    t.equal(response.headers.get('x-svc-provider'), 'secondary');
    t.equal(response.headers.get('x-svc-attempts'), '3', 'the refused route was tried twice');
  });

  t.test('stream: a 5xx moves on to the next route', async (t) => {
    primary.enqueue({ kind: 'status', status: 500 }, { kind: 'status', status: 500 });
    const { data, response } = await gw.client.responses.create({ model: 'resp-duo', input: 'x', stream: true }).withResponse();
    const events = await eventsOf(data);
    t.equal(response.headers.get('x-svc-provider'), 'secondary');
    t.equal(events.at(-1)?.type, 'response.completed');
  });

  t.test('stream: a 429 with a short retry-after is waited out on the same route', async (t) => {
    primary.enqueue({ kind: 'status', status: 429, retryAfter: '1' });
    const started = Date.now();
    const { data, response } = await gw.client.responses.create({ model: 'resp-duo', input: 'x', stream: true }).withResponse();
    await eventsOf(data);
    t.equal(response.headers.get('x-svc-provider'), 'primary');
    t.ok(Date.now() - started >= 950, 'waited for retry-after');
  });

  t.test('stream: a connect error moves on to the next route', async (t) => {
    const { data, response } = await gw.client.responses.create({ model: 'resp-after-dead', input: 'x', stream: true }).withResponse();
    await eventsOf(data);
    t.equal(response.headers.get('x-svc-provider'), 'secondary');
  });

  t.test('stream: a stream cut after response.created and in_progress is replaced whole', async (t) => {
    // Cut on both attempts the route gets: the next route then serves.
    primary.enqueue({ kind: 'stream-cut', afterChunks: 2 }, { kind: 'stream-cut', afterChunks: 2 });
    const { data, response } = await gw.client.responses.create({ model: 'resp-duo', input: 'x', stream: true }).withResponse();
    const events = await eventsOf(data);
    t.equal(response.headers.get('x-svc-provider'), 'secondary');
    t.same(events.filter((event) => event.type === 'response.created').length, 1, 'the client saw one response.created: the held-back announcement of the broken route never reached it');
    t.same(
      events.map((event) => event.sequence_number),
      events.map((_, index) => index),
    );
  });
});

t.test('a stream that breaks after its first output event ends with Responses’ in-band error event', async (t) => {
  t.test('the SDK yields it as the last event (a ResponseErrorEvent), after the events before it', async (t) => {
    primary.enqueue({ kind: 'stream-cut', afterChunks: 5 });
    const events = await eventsOf(await gw.client.responses.create({ model: 'resp-duo', input: 'x', stream: true }));
    t.same(
      events.map((event) => event.type),
      ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added', 'response.output_text.delta', 'error'],
      'every event the upstream sent before it broke, then the error',
    );
    const error = events.at(-1) as OpenAI.Responses.ResponseErrorEvent;
    t.equal(error.code, 'upstream_error');
    t.match(error.message, /upstream stream failed part-way/);
    t.equal(secondary.requests.length, 0, 'no failover once output reached the client');
  });

  t.test('on the wire: event error with type, code, message, param and the next sequence number', async (t) => {
    primary.enqueue({ kind: 'stream-error', afterChunks: 4 });
    const response = await fetch(`${gw.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'resp-duo', input: 'x', stream: true }),
    });
    t.equal(response.status, 200);
    const frames = (await response.text()).trim().split('\n\n');
    t.equal(frames.length, 5);
    t.same(JSON.parse(frames[4]!.replace(/^event: error\ndata: /, '')), {
      type: 'error',
      code: 'upstream_error',
      message: 'The upstream stream failed part-way; the response is incomplete. It is safe to retry.',
      param: null,
      sequence_number: 4,
    });
  });
});

t.test('400s name the parameter at fault, before anything goes upstream', async (t) => {
  const refusal = async (t: Test, body: Record<string, unknown>) => {
    const error = await gw.client.responses.create(body as never).catch((e: unknown) => e);
    t.type(error, OpenAI.BadRequestError);
    t.equal(primary.requests.length + secondary.requests.length, 0, 'nothing went upstream');
    return error as InstanceType<typeof OpenAI.BadRequestError>;
  };

  t.test('a model no provider offering the Responses API serves: use /v1/chat/completions', async (t) => {
    const error = await refusal(t, { model: 'claude', input: 'x' });
    t.equal(error.param, 'model');
    t.equal(error.code, 'unsupported_model');
    t.match(error.message, /\/v1\/chat\/completions/);
    t.match(error.message, /resp-duo/, 'naming the models that can');
  });

  t.test('a model without text output, though its provider offers the Responses API', async (t) => {
    const error = await refusal(t, { model: 'embed-mock', input: 'x' });
    t.equal(error.param, 'model');
    t.equal(error.code, 'unsupported_model');
  });

  t.test('web_search on a model without the built-in tool', async (t) => {
    const error = await refusal(t, { model: 'resp-solo', input: 'x', tools: [{ type: 'function', name: 'f', parameters: {} }, { type: 'web_search' }] });
    t.equal(error.param, 'tools[1]');
    t.equal(error.code, 'unsupported_tool');
    t.match(error.message, /web_search/);
  });

  for (const tool of [
    'file_search',
    'code_interpreter',
    'shell',
    'local_shell',
    'hosted_shell',
    'image_generation',
    'computer_use',
    'computer_use_preview',
    'computer_use_preview_2025_03_11',
  ]) {
    t.test(`the hosted tool ${tool}`, async (t) => {
      const error = await refusal(t, { model: 'resp-duo', input: 'x', tools: [{ type: 'web_search' }, { type: tool }] });
      t.equal(error.param, 'tools[1]');
      t.equal(error.code, 'unsupported_tool');
      t.match(error.message, tool);
    });
  }

  t.test('a tool type the gateway does not know', async (t) => {
    const error = await refusal(t, { model: 'resp-duo', input: 'x', tools: [{ type: 'mcp', server_label: 's', server_url: 'https://example.com' }] });
    t.equal(error.param, 'tools[0]');
  });

  t.test('background: true, which would answer before the work is done and billed', async (t) => {
    t.equal((await refusal(t, { model: 'resp-duo', input: 'x', background: true })).param, 'background');
    t.equal((await refusal(t, { model: 'resp-duo', input: 'x', background: true, stream: true })).param, 'background');
  });

  t.test('previous_response_id on a model served by several providers', async (t) => {
    t.equal((await refusal(t, { model: 'resp-duo', input: 'x', previous_response_id: 'resp_abc' })).param, 'previous_response_id');
  });

  t.test('conversation on a model served by several providers', async (t) => {
    t.equal((await refusal(t, { model: 'resp-duo', input: 'x', conversation: 'conv_abc' })).param, 'conversation');
  });

  t.test('a max_output_tokens that is not a positive integer', async (t) => {
    t.equal((await refusal(t, { model: 'resp-duo', input: 'x', max_output_tokens: 0 })).param, 'max_output_tokens');
  });

  t.test('an input that is neither a string nor a list of items', async (t) => {
    t.equal((await refusal(t, { model: 'resp-duo', input: 42 })).param, 'input');
  });
});

t.test('previous_response_id passes through on a model with a single provider', async (t) => {
  await gw.client.responses.create({ model: 'resp-solo', input: 'and then?', previous_response_id: 'resp_earlier' });
  t.equal(primary.requests[0]?.body.previous_response_id, 'resp_earlier');
});

t.test('GET /v1 lists POST /v1/responses', async (t) => {
  const listed = await fetch(`${gw.url}/v1`, { headers: { authorization: `Bearer ${gw.key}` } });
  const { endpoints } = (await listed.json()) as { endpoints: string[] };
  t.ok(endpoints.includes('POST /v1/responses'));
});

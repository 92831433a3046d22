import t from 'tap';
import OpenAI from 'openai';
import { startGateway } from '../../helpers/gateway.ts';

const user = (content: string) => [{ role: 'user' as const, content }];

t.test('chat completions through the official OpenAI SDK', async (t) => {
  const gw = await startGateway(t);
  t.beforeEach(() => {
    gw.primary.reset();
    gw.secondary.reset();
    gw.anthropic.reset();
  });

  t.test('a non-streamed completion comes back with the public model id and usage', async (t) => {
    gw.primary.enqueue({ kind: 'reply', content: 'Hi there', usage: { prompt_tokens: 9, completion_tokens: 2 } });
    const { data, response } = await gw.client.chat.completions.create({ model: 'duo', messages: user('hello') }).withResponse();
    t.equal(data.choices[0]?.message.content, 'Hi there');
    t.equal(data.model, 'duo');
    t.equal(data.usage?.prompt_tokens, 9);
    t.equal(response.headers.get('x-svc-provider'), 'primary');
    t.equal(response.headers.get('x-svc-attempts'), '1');
    t.match(response.headers.get('x-request-id'), /\S+/);
    t.equal(gw.primary.requests[0]?.body.model, 'up-primary', 'the upstream gets its own model name');
  });

  t.test('a streamed completion arrives as chunks ending with usage when asked', async (t) => {
    gw.primary.enqueue({ kind: 'reply', content: 'one two three four', usage: { prompt_tokens: 5, completion_tokens: 4 } });
    const stream = await gw.client.chat.completions.create({ model: 'duo', messages: user('count'), stream: true, stream_options: { include_usage: true } });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      t.equal(chunk.model, 'duo');
      text += chunk.choices[0]?.delta.content ?? '';
      finish ??= chunk.choices[0]?.finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
    t.equal(text, 'one two three four');
    t.equal(finish, 'stop');
    t.equal(usage?.completion_tokens, 4);
    t.equal(gw.primary.requests[0]?.body.stream_options?.include_usage, true, 'upstream was asked for usage');
  });

  t.test('a stream without include_usage carries no usage chunk', async (t) => {
    gw.primary.enqueue({ kind: 'reply', content: 'quiet' });
    const stream = await gw.client.chat.completions.create({ model: 'duo', messages: user('x'), stream: true });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    t.notOk(
      chunks.some((c) => c.usage),
      'no usage chunk',
    );
  });

  t.test('streamed chunks go out under the public model id with no usage field but the usage chunk', async (t) => {
    for (const includeUsage of [false, true]) {
      gw.primary.enqueue({ kind: 'reply', content: 'one two three', usage: { prompt_tokens: 5, completion_tokens: 3 } });
      const response = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${gw.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'duo', messages: user('count'), stream: true, stream_options: { include_usage: includeUsage } }),
      });
      const frames = (await response.text()).split('\n\n').filter((frame) => frame.startsWith('data: {'));
      const chunks = frames.map((frame) => JSON.parse(frame.slice('data: '.length)) as { model: string; usage?: unknown; choices: unknown[] });
      t.ok(chunks.length >= 4, `include_usage ${includeUsage}: ${chunks.length} chunks`);
      t.ok(chunks.every((chunk) => chunk.model === 'duo'));
      const withUsage = chunks.filter((chunk) => 'usage' in chunk);
      t.same(
        withUsage.map((chunk) => chunk.choices),
        includeUsage ? [[]] : [],
        'only the usage chunk has the field',
      );
      t.notOk(
        frames.some((frame) => frame.includes('up-primary')),
        "the upstream's model name never reaches the client",
      );
    }
  });

  t.test('tool calls pass through both ways', async (t) => {
    gw.primary.enqueue({ kind: 'reply', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: { city: 'Oslo' } }] });
    const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
    const completion = await gw.client.chat.completions.create({ model: 'duo', messages: user('weather?'), tools });
    const call = completion.choices[0]?.message.tool_calls?.[0];
    t.equal(call?.type === 'function' ? call.function.name : undefined, 'get_weather');
    t.equal(completion.choices[0]?.finish_reason, 'tool_calls');
    t.same(gw.primary.requests[0]?.body.tools, tools);
  });

  t.test('streamed tool calls arrive as tool_call deltas', async (t) => {
    gw.primary.enqueue({ kind: 'reply', toolCalls: [{ id: 'call_2', name: 'lookup', arguments: { q: 'svc' } }] });
    const stream = await gw.client.chat.completions.create({ model: 'duo', messages: user('look'), stream: true, tools: [{ type: 'function', function: { name: 'lookup' } }] });
    let args = '';
    let name = '';
    for await (const chunk of stream) {
      for (const call of chunk.choices[0]?.delta.tool_calls ?? []) {
        name += call.function?.name ?? '';
        args += call.function?.arguments ?? '';
      }
    }
    t.equal(name, 'lookup');
    t.same(JSON.parse(args), { q: 'svc' });
  });

  t.test('fields the gateway does not know are passed through to the provider', async (t) => {
    gw.primary.enqueue({ kind: 'reply' });
    await gw.client.chat.completions.create({ model: 'duo', messages: user('x'), seed: 7, logit_bias: { '50256': -100 }, user: 'u-1', top_k: 3 } as never);
    const sent = gw.primary.requests[0]?.body;
    t.equal(sent.seed, 7);
    t.same(sent.logit_bias, { '50256': -100 });
    t.equal(sent.top_k, 3);
  });

  t.test('the Anthropic provider serves the chat-completions shape, streamed and not', async (t) => {
    gw.anthropic.enqueue({ kind: 'reply', content: 'Bonjour' });
    const completion = await gw.client.chat.completions.create({ model: 'claude', messages: [{ role: 'system', content: 'Be brief' }, ...user('hi')] });
    t.equal(completion.choices[0]?.message.content, 'Bonjour');
    t.match(JSON.stringify(gw.anthropic.requests[0]?.body.system), 'Be brief', 'system prompt sent as Anthropic system');
    gw.anthropic.enqueue({ kind: 'reply', content: 'Streaming from Claude' });
    const stream = await gw.client.chat.completions.create({ model: 'claude', messages: user('hi'), stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    t.equal(text, 'Streaming from Claude');
  });

  t.test('Anthropic tool use becomes OpenAI tool calls', async (t) => {
    gw.anthropic.enqueue({ kind: 'reply', toolCalls: [{ id: 'toolu_1', name: 'get_weather', input: { city: 'Lima' } }] });
    const completion = await gw.client.chat.completions.create({
      model: 'claude',
      messages: user('weather in Lima?'),
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }],
    });
    const call = completion.choices[0]?.message.tool_calls?.[0];
    t.equal(completion.choices[0]?.finish_reason, 'tool_calls');
    t.same(call?.type === 'function' ? JSON.parse(call.function.arguments) : null, { city: 'Lima' });
  });

  t.test('the offline mock answers through the same route', async (t) => {
    const completion = await gw.client.chat.completions.create({ model: 'mock-small', messages: user('ping') });
    t.match(completion.choices[0]?.message.content, /ping/);
    t.ok((completion.usage?.total_tokens ?? 0) > 0);
  });

  t.test('GET /v1/models lists the models and GET /v1/models/{model} retrieves one', async (t) => {
    const list = await gw.client.models.list();
    t.same(list.data.map((m) => m.id).sort(), ['claude', 'duo', 'mock-small', 'solo']);
    const one = (await gw.client.models.retrieve('duo')) as OpenAI.Model & { svc_batch: boolean; svc_modalities: unknown };
    t.equal(one.id, 'duo');
    t.equal(one.svc_batch, false);
    t.same(one.svc_modalities, { input: ['text'], output: ['text'] });
  });
});

t.test('errors surface as the SDK typed errors', async (t) => {
  const gw = await startGateway(t);

  t.test('an unknown model is 404 model_not_found', async (t) => {
    const error = await gw.client.chat.completions.create({ model: 'nope', messages: user('x') }).catch((e: unknown) => e);
    t.type(error, OpenAI.NotFoundError);
    t.equal((error as InstanceType<typeof OpenAI.NotFoundError>).code, 'model_not_found');
    t.equal((error as InstanceType<typeof OpenAI.NotFoundError>).param, 'model');
  });

  t.test('a bad key is 401', async (t) => {
    const bad = new OpenAI({ apiKey: 'svc_live_wrong', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    t.type(await bad.models.list().catch((e: unknown) => e), OpenAI.AuthenticationError);
  });

  t.test('a key without the inference scope is 403', async (t) => {
    const { key } = await (await import('../../helpers/app.ts')).createKey(gw.test, { name: 'no inference', scopes: ['keys:read'] });
    const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const error = await client.chat.completions.create({ model: 'duo', messages: user('x') }).catch((e: unknown) => e);
    t.type(error, OpenAI.PermissionDeniedError);
    t.equal((error as InstanceType<typeof OpenAI.APIError>).code, 'missing_scope');
  });

  t.test('a model outside the key allow-list is 404 and missing from the list', async (t) => {
    const { key } = await (await import('../../helpers/app.ts')).createKey(gw.test, { name: 'only solo', models: ['solo'] });
    const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    t.same(
      (await client.models.list()).data.map((m) => m.id),
      ['solo'],
    );
    t.type(await client.models.retrieve('duo').catch((e: unknown) => e), OpenAI.NotFoundError);
    t.type(await client.chat.completions.create({ model: 'duo', messages: user('x') }).catch((e: unknown) => e), OpenAI.NotFoundError);
  });

  t.test('a browser request (Origin) is 403 unless it opts in', async (t) => {
    const browser = new OpenAI({ apiKey: gw.key, baseURL: `${gw.url}/v1`, maxRetries: 0, defaultHeaders: { origin: 'https://evil.example' } });
    const error = await browser.models.list().catch((e: unknown) => e);
    t.type(error, OpenAI.PermissionDeniedError);
    t.equal((error as InstanceType<typeof OpenAI.APIError>).code, 'browser_access_denied');
    const optedIn = new OpenAI({
      apiKey: gw.key,
      baseURL: `${gw.url}/v1`,
      maxRetries: 0,
      defaultHeaders: { origin: 'https://app.example', 'x-svc-dangerous-browser-access': 'true' },
    });
    t.ok((await optedIn.models.list()).data.length > 0);
  });

  t.test('a malformed body is 400 naming the field', async (t) => {
    const error = await gw.client.chat.completions.create({ model: 'duo', messages: [] }).catch((e: unknown) => e);
    t.type(error, OpenAI.BadRequestError);
    t.equal((error as InstanceType<typeof OpenAI.APIError>).param, 'messages');
  });
});

import { Ajv } from 'ajv';
import t from 'tap';
import type { JsonObject, Provider, ResponsesRequestBody, ResponsesStreamEvent } from '../../core/gateway/provider.ts';
import { mockProviderType } from '../../providers/mock/index.ts';
import { createProviderContext } from '../../providers/provider-context.ts';
import { callOptions as options, failure } from './provider-test-kit.ts';

/** The mock's OpenAI Responses API: bodies, the event sequence, function calls and the simulated web search. */

const mock: Provider = mockProviderType.create('mock', mockProviderType.configSchema.parse({}), createProviderContext());
const create = (body: ResponsesRequestBody) => mock.responses!.create(body, options());
async function events(body: ResponsesRequestBody): Promise<ResponsesStreamEvent[]> {
  const all: ResponsesStreamEvent[] = [];
  for await (const event of mock.responses!.stream({ ...body, stream: true }, options())) all.push(event);
  return all;
}
const dataOf = (all: ResponsesStreamEvent[]): JsonObject[] => all.flatMap((event) => (event.type === 'event' ? [event.data] : []));

const weatherTool = {
  type: 'function',
  name: 'get_weather',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
  strict: true,
};

t.test('a text answer is a response with one message of output_text and token usage', async (t) => {
  const { body, usage } = await create({ model: 'mock-small', input: 'Say hello to the team' });
  t.match(body, { object: 'response', status: 'completed', model: 'mock-small', error: null, incomplete_details: null, tools: [], tool_choice: 'auto', parallel_tool_calls: true });
  t.match(body['id'], /^resp_/);
  t.type(body['created_at'], 'number');
  const output = body['output'] as JsonObject[];
  t.equal(output.length, 1);
  t.match(output[0], { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', annotations: [] }] });
  t.match(output[0]!['id'], /^msg_/);
  t.match((output[0]!['content'] as JsonObject[])[0]!['text'], /Say hello to the team/);
  t.same(body['usage'], {
    input_tokens: usage.tokens.inputTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: usage.tokens.outputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.tokens.inputTokens + usage.tokens.outputTokens,
  });
  t.ok(usage.tokens.inputTokens > 0 && usage.tokens.outputTokens > 0);
  t.equal(usage.webSearches, 0);
});

t.test('instructions and input items (messages, function results) are read as a conversation', async (t) => {
  const { body } = await create({
    model: 'mock-small',
    instructions: 'Be brief',
    tools: [weatherTool],
    input: [
      { role: 'user', content: [{ type: 'input_text', text: 'call get_weather for Oslo' }] },
      { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Oslo"}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'sunny, 21 C' },
    ],
  });
  t.equal(body['instructions'], 'Be brief');
  const message = (body['output'] as JsonObject[])[0]!;
  t.match((message['content'] as JsonObject[])[0]!['text'], /get_weather tool returned: "sunny, 21 C"/);
});

t.test('asked to call function tools, the output is function_call items', async (t) => {
  const { body } = await create({
    model: 'mock-small',
    input: 'call get_weather and get_time',
    tools: [weatherTool, { type: 'function', name: 'get_time', parameters: { type: 'object', properties: {} } }],
  });
  const output = body['output'] as JsonObject[];
  t.same(
    output.map((item) => [item['type'], item['name'], item['status']]),
    [
      ['function_call', 'get_weather', 'completed'],
      ['function_call', 'get_time', 'completed'],
    ],
  );
  t.match(output[0]!['call_id'], /^call_/);
  t.match(output[0]!['id'], /^fc_/);
  t.type(JSON.parse(output[0]!['arguments'] as string).city, 'string');
});

t.test('text.format json_schema answers JSON valid against the schema', async (t) => {
  const schema = { type: 'object', additionalProperties: false, required: ['city', 'days'], properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1, maximum: 7 } } };
  const { body } = await create({ model: 'mock-small', input: 'Plan a trip to Rome', text: { format: { type: 'json_schema', name: 'trip', schema, strict: true } } });
  const text = ((body['output'] as JsonObject[])[0]!['content'] as JsonObject[])[0]!['text'] as string;
  t.ok(new Ajv().validate(schema, JSON.parse(text)));
  t.same(body['text'], { format: { type: 'json_schema', name: 'trip', schema, strict: true } }, 'the format is echoed');
});

t.test('a question with web_search offered runs one search before the answer, which cites it', async (t) => {
  for (const type of ['web_search', 'web_search_preview', 'web_search_2025_08_26']) {
    const { body, usage } = await create({ model: 'mock-small', input: 'What is the tallest building in Oslo?', tools: [{ type }] });
    const output = body['output'] as JsonObject[];
    t.same(
      output.map((item) => item['type']),
      ['web_search_call', 'message'],
      type,
    );
    t.match(output[0], { status: 'completed', action: { type: 'search', query: 'What is the tallest building in Oslo' } });
    t.match(output[0]!['id'], /^ws_/);
    const part = (output[1]!['content'] as JsonObject[])[0]!;
    const [citation] = part['annotations'] as JsonObject[];
    t.match(citation, { type: 'url_citation', url: /^https:\/\/example\.com\/search\?q=/ });
    t.equal((part['text'] as string).slice(citation!['start_index'] as number, citation!['end_index'] as number), 'example.com');
    t.equal(usage.webSearches, 1);
  }
});

t.test('no search without the tool, when the input asks nothing, or with tool_choice none', async (t) => {
  for (const body of [
    { model: 'mock-small', input: 'What is the tallest building in Oslo?' },
    { model: 'mock-small', input: 'Thanks a lot', tools: [{ type: 'web_search' }] },
    { model: 'mock-small', input: 'What is new?', tools: [{ type: 'web_search' }], tool_choice: 'none' },
  ]) {
    const result = await create(body);
    t.equal(result.usage.webSearches, 0);
    t.notOk((result.body['output'] as JsonObject[]).some((item) => item['type'] === 'web_search_call'));
  }
});

t.test('max_output_tokens cuts the answer: status incomplete with the reason', async (t) => {
  const { body } = await create({ model: 'mock-small', input: 'Tell me a long story about many different things', max_output_tokens: 4 });
  t.equal(body['status'], 'incomplete');
  t.same(body['incomplete_details'], { reason: 'max_output_tokens' });
  const streamed = dataOf(await events({ model: 'mock-small', input: 'Tell me a long story about many different things', max_output_tokens: 4 }));
  t.equal(streamed.at(-1)!['type'], 'response.incomplete');
});

t.test('the stream is OpenAI’s event sequence, numbered, ending with the usage', async (t) => {
  const all = await events({ model: 'mock-small', input: 'Who won the match today?', tools: [{ type: 'web_search' }] });
  const data = dataOf(all);
  t.same(
    data.map((event) => event['sequence_number']),
    data.map((_, index) => index),
  );
  for (const event of all) if (event.type === 'event') t.equal(event.event, event.data['type'], 'the SSE event name is the type');
  const types = data.map((event) => event['type'] as string);
  const deltas = types.filter((type) => type === 'response.output_text.delta').length;
  t.ok(deltas > 3, 'text in several deltas');
  t.same(
    types.filter((type) => type !== 'response.output_text.delta'),
    [
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.web_search_call.in_progress',
      'response.web_search_call.searching',
      'response.web_search_call.completed',
      'response.output_item.done',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.done',
      'response.output_text.annotation.added',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ],
  );
  t.match(data[0], { response: { status: 'in_progress', output: [], usage: null } });
  const completed = data.at(-1)!['response'] as JsonObject;
  const text = data
    .filter((event) => event['type'] === 'response.output_text.delta')
    .map((event) => event['delta'])
    .join('');
  t.equal(text, ((completed['output'] as JsonObject[])[1]!['content'] as JsonObject[])[0]!['text']);
  const usage = all.at(-1);
  t.equal(usage?.type, 'usage');
  if (usage?.type === 'usage') t.equal(usage.usage.webSearches, 1);
  const whole = await create({ model: 'mock-small', input: 'Who won the match today?', tools: [{ type: 'web_search' }] });
  t.same(completed['output'], whole.body['output'], 'the stream ends with the same response as the JSON call');
});

t.test('a streamed function call sends its arguments as deltas, then done with the whole arguments', async (t) => {
  const data = dataOf(await events({ model: 'mock-small', input: 'call get_weather', tools: [weatherTool] }));
  const added = data.find((event) => event['type'] === 'response.output_item.added')!;
  t.match(added['item'], { type: 'function_call', name: 'get_weather', arguments: '', status: 'in_progress' });
  const deltas = data.filter((event) => event['type'] === 'response.function_call_arguments.delta').map((event) => event['delta']);
  const done = data.find((event) => event['type'] === 'response.function_call_arguments.done')!;
  t.equal(deltas.join(''), done['arguments']);
  t.ok(deltas.length > 1);
});

t.test('a cancelled call stops the stream', async (t) => {
  const controller = new AbortController();
  const slow = mockProviderType.create('mock', mockProviderType.configSchema.parse({ chunkDelayMs: 5 }), createProviderContext());
  let seen = 0;
  const error = await failure(async () => {
    for await (const _ of slow.responses!.stream({ model: 'mock-small', input: 'one two three four five', stream: true }, options(controller.signal))) {
      if (++seen === 3) controller.abort();
    }
  });
  t.equal(error.kind, 'aborted');
  t.equal(seen, 3);
});

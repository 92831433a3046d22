import type { LightMyRequestResponse } from 'fastify';
import t from 'tap';
import { startGateway } from '../../helpers/gateway.ts';

/**
 * The shape of a chat request is checked before anything reads it: what OpenAI documents for the
 * fields it names answers 400 `invalid_parameter` naming the field as the caller wrote it; what it
 * does not name passes through to the provider untouched.
 */
const gw = await startGateway(t);
t.beforeEach(() => gw.primary.reset());

const chat = (body: unknown): Promise<LightMyRequestResponse> =>
  gw.test.app.inject({
    method: 'POST',
    url: '/v1/chat/completions',
    headers: { authorization: `Bearer ${gw.key}`, 'content-type': 'application/json' },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });

const user = { role: 'user', content: 'hello' };
const withMessage = (message: Record<string, unknown>) => ({ model: 'solo', messages: [user, message] });
const toolCall = { id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{}' } };

type Tap = Pick<typeof t, 'equal' | 'same'>;

async function expect400(t: Tap, body: unknown, param: string | null): Promise<void> {
  const response = await chat(body);
  t.equal(response.statusCode, 400, `${JSON.stringify(body).slice(0, 100)} -> ${response.body.slice(0, 160)}`);
  const error = (response.json() as { error: Record<string, unknown> }).error;
  t.same(Object.keys(error).sort(), ['code', 'message', 'param', 'type'], 'in the envelope');
  t.equal(error.param, param, `names ${param}`);
  t.equal(error.code, param === null ? 'invalid_body' : 'invalid_parameter');
}

t.test('content that is not a string or an array of parts answers 400 naming messages[i].content', async (t) => {
  for (const content of [42, { text: 'hi' }, true]) await expect400(t, withMessage({ role: 'user', content }), 'messages[1].content');
  await expect400(t, withMessage({ role: 'user', content: [null] }), 'messages[1].content[0]');
  await expect400(t, withMessage({ role: 'user', content: [{ text: 'no type' }] }), 'messages[1].content[0].type');
  await expect400(t, withMessage({ role: 'user', content: [{ type: 'text', text: 7 }] }), 'messages[1].content[0].text');
  await expect400(t, withMessage({ role: 'user', content: [{ type: 'image_url', image_url: 'https://x/y.png' }] }), 'messages[1].content[0].image_url');
  await expect400(t, withMessage({ role: 'system' }), 'messages[1].content');
});

t.test('a name that is not a string answers 400 naming messages[i].name', async (t) => {
  for (const name of [5, { first: 'a' }]) await expect400(t, withMessage({ role: 'user', content: 'x', name }), 'messages[1].name');
  await expect400(t, withMessage({ role: 'function', content: 'x' }), 'messages[1].name');
});

t.test('malformed tool calls answer 400 naming the field', async (t) => {
  const assistant = (tool_calls: unknown) => withMessage({ role: 'assistant', content: null, tool_calls });
  await expect400(t, assistant('x'), 'messages[1].tool_calls');
  await expect400(t, assistant([{}]), 'messages[1].tool_calls[0].id');
  await expect400(t, assistant([null]), 'messages[1].tool_calls[0]');
  await expect400(t, assistant([{ ...toolCall, function: { name: 42, arguments: '{}' } }]), 'messages[1].tool_calls[0].function.name');
  await expect400(t, assistant([{ ...toolCall, function: { name: 'f', arguments: { a: 1 } } }]), 'messages[1].tool_calls[0].function.arguments');
  await expect400(t, assistant([{ ...toolCall, type: 'retrieval' }]), 'messages[1].tool_calls[0].type');
  await expect400(t, withMessage({ role: 'tool', content: 'result' }), 'messages[1].tool_call_id');
});

t.test('a role the API does not have answers 400 naming messages[i].role', async (t) => {
  await expect400(t, withMessage({ role: 'robot', content: 'x' }), 'messages[1].role');
  await expect400(t, withMessage({ role: 3, content: 'x' }), 'messages[1].role');
  await expect400(t, withMessage({ content: 'x' }), 'messages[1].role');
  await expect400(t, { model: 'solo', messages: [user, 'hello'] }, 'messages[1]');
});

t.test('a user, system, developer or tool message without content answers 400 naming messages[i].content', async (t) => {
  await expect400(t, { model: 'solo', messages: [{ role: 'user' }] }, 'messages[0].content');
  await expect400(t, { model: 'solo', messages: [{ role: 'user', name: 'ann' }] }, 'messages[0].content');
  for (const role of ['user', 'system', 'developer']) {
    await expect400(t, withMessage({ role }), 'messages[1].content');
    await expect400(t, withMessage({ role, content: null }), 'messages[1].content');
  }
  await expect400(t, withMessage({ role: 'tool', tool_call_id: 'call_1' }), 'messages[1].content');
  await expect400(t, withMessage({ role: 'function', name: 'lookup' }), 'messages[1].content');
});

t.test('an assistant message needs content unless it carries tool calls', async (t) => {
  await expect400(t, withMessage({ role: 'assistant' }), 'messages[1].content');
  await expect400(t, withMessage({ role: 'assistant', content: null, tool_calls: null }), 'messages[1].content');
  gw.primary.enqueue({ kind: 'reply' });
  const response = await chat({ model: 'solo', messages: [user, { role: 'assistant', content: null, tool_calls: [toolCall] }, { role: 'tool', tool_call_id: 'call_1', content: 'found' }] });
  t.equal(response.statusCode, 200, response.body.slice(0, 200));
});

t.test('numbers outside their documented ranges answer 400 naming the field', async (t) => {
  const cases: Array<[string, unknown]> = [
    ['temperature', 2.5],
    ['temperature', -0.1],
    ['top_p', 1.01],
    ['n', 0],
    ['n', 1.5],
    ['max_tokens', 0],
    ['max_completion_tokens', 2.5],
    ['presence_penalty', 2.1],
    ['frequency_penalty', -2.1],
    ['top_logprobs', 21],
    ['seed', 0.5],
    ['temperature', '0.7'],
  ];
  for (const [field, value] of cases) await expect400(t, { model: 'solo', messages: [user], [field]: value }, field);
  await expect400(t, { model: 'solo', messages: [user], logit_bias: { '50256': 101 } }, 'logit_bias.50256');
  await expect400(t, '{"model":"solo","messages":[{"role":"user","content":"x"}],"temperature":1e309}', 'temperature');
});

t.test('tools, tool_choice, stop, stream and response_format of the wrong shape answer 400 naming the field', async (t) => {
  const base = { model: 'solo', messages: [user] };
  await expect400(t, { ...base, tools: {} }, 'tools');
  await expect400(t, { ...base, tools: [{ type: 'function' }] }, 'tools[0].function');
  await expect400(t, { ...base, tools: [{ type: 'function', function: { name: 9 } }] }, 'tools[0].function.name');
  await expect400(t, { ...base, tools: [{ type: 'function', function: { name: 'f', parameters: 'none' } }] }, 'tools[0].function.parameters');
  await expect400(t, { ...base, tool_choice: 'sometimes' }, 'tool_choice');
  await expect400(t, { ...base, tool_choice: { type: 'function' } }, 'tool_choice.function');
  await expect400(t, { ...base, stop: 5 }, 'stop');
  await expect400(t, { ...base, stop: ['a', 1] }, 'stop[1]');
  await expect400(t, { ...base, stream: 'yes' }, 'stream');
  await expect400(t, { ...base, stream_options: { include_usage: 'yes' } }, 'stream_options.include_usage');
  await expect400(t, { ...base, response_format: { type: 'json_schema' } }, 'response_format.json_schema');
  await expect400(t, { ...base, user: 12 }, 'user');
  await expect400(t, { ...base, model: 7 }, 'model');
  await expect400(t, { ...base, messages: [] }, 'messages');
  await expect400(t, [base], null);
});

t.test('arrays and objects nested deeper than 64 levels answer 400 naming the field, never a stack overflow', async (t) => {
  const deep = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
  const inContent = `{"model":"solo","messages":[{"role":"user","content":[{"type":"text","text":"x","extra":${deep(20_000)}}]}]}`;
  const inTools = `{"model":"solo","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":${deep(20_000)}}}]}`;
  // One level over the bound: the body, then 64 arrays.
  const inExtra = `{"model":"solo","messages":[{"role":"user","content":"x"}],"vendor_option":${deep(64)}}`;
  await expect400(t, inContent, 'messages');
  await expect400(t, inTools, 'tools');
  await expect400(t, inExtra, 'vendor_option');
  await expect400(t, deep(100_000), null);
});

t.test('a body nested exactly 64 levels deep is served', async (t) => {
  gw.primary.enqueue({ kind: 'reply' });
  // The body is level 1 and vendor_option's outermost array level 2: 63 arrays make 64 levels.
  const response = await chat(`{"model":"solo","messages":[{"role":"user","content":"x"}],"vendor_option":${'['.repeat(63)}${']'.repeat(63)}}`);
  t.equal(response.statusCode, 200, response.body.slice(0, 200));
});

t.test('fields, content parts and tools the gateway does not know pass through to the provider unchanged', async (t) => {
  gw.primary.enqueue({ kind: 'reply' });
  const body = {
    model: 'solo',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'look' },
          { type: 'video_url', video_url: { url: 'https://x/v.mp4' } },
        ],
        vendor_hint: 1,
      },
      { role: 'assistant', content: 'ok', reasoning_content: 'thought' },
      { role: 'user', content: 'and?' },
    ],
    tools: [{ type: 'web_search_preview', search_context_size: 'low' }],
    top_k: 3,
    service_tier: 'flex',
    metadata: { team: 'a' },
  };
  const response = await chat(body);
  t.equal(response.statusCode, 200, response.body.slice(0, 200));
  const sent = gw.primary.requests[0]?.body as Record<string, unknown>;
  t.same(sent.messages, body.messages);
  t.same(sent.tools, body.tools);
  t.equal(sent.top_k, 3);
  t.equal(sent.service_tier, 'flex');
  t.same(sent.metadata, { team: 'a' });
});

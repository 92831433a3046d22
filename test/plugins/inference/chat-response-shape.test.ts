import { Ajv } from 'ajv';
import t from 'tap';
import { startGateway, type Gateway } from '../../helpers/gateway.ts';

/**
 * Chat answers match OpenAI's published reference for POST /v1/chat/completions whichever provider
 * served them: an OpenAI-compatible upstream (the fake leaves out `refusal`, as vLLM and Ollama
 * do), the Anthropic upstream (translated) and the offline mock. Fields the reference marks
 * required are present, null where they are nullable.
 *
 * The schemas are OpenAI's, written from the API reference ("The chat completion object", "The
 * chat completion chunk object": https://platform.openai.com/docs/api-reference/chat/object and
 * /chat/streaming) and its OpenAPI document (github.com/openai/openai-openapi: the `required`
 * lists of CreateChatCompletionResponse, ChatCompletionResponseMessage, ChatCompletionMessageToolCall,
 * CompletionUsage and CreateChatCompletionStreamResponse). Only what the reference requires is
 * checked; optional fields may come or not.
 */

t.setTimeout(240_000);

const nullableString = { type: ['string', 'null'] };

/** CompletionUsage: prompt_tokens, completion_tokens, total_tokens are required. */
const completionUsage = {
  type: 'object',
  required: ['prompt_tokens', 'completion_tokens', 'total_tokens'],
  properties: { prompt_tokens: { type: 'integer' }, completion_tokens: { type: 'integer' }, total_tokens: { type: 'integer' } },
};

/** ChatCompletionMessageToolCall: id, type (`function`) and function {name, arguments} are required. */
const toolCall = {
  type: 'object',
  required: ['id', 'type', 'function'],
  properties: {
    id: { type: 'string' },
    type: { const: 'function' },
    function: { type: 'object', required: ['name', 'arguments'], properties: { name: { type: 'string' }, arguments: { type: 'string' } } },
  },
};

/** CreateChatCompletionResponse; each choice's finish_reason, index, message and logprobs are required, message's role, content and refusal too. */
const chatCompletion = {
  type: 'object',
  required: ['id', 'object', 'created', 'model', 'choices'],
  properties: {
    id: { type: 'string' },
    object: { const: 'chat.completion' },
    created: { type: 'integer' },
    model: { type: 'string' },
    choices: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['index', 'message', 'finish_reason', 'logprobs'],
        properties: {
          index: { type: 'integer' },
          finish_reason: { enum: ['stop', 'length', 'tool_calls', 'content_filter', 'function_call'] },
          logprobs: { type: ['object', 'null'] },
          message: {
            type: 'object',
            required: ['role', 'content', 'refusal'],
            properties: { role: { const: 'assistant' }, content: nullableString, refusal: nullableString, tool_calls: { type: 'array', items: toolCall } },
          },
        },
      },
    },
    usage: completionUsage,
  },
};

/** CreateChatCompletionStreamResponse; each choice's delta, finish_reason and index are required. */
const chatCompletionChunk = {
  type: 'object',
  required: ['id', 'object', 'created', 'model', 'choices'],
  properties: {
    id: { type: 'string' },
    object: { const: 'chat.completion.chunk' },
    created: { type: 'integer' },
    model: { type: 'string' },
    choices: {
      type: 'array',
      items: {
        type: 'object',
        required: ['delta', 'finish_reason', 'index'],
        properties: {
          index: { type: 'integer' },
          finish_reason: { enum: ['stop', 'length', 'tool_calls', 'content_filter', 'function_call', null] },
          delta: { type: 'object', properties: { content: nullableString, refusal: nullableString, role: { const: 'assistant' } } },
        },
      },
    },
    usage: { anyOf: [{ type: 'null' }, completionUsage] },
  },
};

const ajv = new Ajv({ allErrors: true, strict: false });
const isCompletion = ajv.compile(chatCompletion);
const isChunk = ajv.compile(chatCompletionChunk);
const isUsage = ajv.compile(completionUsage);

const gw: Gateway = await startGateway(t);
t.beforeEach(() => {
  gw.primary.reset();
  gw.anthropic.reset();
});

const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];

async function chat(body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const response = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (response.status !== 200) throw new Error(`${response.status}: ${await response.text()}`);
  return (await response.json()) as Record<string, unknown>;
}

/** Every `data:` frame of a streamed chat but the final `[DONE]`, parsed. */
async function chunksOf(body: Record<string, unknown>): Promise<Array<Record<string, any>>> {
  const response = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
  });
  const frames = (await response.text())
    .split('\n\n')
    .filter((frame) => frame.startsWith('data: '))
    .map((frame) => frame.slice('data: '.length));
  if (frames.pop() !== '[DONE]') throw new Error('the stream did not end with [DONE]');
  return frames.map((frame) => JSON.parse(frame));
}

const ask = (model: string) => ({ model, messages: [{ role: 'user', content: 'Weather in Oslo?' }], max_tokens: 32 });

/** Each provider, and how to make its upstream answer a text and a tool call (the mock answers itself). */
const served: Array<{ model: string; text(): void; toolCall(): void }> = [
  {
    model: 'solo',
    text: () => gw.primary.enqueue({ kind: 'reply', content: 'Cold.' }),
    toolCall: () => gw.primary.enqueue({ kind: 'reply', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: { city: 'Oslo' } }] }),
  },
  {
    model: 'claude',
    text: () => gw.anthropic.enqueue({ kind: 'reply', content: 'Cold.' }),
    toolCall: () => gw.anthropic.enqueue({ kind: 'reply', toolCalls: [{ name: 'get_weather', input: { city: 'Oslo' } }] }),
  },
  { model: 'mock-small', text: () => undefined, toolCall: () => undefined },
];

for (const { model, text, toolCall } of served) {
  t.test(`${model}: a JSON answer has every field the reference requires`, async (t) => {
    text();
    const completion = await chat(ask(model));
    t.ok(isCompletion(completion), 'matches the reference', { errors: isCompletion.errors });
    t.match(completion, { choices: [{ message: { refusal: null }, logprobs: null }] });
  });

  t.test(`${model}: a JSON tool call has every field the reference requires`, async (t) => {
    toolCall();
    const completion = await chat({ ...ask(model), tools, tool_choice: 'required' });
    t.ok(isCompletion(completion), 'matches the reference', { errors: isCompletion.errors });
    t.match(completion, { choices: [{ finish_reason: 'tool_calls', message: { tool_calls: [{ function: { name: 'get_weather' } }] } }] });
  });

  t.test(`${model}: every chunk of a stream has every field the reference requires`, async (t) => {
    text();
    const chunks = await chunksOf(ask(model));
    for (const [index, chunk] of chunks.entries()) t.ok(isChunk(chunk), `chunk ${index} matches the reference`, { errors: isChunk.errors });
    t.same(chunks.at(-1)?.['choices'], [], 'the usage chunk has no choices');
    t.ok(isUsage(chunks.at(-1)?.['usage']), 'and carries the usage', { errors: isUsage.errors });
    t.equal(chunks[0]?.['choices'][0]?.delta.role, 'assistant', 'the first delta names the role');
  });
}

t.test('translated from Anthropic, the first delta carries refusal: null as OpenAI’s does', async (t) => {
  gw.anthropic.enqueue({ kind: 'reply', content: 'Cold.' });
  const chunks = await chunksOf(ask('claude'));
  t.same(chunks[0]?.['choices'][0]?.delta, { role: 'assistant', content: '', refusal: null });
});

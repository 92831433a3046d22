import t from 'tap';
import { responsesInputTokenBound } from '../../../providers/input-token-bound.ts';
import { planMockResponse } from '../../../providers/mock/mock-responses.ts';
import { mapResponsesInputTexts, parseResponsesRequest } from '../../../plugins/inference/responses-request.ts';

/** What /v1/responses reads of a request: the texts data guardrails see, and the input it reserves. */

const upper = (text: string) => text.toUpperCase();

t.test('guardrails read instructions and a string input', async (t) => {
  const mapped = mapResponsesInputTexts(parseResponsesRequest({ model: 'm', instructions: 'be kind', input: 'hello' }), upper);
  t.same([mapped.instructions, mapped.input], ['BE KIND', 'HELLO']);
});

t.test('guardrails read message contents, text parts and function outputs of input items, nothing else', async (t) => {
  const body = parseResponsesRequest({
    model: 'm',
    input: [
      { role: 'user', content: 'plain' },
      {
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_text', text: 'part' },
          { type: 'input_image', image_url: 'https://example.com/a.png' },
        ],
      },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'earlier answer' }] },
      { type: 'function_call', call_id: 'c1', name: 'lookup', arguments: '{"q":"args"}' },
      { type: 'function_call_output', call_id: 'c1', output: 'result' },
    ],
  });
  const mapped = mapResponsesInputTexts(body, upper);
  t.same(mapped.input, [
    { role: 'user', content: 'PLAIN' },
    {
      type: 'message',
      role: 'user',
      content: [
        { type: 'input_text', text: 'PART' },
        { type: 'input_image', image_url: 'https://example.com/a.png' },
      ],
    },
    { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'EARLIER ANSWER' }] },
    { type: 'function_call', call_id: 'c1', name: 'lookup', arguments: '{"q":"args"}' },
    { type: 'function_call_output', call_id: 'c1', output: 'RESULT' },
  ]);
});

t.test('a body with nothing to change comes back as itself', async (t) => {
  const body = parseResponsesRequest({ model: 'm', instructions: 'same', input: [{ role: 'user', content: 'same' }] });
  t.equal(
    mapResponsesInputTexts(body, (text) => text),
    body,
  );
});

const request = parseResponsesRequest({
  model: 'mock-small',
  instructions: 'Answer in one sentence.',
  input: [
    { role: 'user', content: [{ type: 'input_text', text: 'What is the weather in Paris, and in Lyon?' }] },
    { type: 'function_call', call_id: 'c1', name: 'weather', arguments: '{"city":"Paris"}' },
    { type: 'function_call_output', call_id: 'c1', output: '{"celsius":21}' },
  ],
  tools: [{ type: 'function', name: 'weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } }],
});

t.test('on the mock the reservation is exactly the input it reports', async (t) => {
  const reported = planMockResponse(request, 0).usage.tokens.inputTokens;
  t.equal(responsesInputTokenBound(request, { tokenizers: ['mock'], imageTokens: 0 }), reported);
});

t.test('with an unknown tokenizer the reservation bounds every byte the request sends', async (t) => {
  const bound = responsesInputTokenBound(request, { tokenizers: ['bytes'], imageTokens: 0 });
  const texts = ['Answer in one sentence.', 'What is the weather in Paris, and in Lyon?', '{"city":"Paris"}', '{"celsius":21}', JSON.stringify(request.tools)];
  t.ok(typeof bound === 'number' && bound >= texts.reduce((sum, text) => sum + Buffer.byteLength(text), 0), `bound ${String(bound)}`);
});

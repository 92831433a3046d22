import { createOpenAI } from '@ai-sdk/openai';
import { generateObject, generateText, streamText } from 'ai';
import { zodTextFormat } from 'openai/helpers/zod';
import t from 'tap';
import { z } from 'zod';
import { startGateway } from '../../helpers/gateway.ts';

/**
 * Structured output and the Vercel AI SDK over /v1/responses, offline: the gateway in front of
 * the mock provider. The AI SDK's default OpenAI model (`openai(id)`) calls the Responses API.
 */

t.setTimeout(240_000);

const gw = await startGateway(t);
const openai = createOpenAI({ baseURL: `${gw.url}/v1`, apiKey: gw.key });
const event = z.object({ title: z.string(), day: z.iso.date(), attendees: z.array(z.string()).min(1), online: z.boolean() });

/** A fetch that records the path of every request a client makes through it. */
function recordingFetch(paths: string[]): typeof fetch {
  return (input, init) => {
    paths.push(new URL(input instanceof Request ? input.url : String(input)).pathname);
    return fetch(input, init);
  };
}

t.test('the AI SDK’s default provider model calls /v1/responses: generateText', async (t) => {
  const paths: string[] = [];
  const sdk = createOpenAI({ baseURL: `${gw.url}/v1`, apiKey: gw.key, fetch: recordingFetch(paths) });
  const result = await generateText({ model: sdk('mock-small'), prompt: 'Say hello in five words' });
  t.same(paths, ['/v1/responses']);
  t.ok(result.text.length > 0, 'some text');
  t.equal(result.finishReason, 'stop');
  t.ok(result.usage.inputTokens! > 0 && result.usage.outputTokens! > 0, 'usage from the final response');
  t.equal(result.response.modelId, 'mock-small');
});

t.test('streamText streams the text deltas and ends with the usage', async (t) => {
  const result = streamText({ model: openai('mock-small'), prompt: 'Tell me a short story about a lighthouse' });
  const pieces: string[] = [];
  for await (const piece of result.textStream) pieces.push(piece);
  t.ok(pieces.length > 1, 'several deltas');
  t.equal(pieces.join(''), await result.text);
  t.equal(await result.finishReason, 'stop');
  t.ok((await result.usage).outputTokens! > 0);
});

t.test('generateObject with a zod schema answers an object the schema accepts', async (t) => {
  const { object } = await generateObject({ model: openai('mock-small'), schema: event, prompt: 'Plan a team meeting' });
  t.ok(event.safeParse(object).success, JSON.stringify(object));
});

t.test('the openai SDK’s responses.parse() with zodTextFormat parses the answer with zod', async (t) => {
  const response = await gw.client.responses.parse({ model: 'mock-small', input: 'Plan a team meeting', text: { format: zodTextFormat(event, 'event') } });
  t.ok(response.output_parsed, 'parsed');
  t.ok(event.safeParse(response.output_parsed).success, JSON.stringify(response.output_parsed));
  t.equal(response.model, 'mock-small');
});

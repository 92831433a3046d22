import { createOpenAI } from '@ai-sdk/openai';
import { ChatOpenAI } from '@langchain/openai';
import { generateObject } from 'ai';
import { zodResponseFormat } from 'openai/helpers/zod';
import t from 'tap';
import { z } from 'zod';
import { startGateway } from '../../helpers/gateway.ts';

/**
 * Structured output offline: three SDKs' own structured-output calls against the gateway's chat
 * route and the in-process mock model, which answers `response_format: json_schema` with a value
 * valid against the schema. Each SDK checks the answer against its zod schema itself; the tests
 * check it again.
 */

t.setTimeout(240_000);

const Person = z.object({
  name: z.string(),
  age: z.number().int(),
  languages: z.array(z.string()),
  role: z.enum(['engineer', 'designer', 'manager']),
});

const gw = await startGateway(t);
const prompt = 'Invent a person who works on a software team.';

t.test('openai: chat.completions.parse with zodResponseFormat answers a parsed object valid against the schema', async (t) => {
  const completion = await gw.client.chat.completions.parse({
    model: 'mock-small',
    messages: [{ role: 'user', content: prompt }],
    response_format: zodResponseFormat(Person, 'person'),
  });
  const message = completion.choices[0]?.message;
  t.equal(message?.refusal, null);
  t.ok(Person.safeParse(message?.parsed).success, 'parsed is a Person');
  t.same(message?.parsed, JSON.parse(message?.content ?? 'null'), 'parsed is the content');
});

t.test('Vercel AI SDK: generateObject through the chat provider answers an object valid against the schema', async (t) => {
  const openai = createOpenAI({ baseURL: `${gw.url}/v1`, apiKey: gw.key });
  const { object, usage } = await generateObject({ model: openai.chat('mock-small'), schema: Person, prompt, maxRetries: 0 });
  t.ok(Person.safeParse(object).success, 'object is a Person');
  t.ok((usage.inputTokens ?? 0) > 0, 'usage came back');
});

t.test('LangChain: ChatOpenAI.withStructuredOutput answers an object valid against the schema', async (t) => {
  const model = new ChatOpenAI({ configuration: { baseURL: `${gw.url}/v1` }, apiKey: gw.key, model: 'mock-small', maxRetries: 0 });
  const person = await model.withStructuredOutput(Person).invoke(prompt);
  t.ok(Person.safeParse(person).success, 'the answer is a Person');
});

import t from 'tap';
import { chunkTextAs } from '../../../plugins/inference/chat-capability.ts';

/** The parse of `text` under another model, without its usage field. */
function asForwarded(text: string, model: string): Record<string, unknown> {
  const { usage: _usage, ...rest } = JSON.parse(text) as Record<string, unknown>;
  return { ...rest, model };
}

const chunk = (fields: string) => `{"id":"c1","object":"chat.completion.chunk","created":1,${fields},"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}`;

t.test('a chunk under the same model name goes on as the upstream wrote it', async (t) => {
  const raw = chunk('"model":"gpt-4o-mini"');
  t.equal(chunkTextAs(raw, 'gpt-4o-mini', 'gpt-4o-mini'), raw);
});

t.test('the model is put under our id, and nothing else changes', async (t) => {
  const text = chunkTextAs(chunk('"model":"gpt-4o-mini-2024-07-18"'), 'gpt-4o-mini-2024-07-18', 'team/fast "one"');
  t.equal(text, chunk('"model":"team/fast \\"one\\""'));
  t.equal(JSON.parse(text!).model, 'team/fast "one"');
});

t.test("OpenAI's usage: null is dropped: the gateway writes its own usage chunk", async (t) => {
  const raw = `${chunk('"model":"up"').slice(0, -1)},"usage":null}`;
  const text = chunkTextAs(raw, 'up', 'ours');
  t.same(JSON.parse(text!), asForwarded(raw, 'ours'));
  t.notMatch(text!, /usage/);
});

t.test('content that quotes the keys changes nothing: inside a string every quote is escaped', async (t) => {
  const raw = `{"id":"c1","model":"up","choices":[{"index":0,"delta":{"content":"say \\"model\\":\\"up\\" and \\"usage\\":null"},"finish_reason":null}],"usage":null}`;
  const text = chunkTextAs(raw, 'up', 'ours');
  t.same(JSON.parse(text!), asForwarded(raw, 'ours'));
});

t.test('what cannot be rewritten exactly is left to serialising the chunk', async (t) => {
  t.equal(chunkTextAs(chunk('"model": "up"'), 'up', 'ours'), null, 'another spelling of the model');
  t.equal(chunkTextAs(chunk('"model":"up","x":{"model":"up"}'), 'up', 'ours'), null, 'a second model key');
  t.equal(chunkTextAs(chunk('"model":"other"'), 'up', 'ours'), null, 'a model the chunk does not name');
  t.equal(chunkTextAs(`${chunk('"model":"up"').slice(0, -1)},"usage": null}`, 'up', 'up'), null, 'usage spelled otherwise');
  t.equal(chunkTextAs(`{"usage":null,${chunk('"model":"up"').slice(1)}`, 'up', 'up'), null, 'usage first');
  const twice = `{"usage":{"total_tokens":3},${chunk('"model":"up"').slice(1, -1)},"usage":null}`;
  t.equal(chunkTextAs(twice, 'up', 'up'), null, 'a usage key besides the null one (JSON.parse keeps the last)');
  t.equal(chunkTextAs(`{"id":"c1",\n"model":"up"}`, 'up', 'up'), null, 'a line break would end the SSE frame');
  t.equal(chunkTextAs(`{"id":"c1",\r"model":"up"}`, 'up', 'up'), null, 'so would a carriage return');
});

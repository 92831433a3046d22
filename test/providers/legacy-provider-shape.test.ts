import t from 'tap';
import { fileURLToPath } from 'node:url';
import type OpenAI from 'openai';
import { modalitiesOf, type ChatStreamEvent } from '../../core/gateway/provider.ts';
import { createProviderContext, resolveProviderType } from '../../providers/index.ts';
import { startGateway, TEST_PRICES } from '../helpers/gateway.ts';

// A package written against the shape before modalities: `capabilities: Set(['chat'])` and `chat`.
const legacyPackage = fileURLToPath(new URL('../fixtures/provider-legacy/index.js', import.meta.url));
const options = { signal: new AbortController().signal, requestId: 'r' };
const ask = { model: 'upstream', messages: [{ role: 'user' as const, content: 'hi' }] };

function recordingLog() {
  const lines: Array<{ fields: Record<string, unknown>; message: string }> = [];
  return { lines, warn: (fields: Record<string, unknown>, message: string) => void lines.push({ fields, message }) };
}

t.test('a package in the old shape still loads, offering language', async (t) => {
  const type = await resolveProviderType({ package: legacyPackage });
  const provider = type.create('old', {}, createProviderContext());
  t.equal(provider.name, 'old');
  t.same(modalitiesOf(provider), ['language']);
  const result = await provider.language!.chat(ask, options);
  t.equal(result.completion.choices[0]?.message.content, 'legacy: hi');
});

t.test('loading an old-shape provider logs one deprecation line naming it', async (t) => {
  const log = recordingLog();
  const type = await resolveProviderType({ package: legacyPackage }, log);
  type.create('old', {}, createProviderContext());
  t.equal(log.lines.length, 1);
  t.match(log.lines[0]?.message, /provider "old".*deprecated provider shape/);
  t.same(log.lines[0]?.fields, { provider: 'old', package: legacyPackage });
});

t.test('a package in the modality shape loads without a deprecation line', async (t) => {
  const log = recordingLog();
  const type = await resolveProviderType({ package: fileURLToPath(new URL('../fixtures/provider-echo/index.js', import.meta.url)) }, log);
  t.same(modalitiesOf(type.create('echo', {}, createProviderContext())), ['language']);
  t.equal(log.lines.length, 0);
});

t.test('an old provider that could not stream streams its whole answer as one chunk', async (t) => {
  const type = await resolveProviderType({ package: legacyPackage });
  const events: ChatStreamEvent[] = [];
  for await (const event of type.create('old', {}, createProviderContext()).language!.chatStream(ask, options)) events.push(event);
  t.equal(events.length, 2);
  t.match(events[0], { type: 'chunk', chunk: { object: 'chat.completion.chunk', choices: [{ delta: { role: 'assistant', content: 'legacy: hi' }, finish_reason: 'stop' }] } });
  t.match(events[1], { type: 'usage', usage: { inputTokens: 3, outputTokens: 2 } });
});

t.test('an old-shape package serves chat through the gateway, JSON and streamed', async (t) => {
  const gw = await startGateway(t, {
    inference: {
      providers: { old: { package: legacyPackage } },
      models: { aged: { routes: [{ provider: 'old', model: 'upstream' }], prices: TEST_PRICES } },
    },
  });
  const completion = await gw.client.chat.completions.create({ model: 'aged', messages: [{ role: 'user', content: 'json' }] });
  t.equal(completion.choices[0]?.message.content, 'legacy: json');
  const stream = await gw.client.chat.completions.create({ model: 'aged', messages: [{ role: 'user', content: 'sse' }], stream: true });
  let text = '';
  for await (const chunk of stream as AsyncIterable<OpenAI.ChatCompletionChunk>) text += chunk.choices[0]?.delta.content ?? '';
  t.equal(text, 'legacy: sse');
});

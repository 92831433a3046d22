import t from 'tap';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { MeteringTokens } from '../../../plugins/metering/index.ts';
import { allPlugins, buildTestApp, createKey } from '../../helpers/app.ts';
import { fastDeriveKey } from '../../helpers/people.ts';

/**
 * The account assistant: answers with the gateway's own models (the offline mock here, which calls
 * the tool a question names: providers/mock/README.md) through the in-process gateway call service,
 * reading the account through the caller's read-only operations, run with the caller's credential.
 */
t.setTimeout(180_000);
const prices = { inputPerMTokUsd: 1, outputPerMTokUsd: 2 };
const test = await buildTestApp(t, {
  deriveKey: fastDeriveKey,
  plugins: {
    ...allPlugins(),
    inference: {
      providers: { mock: { type: 'mock' } },
      models: {
        'mock-small': { routes: [{ provider: 'mock', model: 'mock-small' }], prices },
        'mock-image': {
          routes: [{ provider: 'mock', model: 'mock-image' }],
          modalities: { input: ['text'], output: ['image'] },
          images: { sizes: ['256x256', '1024x1024'] },
          prices: { ...prices, perImageUsd: 0.04 },
        },
      },
    },
    metering: { initialCreditUsd: 100 },
  },
});
const container = test.app.svc.container;
const db = container.resolve(Tokens.Database);
const flush = async () => {
  await container.resolve(MeteringTokens.Admission).idle();
  const writer = container.resolve(MeteringTokens.Writer);
  for (let round = 0; round < 50 && writer.snapshot().queued > 0; round += 1) await writer.flush();
};
const ask = (token: string, question: string, extra: Record<string, unknown> = {}) =>
  test.call('POST', '/client/assistant/messages', { token, body: { messages: [{ role: 'user', content: question }], ...extra } });

t.test('the assistant answers with the result of a real read operation it called as a tool', async (t) => {
  const { key } = await createKey(test, { name: 'asks about credit', scopes: ['inference', 'usage:read'] });
  const response = await ask(key, 'How much credit is left? Please call credits_get');
  t.equal(response.statusCode, 200, response.body);
  const reply = response.json();
  t.match(reply, { object: 'assistant.reply', model: 'mock-small', toolCalls: [{ name: 'credits_get', ok: true, errorCode: null }] });
  t.match(reply.message.content, /The credits_get tool returned: "\{"object":"credits","balanceUsd":/, 'the answer reads the operation’s result');
  t.equal(reply.requestIds.length, 2, 'one call asked for the tool, one answered with its result');
  t.equal(reply.usage.calls, 2);
  t.ok(reply.usage.inputTokens > 0 && reply.usage.outputTokens > 0);
});

t.test('a caller without usage:read cannot get usage through the assistant', async (t) => {
  const { key } = await createKey(test, { name: 'inference only', scopes: ['inference'] });
  const response = await ask(key, 'call credits_get and usage_get');
  t.equal(response.statusCode, 200, response.body);
  const reply = response.json();
  t.same(reply.toolCalls, [], 'the tools are not even offered to it');
  t.notMatch(reply.message.content, /balanceUsd|totals/);
  // Should a model name a tool it was not offered, the call is refused exactly as over HTTP.
  const tools = container.resolve(Tokens.OperationTools);
  const credential = await container.resolve(Tokens.Authenticator).authenticate(`Bearer ${key}`);
  const names = tools.list(credential, { readOnly: true }).map((tool) => tool.name);
  t.notOk(names.includes('usage_get') || names.includes('credits_get'), 'no usage tool for this key');
  const refused = await tools.call('usage_get', {}, { credential, requestId: 'req_test', logger: test.app.log }, { readOnly: true, surface: 'assistant' });
  t.equal(refused.isError, true);
  t.match(JSON.parse((refused.content[0] as { text: string }).text), { error: { code: 'missing_scope' } });
});

t.test('the assistant never writes: its tools are read-only, and a write tool is not found', async (t) => {
  const tools = container.resolve(Tokens.OperationTools);
  const owner = await container.resolve(Tokens.Authenticator).authenticate(`Bearer ${test.ownerToken}`);
  const registry = container.resolve(Tokens.Operations);
  const listed = tools.list(owner, { readOnly: true });
  t.ok(listed.length > 5, `the owner's read tools (${listed.length})`);
  for (const tool of listed) t.equal(registry.get(tool.name.replaceAll('_', '.'))?.readOnly ?? tool.annotations?.readOnlyHint, true, `${tool.name} is read-only`);
  const keysBefore = (await test.call('GET', '/client/keys')).json().data.length;
  const write = await tools.call('keys_create', { name: 'by the assistant' }, { credential: owner, requestId: 'req_test', logger: test.app.log }, { readOnly: true, surface: 'assistant' });
  t.match(JSON.parse((write.content[0] as { text: string }).text), { error: { code: 'tool_not_found' } });
  const asked = await ask(test.ownerToken, 'call keys_create');
  t.same(asked.json().toolCalls, [], 'not offered, so not called');
  t.equal((await test.call('GET', '/client/keys')).json().data.length, keysBefore, 'no key was made');
});

t.test("each of the assistant's calls is billed in the request log: to the key, or for a person to the organisation", async (t) => {
  const { id, key } = await createKey(test, { name: 'billed', scopes: ['inference', 'usage:read'] });
  const byKey = (await ask(key, 'call credits_get')).json();
  const byOwner = (await ask(test.ownerToken, 'What is my balance? call credits_get')).json();
  await flush();
  for (const requestId of byKey.requestIds) {
    const { rows } = await db.query<{ key_id: string | null; endpoint: string; cost_micros: string; status_code: number }>(
      'SELECT key_id, endpoint, cost_micros::text, status_code FROM request_logs WHERE id = $1',
      [requestId],
    );
    t.match(rows, [{ key_id: id, endpoint: '/v1/chat/completions', status_code: 200 }], requestId);
    t.ok(BigInt(rows[0]!.cost_micros) > 0n, 'it cost something');
  }
  const logged = await test.call('GET', `/client/requests/${byOwner.requestIds[0]}`);
  t.equal(logged.statusCode, 200, 'the owner finds their own assistant call in the request log');
  t.match(logged.json(), { model: 'mock-small', status: 200 });
  const keyRows = await test.call('GET', `/client/requests?keyId=${id}`);
  t.equal(keyRows.json().data.length, 2, "the key's request log lists both calls");
});

t.test('the gateway decides as for a /v1 call: an unknown model is 404 model_not_found naming model', async (t) => {
  const response = await ask(test.ownerToken, 'hello', { model: 'no-such-model' });
  t.equal(response.statusCode, 404);
  t.match(response.json().error, { code: 'model_not_found', param: 'model' });
  const { key } = await createKey(test, { name: 'no inference', scopes: ['usage:read'] });
  t.equal((await ask(key, 'hello')).json().error.code, 'missing_scope', 'the assistant takes the inference scope');
});

t.test('the conversation must end with the question', async (t) => {
  const response = await test.call('POST', '/client/assistant/messages', {
    body: {
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'hello' },
      ],
    },
  });
  t.equal(response.statusCode, 400);
  t.match(response.json().error, { code: 'invalid_parameter', param: 'messages' });
});

t.test('POST /assistant/images draws one image with the image model, billed as an image call', async (t) => {
  const response = await test.call('POST', '/client/assistant/images', { body: { prompt: 'A lighthouse at dusk', size: '256x256' } });
  t.equal(response.statusCode, 200, response.body);
  const image = response.json();
  t.match(image, { object: 'assistant.image', model: 'mock-image', prompt: 'A lighthouse at dusk', contentType: 'image/png', url: null });
  const bytes = Buffer.from(image.b64Json, 'base64');
  t.same([...bytes.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], 'a PNG');
  await flush();
  const { rows } = await db.query<{ endpoint: string; cost_micros: string }>('SELECT endpoint, cost_micros::text FROM request_logs WHERE id = $1', [image.requestId]);
  t.match(rows, [{ endpoint: '/v1/images/generations', cost_micros: '40000' }], 'one image at $0.04');
  const wrongSize = await test.call('POST', '/client/assistant/images', { body: { prompt: 'x', size: '7x7' } });
  t.equal(wrongSize.statusCode, 400);
  t.match(wrongSize.json().error, { code: 'invalid_parameter', param: 'size' });
});

import OpenAI from 'openai';
import t from 'tap';
import { failoverModels, startGateway, TEST_PRICES } from '../../helpers/gateway.ts';

/** POST /v1/embeddings through the gateway, driven with the official openai package. */

t.setTimeout(240_000);

const embedding = { modalities: { input: ['text'], output: ['embedding'] }, prices: TEST_PRICES };
const gw = await startGateway(t, {
  inference: {
    models: {
      ...failoverModels('embed', 'embed', embedding),
      'embed-mock': { ...embedding, routes: [{ provider: 'mock', model: 'mock-embed' }] },
      'chat-only': { routes: [{ provider: 'primary', model: 'up-chat' }], prices: TEST_PRICES },
    },
  },
});
const primary = gw.primary;
const secondary = gw.secondary;
t.beforeEach(() => {
  primary.reset();
  secondary.reset();
});

/** The fake upstream's vector for `input` as float32 (what base64 carries). */
async function upstreamVector(input: string): Promise<number[]> {
  const direct = new OpenAI({ apiKey: 'x', baseURL: primary.baseUrl, maxRetries: 0 });
  const { data } = await direct.embeddings.create({ model: 'm', input, encoding_format: 'float' });
  primary.reset();
  return Array.from(Float32Array.from(data[0]!.embedding));
}

t.test('the SDK default (it asks for base64) gets the upstream vectors, decoded by the SDK', async (t) => {
  const expected = await upstreamVector('hello');
  const { data: result, response } = await gw.client.embeddings.create({ model: 'embed-duo', input: 'hello' }).withResponse();
  t.equal(primary.requests[0]?.body.encoding_format, 'base64', 'the SDK asked for base64, and the gateway passed it on');
  t.same(result.data[0]?.embedding, expected, 'the float upstream answer was encoded as float32 base64 for the SDK');
  t.equal(result.object, 'list');
  t.equal(result.model, 'embed-duo', 'our model id, not the upstream one');
  t.same(result.usage, { prompt_tokens: 12, total_tokens: 12 });
  t.equal(response.headers.get('x-svc-provider'), 'primary');
  t.equal(primary.requests[0]?.body.model, 'up-embed-primary');
});

t.test('encoding_format float answers plain numbers', async (t) => {
  const result = await gw.client.embeddings.create({ model: 'embed-duo', input: ['one', 'two'], encoding_format: 'float' });
  t.same(
    result.data.map((item) => [item.object, item.index, Array.isArray(item.embedding)]),
    [
      ['embedding', 0, true],
      ['embedding', 1, true],
    ],
  );
});

t.test('encoding_format base64 asked explicitly answers the base64 string', async (t) => {
  const expected = await upstreamVector('hello');
  const result = await gw.client.embeddings.create({ model: 'embed-duo', input: 'hello', encoding_format: 'base64' });
  const text = result.data[0]?.embedding as unknown as string;
  t.type(text, 'string');
  const bytes = Buffer.from(text, 'base64');
  t.same(Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4)), expected);
});

t.test('token arrays and arrays of token arrays are accepted and passed on', async (t) => {
  await gw.client.embeddings.create({ model: 'embed-duo', input: [1, 2, 3] });
  await gw.client.embeddings.create({ model: 'embed-duo', input: [[1, 2], [3]] });
  t.same(
    primary.requests.map((r) => r.body.input),
    [
      [1, 2, 3],
      [[1, 2], [3]],
    ],
  );
});

t.test('the mock provider embeds with the requested dimensions', async (t) => {
  const result = await gw.client.embeddings.create({ model: 'embed-mock', input: 'hi', dimensions: 16, encoding_format: 'float' });
  t.equal(result.data[0]?.embedding.length, 16);
});

t.test('failover', async (t) => {
  t.test('a 5xx is retried, then the next route serves', async (t) => {
    primary.enqueue({ kind: 'status', status: 500 }, { kind: 'status', status: 503 });
    const { response } = await gw.client.embeddings.create({ model: 'embed-duo', input: 'x' }).withResponse();
    t.equal(response.headers.get('x-svc-provider'), 'secondary');
    t.equal(response.headers.get('x-svc-attempts'), '3');
  });

  t.test('a 429 with a short retry-after is waited out on the same route', async (t) => {
    primary.enqueue({ kind: 'status', status: 429, retryAfter: '1' });
    const started = Date.now();
    const { response } = await gw.client.embeddings.create({ model: 'embed-duo', input: 'x' }).withResponse();
    t.equal(response.headers.get('x-svc-provider'), 'primary');
    t.ok(Date.now() - started >= 950, 'waited for retry-after');
    t.equal(secondary.requests.length, 0);
  });

  t.test('a connect error moves on to the next route', async (t) => {
    const { response } = await gw.client.embeddings.create({ model: 'embed-after-dead', input: 'x' }).withResponse();
    t.equal(response.headers.get('x-svc-provider'), 'secondary');
    t.equal(response.headers.get('x-svc-attempts'), '3', 'the refused route was tried twice');
  });
});

t.test('400s name the parameter at fault', async (t) => {
  const refusal = async (body: Record<string, unknown>) => {
    const error = await gw.client.embeddings.create(body as never).catch((e: unknown) => e);
    t.type(error, OpenAI.BadRequestError);
    return error as InstanceType<typeof OpenAI.BadRequestError>;
  };

  t.test('empty input', async (t) => {
    t.equal((await refusal({ model: 'embed-duo', input: '' })).param, 'input');
    t.equal((await refusal({ model: 'embed-duo', input: [] })).param, 'input');
    t.equal((await refusal({ model: 'embed-duo', input: ['a', ''] })).param, 'input[1]');
  });

  t.test('more than 2048 inputs', async (t) => {
    const error = await refusal({ model: 'embed-duo', input: Array.from({ length: 2049 }, () => 'a') });
    t.equal(error.param, 'input');
    t.match(error.message, /2048/);
  });

  t.test('an unknown encoding_format', async (t) => {
    t.equal((await refusal({ model: 'embed-duo', input: 'a', encoding_format: 'int8' })).param, 'encoding_format');
  });

  t.test('a model without the embeddings modality, naming the ones that have it', async (t) => {
    const error = await refusal({ model: 'chat-only', input: 'a' });
    t.equal(error.param, 'model');
    t.equal(error.code, 'unsupported_model');
    t.match(error.message, /embed-duo/);
    t.equal(primary.requests.length, 0, 'nothing went upstream');
  });
});

t.test('GET /v1 lists the endpoints mounted, embeddings included (and those of the files and batches plugins)', async (t) => {
  const listed = await fetch(`${gw.url}/v1`, { headers: { authorization: `Bearer ${gw.key}` } });
  const { endpoints } = (await listed.json()) as { endpoints: string[] };
  t.same(
    [...endpoints].sort(),
    [
      'GET /v1/models',
      'GET /v1/models/{model}',
      'POST /v1/chat/completions',
      'POST /v1/embeddings',
      'POST /v1/responses',
      'POST /v1/images/generations',
      'POST /v1/audio/speech',
      'POST /v1/audio/transcriptions',
      'POST /v1/messages',
      'POST /v1/evaluate',
      'POST /v1/files',
      'GET /v1/files',
      'GET /v1/files/{id}',
      'DELETE /v1/files/{id}',
      'GET /v1/files/{id}/content',
      'POST /v1/batches',
      'GET /v1/batches',
      'GET /v1/batches/{id}',
      'POST /v1/batches/{id}/cancel',
      'GET /v1/batches/{id}/content',
    ].sort(),
  );
});

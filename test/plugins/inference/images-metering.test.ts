import OpenAI from 'openai';
import t from 'tap';
import { fakePng } from '../../fakes/fake-openai-modalities.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';
import { startMeteredGateway } from '../metering/metered-gateway.ts';

/**
 * Images and metering, through the openai SDK: what the request log keeps of an image answer,
 * and what n images cost in the request log and the ledger. Prices: $0.04 (standard) or $0.08
 * (hd) an image at 1024x1024, $0.02 at any other size.
 */

t.setTimeout(240_000);

const painter = {
  modalities: { input: ['text'], output: ['image'] },
  images: { sizes: ['1024x1024', '512x512'], qualities: ['standard', 'hd'], maxImages: 4 },
  prices: { ...TEST_PRICES, perImageUsd: 0.02, images: { '1024x1024': { standard: 0.04, hd: 0.08 } } },
};
const g = await startMeteredGateway(t, {
  inference: {
    models: {
      painter: { ...painter, routes: [{ provider: 'primary', model: 'up-painter' }] },
      'painter-mock': { ...painter, routes: [{ provider: 'mock', model: 'mock-image' }] },
    },
  },
});
const { key } = await g.newKey();
const client = new OpenAI({ apiKey: key, baseURL: `${g.url}/v1`, maxRetries: 0, timeout: 20_000 });
t.beforeEach(() => g.upstream.reset());

const generate = (body: OpenAI.Images.ImageGenerateParamsNonStreaming) => client.images.generate(body).withResponse();

async function loggedBodies(requestId: string | null): Promise<{ request_body: any; response_body: any }> {
  await g.settled();
  const { rows } = await g.db.query<{ request_body: any; response_body: any }>('SELECT request_body, response_body FROM request_log_bodies WHERE request_id = $1', [requestId]);
  if (rows.length !== 1) throw new Error(`no logged bodies for ${requestId}`);
  return rows[0]!;
}

const balance = async () => {
  await g.settled();
  return (await g.ledger.balance(g.test.organizationId)) ?? 0n;
};

/** A fresh key's SDK client, so the usage report of its key shows only its own calls. */
async function freshClient(): Promise<{ keyId: string; client: OpenAI }> {
  const created = await g.newKey();
  return { keyId: created.id, client: new OpenAI({ apiKey: created.key, baseURL: `${g.url}/v1`, maxRetries: 0, timeout: 20_000 }) };
}

/** What the request log, the ledger (since `before`) and the usage report of the key say the call cost. */
async function billed(keyId: string, requestId: string | null, before: bigint) {
  await g.settled();
  const { rows } = await g.db.query<Record<string, unknown>>('SELECT cost_micros, units_cost_micros, images, image_size, image_quality FROM request_logs WHERE id = $1', [requestId]);
  const row = rows[0]!;
  const report = (await g.test.call('GET', `/client/usage?keyId=${keyId}`)).json() as { totals: { costUsd: number; units: { images: number } } };
  return {
    row: { ...row, cost_micros: BigInt(row['cost_micros'] as bigint), units_cost_micros: BigInt(row['units_cost_micros'] as bigint) },
    ledger: before - (await balance()),
    report: { costMicros: BigInt(Math.round(report.totals.costUsd * 1e6)), images: report.totals.units.images },
  };
}

t.test('the request log keeps no image bytes, even where bodies are logged', async (t) => {
  t.equal((await g.test.call('POST', '/client/log-requests', { body: { enabled: true } })).statusCode, 200);
  t.teardown(async () => {
    await g.test.call('POST', '/client/log-requests', { body: { enabled: false } });
  });

  t.test('b64_json images are replaced by a note of their size', async (t) => {
    const { data, response } = await generate({ model: 'painter', prompt: 'a quiet harbour', n: 2, response_format: 'b64_json' });
    t.equal(data.data?.length, 2, 'the client got its images');
    const logged = await loggedBodies(response.headers.get('x-request-id'));
    t.match(logged.request_body, { model: 'painter', prompt: 'a quiet harbour', n: 2 }, 'the request is kept');
    const pngBytes = fakePng('a quiet harbour#0').length;
    t.same(
      logged.response_body.data.map((image: any) => image.b64_json),
      [`[image omitted: ${pngBytes} bytes]`, `[image omitted: ${fakePng('a quiet harbour#1').length} bytes]`],
    );
    t.equal(logged.response_body.data[0].revised_prompt, 'a quiet harbour', 'the rest of the answer is kept');
    t.type(logged.response_body.created, 'number');
  });

  t.test('data: URLs (the mock’s) are replaced too; the note names the image’s size', async (t) => {
    const { data, response } = await generate({ model: 'painter-mock', prompt: 'a hill', size: '512x512', response_format: 'url' });
    const url = data.data![0]!.url!;
    t.match(url, /^data:image\/png;base64,/);
    const bytes = Buffer.from(url.slice(url.indexOf(',') + 1), 'base64').length;
    const logged = await loggedBodies(response.headers.get('x-request-id'));
    t.equal(logged.response_body.data[0].url, `[image omitted: ${bytes} bytes]`);
    t.notOk(JSON.stringify(logged.response_body).includes('base64,'), 'no image bytes anywhere in the logged answer');
  });
});

t.test('money: n images cost n × the price of their size and quality, in the request log, the ledger and the usage report', async (t) => {
  const { keyId, client } = await freshClient();
  const before = await balance();
  const { response } = await client.images.generate({ model: 'painter', prompt: 'three boats', n: 3, quality: 'hd' }).withResponse();
  const bill = await billed(keyId, response.headers.get('x-request-id'), before);
  const expected = 3n * 80_000n; // 3 × $0.08 (1024x1024, hd)
  t.same(bill.row, { cost_micros: expected, units_cost_micros: expected, images: 3, image_size: '1024x1024', image_quality: 'hd' });
  t.equal(bill.ledger, expected, 'the ledger');
  t.same(bill.report, { costMicros: expected, images: 3 }, 'the usage report');
});

t.test('money: a size without its own price costs perImageUsd', async (t) => {
  const { keyId, client } = await freshClient();
  const before = await balance();
  const { response } = await client.images.generate({ model: 'painter-mock', prompt: 'two hills', n: 2, size: '512x512', response_format: 'b64_json' }).withResponse();
  const bill = await billed(keyId, response.headers.get('x-request-id'), before);
  const expected = 2n * 20_000n; // 2 × $0.02
  t.same(bill.row, { cost_micros: expected, units_cost_micros: expected, images: 2, image_size: '512x512', image_quality: 'standard' });
  t.equal(bill.ledger, expected);
  t.same(bill.report, { costMicros: expected, images: 2 });
});

t.test('money: settlement bills the images returned, not the ones reserved', async (t) => {
  const { keyId, client } = await freshClient();
  const oneImage = { created: 1_700_000_000, data: [{ b64_json: fakePng('only one').toString('base64') }] };
  g.upstream.enqueue({ kind: 'raw', status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(oneImage) });
  const before = await balance();
  const { data, response } = await client.images.generate({ model: 'painter', prompt: 'four boats', n: 4 }).withResponse();
  t.equal(data.data?.length, 1);
  const bill = await billed(keyId, response.headers.get('x-request-id'), before);
  const expected = 40_000n; // one image at $0.04 (1024x1024, standard), though four were reserved
  t.match(bill.row, { cost_micros: expected, images: 1 });
  t.equal(bill.ledger, expected);
  t.same(bill.report, { costMicros: expected, images: 1 });
});

t.test('admission reserves n images at the chosen size and quality: a cap that fits two refuses three', async (t) => {
  const created = await g.newKey({ spendCap: { usd: 0.16, period: 'total', mode: 'blocking' } });
  const capped = new OpenAI({ apiKey: created.key, baseURL: `${g.url}/v1`, maxRetries: 0, timeout: 20_000 });
  const refused = await capped.images.generate({ model: 'painter', prompt: 'boats', n: 3, quality: 'hd' }).catch((e: unknown) => e);
  t.type(refused, OpenAI.APIError);
  t.equal((refused as InstanceType<typeof OpenAI.APIError>).status, 402, '3 × $0.08 does not fit $0.16');
  t.equal(g.upstream.requests.length, 0, 'nothing went upstream');
  const admitted = await capped.images.generate({ model: 'painter', prompt: 'boats', n: 2, quality: 'hd' });
  t.equal(admitted.data?.length, 2, '2 × $0.08 fits');
});

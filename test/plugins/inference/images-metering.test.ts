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

async function loggedCost(requestId: string | null): Promise<bigint> {
  await g.settled();
  const { rows } = await g.db.query<{ cost_micros: bigint }>('SELECT cost_micros FROM request_logs WHERE id = $1', [requestId]);
  return BigInt(rows[0]!.cost_micros);
}

const balance = async () => {
  await g.settled();
  return (await g.ledger.balance(g.test.organizationId)) ?? 0n;
};

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

// The three tests below need per-unit pricing (metering in every unit): until it is on main a
// units-only call costs 0 and they fail.
t.test('money (per-unit pricing): n images cost n × the price of their size and quality, in the request log and the ledger', async (t) => {
  const before = await balance();
  const { response } = await generate({ model: 'painter', prompt: 'three boats', n: 3, quality: 'hd' });
  const cost = await loggedCost(response.headers.get('x-request-id'));
  t.equal(cost, 3n * 80_000n, '3 × $0.08 (1024x1024, hd)');
  t.equal(before - (await balance()), cost, 'the ledger charged exactly what the request log shows');
});

t.test('money (per-unit pricing): a size without its own price costs perImageUsd', async (t) => {
  const before = await balance();
  const { response } = await generate({ model: 'painter-mock', prompt: 'two hills', n: 2, size: '512x512', response_format: 'b64_json' });
  const cost = await loggedCost(response.headers.get('x-request-id'));
  t.equal(cost, 2n * 20_000n, '2 × $0.02');
  t.equal(before - (await balance()), cost);
});

t.test('money (per-unit pricing): settlement bills the images returned, not the ones asked for', async (t) => {
  const oneImage = { created: 1_700_000_000, data: [{ b64_json: fakePng('only one').toString('base64') }] };
  g.upstream.enqueue({ kind: 'raw', status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(oneImage) });
  const before = await balance();
  const { data, response } = await generate({ model: 'painter', prompt: 'four boats', n: 4 });
  t.equal(data.data?.length, 1);
  const cost = await loggedCost(response.headers.get('x-request-id'));
  t.equal(cost, 40_000n, 'one image at $0.04 (1024x1024, standard), though four were reserved');
  t.equal(before - (await balance()), cost);
});

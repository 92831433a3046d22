import OpenAI from 'openai';
import { PNG } from 'pngjs';
import t, { type Test } from 'tap';
import { MAX_IMAGE_PROMPT_CHARACTERS } from '../../../plugins/inference/images-capability.ts';
import { failoverModels, startGateway, TEST_PRICES } from '../../helpers/gateway.ts';

/** POST /v1/images/generations through the gateway, driven with the official openai package. */

t.setTimeout(240_000);

const imagePrices = { ...TEST_PRICES, perImageUsd: 0.02, images: { '1024x1024': { standard: 0.04, hd: 0.08 } } };
const painter = {
  modalities: { input: ['text'], output: ['image'] },
  images: { sizes: ['1024x1024', '512x512'], qualities: ['standard', 'hd'], maxImages: 4 },
  prices: imagePrices,
};
const gw = await startGateway(t, {
  inference: {
    models: {
      ...failoverModels('painter', 'image', painter),
      'painter-mock': { ...painter, routes: [{ provider: 'mock', model: 'mock-image' }] },
      'image-output-unconfigured': { modalities: { input: ['text'], output: ['image'] }, routes: [{ provider: 'primary', model: 'up-x' }], prices: imagePrices },
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

const decodePng = (bytes: Buffer) => PNG.sync.read(bytes);

t.test('b64_json: the SDK gets a real PNG, drawn at the model’s first size and quality when the request names none', async (t) => {
  const { data: result, response } = await gw.client.images.generate({ model: 'painter-duo', prompt: 'a lighthouse at dusk', response_format: 'b64_json' }).withResponse();
  t.type(result.created, 'number');
  t.equal(result.data?.length, 1);
  const png = decodePng(Buffer.from(result.data![0]!.b64_json!, 'base64'));
  t.equal(png.width, 4, 'the fake upstream’s PNG, decoded');
  t.equal(result.data![0]!.revised_prompt, 'a lighthouse at dusk');
  t.equal(response.headers.get('x-svc-provider'), 'primary');
  t.match(primary.requests[0]?.body, { model: 'up-image-primary', prompt: 'a lighthouse at dusk', n: 1, size: '1024x1024', quality: 'standard', response_format: 'b64_json' });
});

t.test('url: the answer names where the upstream serves the image, and it is a PNG', async (t) => {
  const result = await gw.client.images.generate({ model: 'painter-duo', prompt: 'a red kite', response_format: 'url', n: 2, size: '512x512', quality: 'hd' });
  t.equal(result.data?.length, 2);
  for (const image of result.data!) {
    t.equal(image.b64_json, undefined);
    const download = await fetch(image.url!);
    t.equal(download.headers.get('content-type'), 'image/png');
    t.equal(decodePng(Buffer.from(await download.arrayBuffer())).height, 4);
  }
  t.match(primary.requests[0]?.body, { n: 2, size: '512x512', quality: 'hd' });
  t.match(result, { size: '512x512', quality: 'hd' }, 'what the upstream says of the images is passed on');
});

t.test('other OpenAI fields pass through; nulls mean the default and are not sent on', async (t) => {
  await gw.client.images.generate({ model: 'painter-duo', prompt: 'a cat', style: 'natural', user: 'user-7', background: 'opaque', n: null, response_format: null });
  const sent = primary.requests[0]?.body;
  t.match(sent, { style: 'natural', user: 'user-7', background: 'opaque', n: 1 });
  t.notOk('response_format' in sent, 'a null response_format is left to the upstream’s default');
});

t.test('the mock provider draws real PNGs at the requested size, one per image, each different', async (t) => {
  const result = await gw.client.images.generate({ model: 'painter-mock', prompt: 'a blue square', n: 2, size: '512x512', response_format: 'b64_json' });
  const [first, second] = result.data!.map((image) => Buffer.from(image.b64_json!, 'base64'));
  t.same([decodePng(first!).width, decodePng(first!).height], [512, 512]);
  t.not(first!.toString('base64'), second!.toString('base64'));
});

t.test('failover', async (t) => {
  t.test('a 5xx is retried, then the next route serves', async (t) => {
    primary.enqueue({ kind: 'status', status: 500 }, { kind: 'status', status: 503 });
    const { data, response } = await gw.client.images.generate({ model: 'painter-duo', prompt: 'x', response_format: 'b64_json' }).withResponse();
    t.equal(response.headers.get('x-svc-provider'), 'secondary');
    t.equal(response.headers.get('x-svc-attempts'), '3');
    t.equal(data.data?.length, 1);
    t.equal(secondary.requests[0]?.body.model, 'up-image-secondary');
  });

  t.test('a 429 with a short retry-after is waited out on the same route', async (t) => {
    primary.enqueue({ kind: 'status', status: 429, retryAfter: '1' });
    const started = Date.now();
    const { response } = await gw.client.images.generate({ model: 'painter-duo', prompt: 'x' }).withResponse();
    t.equal(response.headers.get('x-svc-provider'), 'primary');
    t.ok(Date.now() - started >= 950, 'waited for retry-after');
    t.equal(secondary.requests.length, 0);
  });

  t.test('a connect error moves on to the next route', async (t) => {
    const { response } = await gw.client.images.generate({ model: 'painter-after-dead', prompt: 'x' }).withResponse();
    t.equal(response.headers.get('x-svc-provider'), 'secondary');
    t.equal(response.headers.get('x-svc-attempts'), '3', 'the refused route was tried twice');
  });
});

t.test('400s name the parameter at fault, and nothing goes upstream', async (t) => {
  const refusal = async (t: Test, body: Record<string, unknown>) => {
    const error = await gw.client.images.generate(body as never).catch((e: unknown) => e);
    t.type(error, OpenAI.BadRequestError);
    t.equal(primary.requests.length, 0, 'nothing went upstream');
    return error as InstanceType<typeof OpenAI.BadRequestError>;
  };

  t.test('a model without image output, naming the models that have it', async (t) => {
    const error = await refusal(t, { model: 'chat-only', prompt: 'a cat' });
    t.equal(error.param, 'model');
    t.equal(error.code, 'unsupported_model');
    t.match(error.message, /painter-duo/);
  });

  t.test('a model with image output but no images settings', async (t) => {
    const error = await refusal(t, { model: 'image-output-unconfigured', prompt: 'a cat' });
    t.equal(error.param, 'model');
    t.notMatch(error.message, /can: .*image-output-unconfigured/, 'not listed among the models that can');
  });

  t.test('no prompt', async (t) => {
    t.equal((await refusal(t, { model: 'painter-duo' })).param, 'prompt');
  });

  t.test('an empty or blank prompt', async (t) => {
    t.equal((await refusal(t, { model: 'painter-duo', prompt: '' })).param, 'prompt');
    t.equal((await refusal(t, { model: 'painter-duo', prompt: ' \n ' })).param, 'prompt');
  });

  t.test(`a prompt over ${MAX_IMAGE_PROMPT_CHARACTERS} characters`, async (t) => {
    t.equal((await refusal(t, { model: 'painter-duo', prompt: 'a'.repeat(MAX_IMAGE_PROMPT_CHARACTERS + 1) })).param, 'prompt');
  });

  t.test('a size the model does not offer, listing those it does', async (t) => {
    const error = await refusal(t, { model: 'painter-duo', prompt: 'a cat', size: '1792x1024' });
    t.equal(error.param, 'size');
    t.match(error.message, /"1024x1024", "512x512"/);
  });

  t.test('n above the model’s maxImages, or below 1', async (t) => {
    t.equal((await refusal(t, { model: 'painter-duo', prompt: 'a cat', n: 5 })).param, 'n');
    t.equal((await refusal(t, { model: 'painter-duo', prompt: 'a cat', n: 0 })).param, 'n');
  });

  t.test('a quality the model does not offer', async (t) => {
    const error = await refusal(t, { model: 'painter-duo', prompt: 'a cat', quality: 'ultra' });
    t.equal(error.param, 'quality');
    t.match(error.message, /"standard", "hd"/);
  });

  t.test('a response_format other than b64_json or url', async (t) => {
    t.equal((await refusal(t, { model: 'painter-duo', prompt: 'a cat', response_format: 'png' })).param, 'response_format');
  });

  t.test('stream: true (partial images are not offered)', async (t) => {
    const response = await fetch(`${gw.url}/v1/images/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'painter-duo', prompt: 'a cat', stream: true }),
    });
    t.equal(response.status, 400);
    t.equal(((await response.json()) as { error: { param: string } }).error.param, 'stream');
  });
});

import { parseBuffer } from 'music-metadata';
import OpenAI from 'openai';
import t, { type Test } from 'tap';
import { mockSpeechText } from '../../../providers/mock/mock-speech.ts';
import { speechAudio } from '../../fakes/fake-openai-modalities.ts';
import { failoverModels, startGateway, TEST_PRICES } from '../../helpers/gateway.ts';

/** POST /v1/audio/speech through the gateway, driven with the official openai package. */

t.setTimeout(240_000);

const speech = {
  modalities: { input: ['text'], output: ['audio'] },
  speech: { voices: ['alloy', 'nova'], formats: ['mp3', 'wav', 'opus'], maxInputCharacters: 40 },
  prices: { ...TEST_PRICES, perCharacterUsd: 0.000015 },
};
const gw = await startGateway(t, {
  inference: {
    models: {
      ...failoverModels('tts', 'tts', speech),
      'tts-mock': { ...speech, speech: { voices: ['alloy'], formats: ['wav', 'pcm'], maxInputCharacters: 4096 }, routes: [{ provider: 'mock', model: 'mock-tts' }] },
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

const bytesOf = async (response: Response) => Buffer.from(await response.arrayBuffer());

t.test('the audio bytes come back with the provider content type, as the upstream made them', async (t) => {
  const response = await gw.client.audio.speech.create({ model: 'tts-duo', voice: 'nova', input: 'Hello there, world.', response_format: 'wav' });
  t.equal(response.status, 200);
  t.equal(response.headers.get('content-type'), 'audio/wav');
  t.equal(response.headers.get('x-svc-provider'), 'primary');
  const expected = speechAudio({ input: 'Hello there, world.', response_format: 'wav' }).audio;
  t.same(await bytesOf(response), expected, 'byte for byte');
  t.match(primary.requests[0]?.body, { model: 'up-tts-primary', voice: 'nova', input: 'Hello there, world.', response_format: 'wav' });
});

t.test("without response_format the upstream is asked for the model's first format", async (t) => {
  const response = await gw.client.audio.speech.create({ model: 'tts-duo', voice: 'alloy', input: 'Hi' });
  t.equal(response.headers.get('content-type'), 'audio/mpeg');
  t.equal(primary.requests[0]?.body.response_format, 'mp3');
  const metadata = await parseBuffer(await bytesOf(response), { mimeType: 'audio/mpeg' });
  t.equal(metadata.format.codec, 'MPEG 1 Layer 3', 'a real MP3');
});

t.test('speed and fields the gateway does not read pass through', async (t) => {
  await gw.client.audio.speech.create({ model: 'tts-duo', voice: 'alloy', input: 'Hi', speed: 1.5, instructions: 'Speak softly.' });
  t.match(primary.requests[0]?.body, { speed: 1.5, instructions: 'Speak softly.' });
});

t.test('the mock speaks a real WAV carrying the text', async (t) => {
  const response = await gw.client.audio.speech.create({ model: 'tts-mock', voice: 'alloy', input: 'Mock speech, played back.', response_format: 'wav' });
  t.equal(response.headers.get('content-type'), 'audio/wav');
  const wav = await bytesOf(response);
  const metadata = await parseBuffer(wav, { mimeType: 'audio/wav' });
  t.equal(metadata.format.container, 'WAVE');
  t.ok((metadata.format.duration ?? 0) > 1, 'about as long as the text takes to say');
  t.equal(mockSpeechText(wav), 'Mock speech, played back.');
});

t.test('failover', async (t) => {
  t.test('a 5xx is retried, then the next route serves', async (t) => {
    primary.enqueue({ kind: 'status', status: 500 }, { kind: 'status', status: 503 });
    const response = await gw.client.audio.speech.create({ model: 'tts-duo', voice: 'alloy', input: 'Hi', response_format: 'wav' });
    t.equal(response.headers.get('x-svc-provider'), 'secondary');
    t.equal(response.headers.get('x-svc-attempts'), '3');
    t.same(await bytesOf(response), speechAudio({ input: 'Hi', response_format: 'wav' }).audio);
  });

  t.test('a 429 with a short retry-after is waited out on the same route', async (t) => {
    primary.enqueue({ kind: 'status', status: 429, retryAfter: '1' });
    const started = Date.now();
    const response = await gw.client.audio.speech.create({ model: 'tts-duo', voice: 'alloy', input: 'Hi' });
    t.equal(response.headers.get('x-svc-provider'), 'primary');
    t.ok(Date.now() - started >= 950, 'waited for retry-after');
    t.equal(secondary.requests.length, 0);
  });

  t.test('a connect error moves on to the next route', async (t) => {
    const response = await gw.client.audio.speech.create({ model: 'tts-after-dead', voice: 'alloy', input: 'Hi' });
    t.equal(response.headers.get('x-svc-provider'), 'secondary');
    t.equal(response.headers.get('x-svc-attempts'), '3', 'the refused route was tried twice');
  });

  t.test('audio cut off after it began cannot fail over: the transfer breaks, it does not end as if whole', async (t) => {
    primary.enqueue({ kind: 'stream-cut', afterChunks: 2 });
    const response = await gw.client.audio.speech.create({ model: 'tts-duo', voice: 'alloy', input: 'A longer sentence to speak.', response_format: 'wav' });
    t.equal(response.status, 200, 'the status went out with the first bytes');
    await t.rejects(response.arrayBuffer(), 'the client sees the transfer fail');
    t.equal(secondary.requests.length, 0);
  });
});

t.test('400s name the parameter at fault', async (t) => {
  const refusal = async (t: Test, body: Record<string, unknown>) => {
    const error = await gw.client.audio.speech.create(body as never).catch((e: unknown) => e);
    t.type(error, OpenAI.BadRequestError);
    t.equal(primary.requests.length, 0, 'nothing went upstream');
    return error as InstanceType<typeof OpenAI.BadRequestError>;
  };

  t.test('a model without a speech config, naming the ones that have it', async (t) => {
    const error = await refusal(t, { model: 'chat-only', voice: 'alloy', input: 'Hi' });
    t.equal(error.param, 'model');
    t.equal(error.code, 'unsupported_model');
    t.match(error.message, /tts-duo/);
  });

  t.test('input missing', async (t) => {
    t.equal((await refusal(t, { model: 'tts-duo', voice: 'alloy' })).param, 'input');
  });

  t.test('input over the model limit, counted in code points', async (t) => {
    const fits = await gw.client.audio.speech.create({ model: 'tts-duo', voice: 'alloy', input: '😀'.repeat(40) });
    t.equal(fits.status, 200, '40 emoji are 40 characters, not 80');
    primary.reset();
    const error = await refusal(t, { model: 'tts-duo', voice: 'alloy', input: '😀'.repeat(41) });
    t.equal(error.param, 'input');
    t.match(error.message, /41 characters.*at most 40/);
  });

  t.test('a voice the model does not have', async (t) => {
    const error = await refusal(t, { model: 'tts-duo', voice: 'shimmer', input: 'Hi' });
    t.equal(error.param, 'voice');
    t.match(error.message, /alloy, nova/);
  });

  t.test('a response_format the model does not make', async (t) => {
    const error = await refusal(t, { model: 'tts-duo', voice: 'alloy', input: 'Hi', response_format: 'flac' });
    t.equal(error.param, 'response_format');
    t.match(error.message, /mp3, wav, opus/);
  });

  t.test("stream_format sse (OpenAI's base64 deltas), which the gateway does not offer", async (t) => {
    t.equal((await refusal(t, { model: 'tts-duo', voice: 'alloy', input: 'Hi', stream_format: 'sse' })).param, 'stream_format');
  });

  t.test('speed outside 0.25 to 4', async (t) => {
    t.equal((await refusal(t, { model: 'tts-duo', voice: 'alloy', input: 'Hi', speed: 4.5 })).param, 'speed');
    t.equal((await refusal(t, { model: 'tts-duo', voice: 'alloy', input: 'Hi', speed: 0.2 })).param, 'speed');
  });
});

t.test('the browser rule covers speech', async (t) => {
  t.test('an Origin without the opt-in is 403', async (t) => {
    const browser = new OpenAI({ apiKey: gw.key, baseURL: `${gw.url}/v1`, maxRetries: 0, defaultHeaders: { origin: 'https://app.example' } });
    const error = await browser.audio.speech.create({ model: 'tts-duo', voice: 'alloy', input: 'Hi' }).catch((e: unknown) => e);
    t.type(error, OpenAI.PermissionDeniedError);
    t.equal((error as InstanceType<typeof OpenAI.APIError>).code, 'browser_access_denied');
    t.equal(primary.requests.length, 0);
  });

  t.test('with the opt-in it is served, with the CORS header', async (t) => {
    const browser = new OpenAI({
      apiKey: gw.key,
      baseURL: `${gw.url}/v1`,
      maxRetries: 0,
      defaultHeaders: { origin: 'https://app.example', 'x-svc-dangerous-browser-access': 'true' },
    });
    const response = await browser.audio.speech.create({ model: 'tts-duo', voice: 'alloy', input: 'Hi' });
    t.equal(response.status, 200);
    t.equal(response.headers.get('access-control-allow-origin'), 'https://app.example');
    t.equal(response.headers.get('content-type'), 'audio/mpeg');
  });
});

t.test('GET /v1 lists both audio endpoints', async (t) => {
  const listed = await fetch(`${gw.url}/v1`, { headers: { authorization: `Bearer ${gw.key}` } });
  const { endpoints } = (await listed.json()) as { endpoints: string[] };
  t.ok(endpoints.includes('POST /v1/audio/speech'));
  t.ok(endpoints.includes('POST /v1/audio/transcriptions'));
});

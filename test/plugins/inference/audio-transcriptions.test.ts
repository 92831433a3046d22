import OpenAI, { toFile } from 'openai';
import t, { type Test } from 'tap';
import { speechWav } from '../../../providers/mock/mock-speech.ts';
import { TRANSCRIPTION_MAX_FILE_BYTES } from '../../../plugins/inference/transcription-capability.ts';
import { speechAudio } from '../../fakes/fake-openai-modalities.ts';
import { failoverModels, startGateway, TEST_PRICES } from '../../helpers/gateway.ts';

/** POST /v1/audio/transcriptions through the gateway, driven with the official openai package and real audio files. */

t.setTimeout(240_000);

const transcription = {
  modalities: { input: ['audio'], output: ['text'] },
  transcription: {},
  prices: { ...TEST_PRICES, perAudioSecondUsd: 0.0001 },
};
const gw = await startGateway(t, {
  inference: {
    models: {
      ...failoverModels('stt', 'stt', transcription),
      'stt-json-only': { ...transcription, transcription: { formats: ['json'] }, routes: [{ provider: 'primary', model: 'up-stt-primary' }] },
      'stt-mock': { ...transcription, routes: [{ provider: 'mock', model: 'mock-transcribe' }] },
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

/** A PCM WAV of silence under a second long, which the fake upstream reads the length of. */
const wav = speechAudio({ input: 'one two three', response_format: 'wav' }).audio;
/** Real MPEG-1 Layer III frames. */
const mp3 = speechAudio({ input: 'one two three', response_format: 'mp3' }).audio;

/** What the fake upstream received as the form: its fields and the file. */
const upstreamForm = (index = 0) => primary.requests[index]?.body as { fields: Record<string, string | string[]>; file: { filename: string; contentType: string; data: Buffer } };

t.test('a WAV through an OpenAI upstream: the transcript as JSON, the file passed on byte for byte', async (t) => {
  const { data: result, response } = await gw.client.audio.transcriptions.create({ model: 'stt-duo', file: await toFile(wav, 'note.wav', { type: 'audio/wav' }) }).withResponse();
  t.same(result, { text: 'The quick brown fox jumps over the lazy dog.', usage: { type: 'duration', seconds: 1 } }, "OpenAI's transcription object");
  t.match(response.headers.get('content-type'), /^application\/json/);
  t.equal(response.headers.get('x-svc-provider'), 'primary');
  const form = upstreamForm();
  t.equal(form.fields['model'], 'up-stt-primary');
  t.same(form.file, { filename: 'note.wav', contentType: 'audio/wav', data: wav });
  t.notOk('durationSeconds' in form.fields, 'the length the gateway read is its own, not a form field');
});

t.test('an MP3 with verbose_json, language, prompt and temperature passed on', async (t) => {
  const result = await gw.client.audio.transcriptions.create({
    model: 'stt-duo',
    file: await toFile(mp3, 'memo.mp3', { type: 'audio/mpeg' }),
    response_format: 'verbose_json',
    language: 'en',
    prompt: 'A memo.',
    temperature: 0.2,
    timestamp_granularities: ['segment'],
  });
  t.match(result, { task: 'transcribe', language: 'english', text: String, segments: Array });
  const form = upstreamForm();
  t.match(form.fields, { response_format: 'verbose_json', language: 'en', prompt: 'A memo.', temperature: '0.2', 'timestamp_granularities[]': 'segment' });
  t.same(form.file.data, mp3);
});

t.test('text, srt and vtt are answered as text with their content type', async (t) => {
  const file = await toFile(wav, 'note.wav', { type: 'audio/wav' });
  for (const format of ['text', 'srt', 'vtt'] as const) {
    const { data, response } = await gw.client.audio.transcriptions.create({ model: 'stt-duo', file, response_format: format }).withResponse();
    t.type(data, 'string', `${format} is a string`);
    t.match(response.headers.get('content-type'), /^text\/plain/, `${format} keeps the upstream's content type`);
    t.match(data as unknown as string, format === 'vtt' ? /^WEBVTT/ : format === 'srt' ? /^1\n00:00:00,000 --> / : /^The quick brown fox/);
  }
});

t.test("the mock reads back its own speech (a real WAV, through the SDK's toFile)", async (t) => {
  const spoken = speechWav('The mock speaks, and the mock listens.', 1);
  const result = await gw.client.audio.transcriptions.create({ model: 'stt-mock', file: await toFile(spoken, 'speech.wav') });
  t.equal(result.text, 'The mock speaks, and the mock listens.');
  const vtt = await gw.client.audio.transcriptions.create({ model: 'stt-mock', file: await toFile(spoken, 'speech.wav'), response_format: 'vtt' });
  t.match(vtt, /^WEBVTT\n\n00:00:00\.000 --> /);
});

t.test('failover', async (t) => {
  const file = () => toFile(wav, 'note.wav', { type: 'audio/wav' });

  t.test('a 5xx is retried, then the next route serves, with the same file', async (t) => {
    primary.enqueue({ kind: 'status', status: 500 }, { kind: 'status', status: 503 });
    const { response } = await gw.client.audio.transcriptions.create({ model: 'stt-duo', file: await file() }).withResponse();
    t.equal(response.headers.get('x-svc-provider'), 'secondary');
    t.equal(response.headers.get('x-svc-attempts'), '3');
    t.same((secondary.requests[0]?.body as { file: { data: Buffer } } | undefined)?.file.data, wav);
  });

  t.test('a 429 with a short retry-after is waited out on the same route', async (t) => {
    primary.enqueue({ kind: 'status', status: 429, retryAfter: '1' });
    const started = Date.now();
    const { response } = await gw.client.audio.transcriptions.create({ model: 'stt-duo', file: await file() }).withResponse();
    t.equal(response.headers.get('x-svc-provider'), 'primary');
    t.ok(Date.now() - started >= 950, 'waited for retry-after');
    t.equal(secondary.requests.length, 0);
  });

  t.test('a connect error moves on to the next route', async (t) => {
    const { response } = await gw.client.audio.transcriptions.create({ model: 'stt-after-dead', file: await file() }).withResponse();
    t.equal(response.headers.get('x-svc-provider'), 'secondary');
    t.equal(response.headers.get('x-svc-attempts'), '3', 'the refused route was tried twice');
  });
});

t.test('400s name the parameter at fault', async (t) => {
  const refusal = async (t: Test, body: Record<string, unknown>) => {
    const error = await gw.client.audio.transcriptions.create(body as never).catch((e: unknown) => e);
    t.type(error, OpenAI.BadRequestError);
    t.equal(primary.requests.length, 0, 'nothing went upstream');
    return error as InstanceType<typeof OpenAI.BadRequestError>;
  };

  t.test('a file that is not audio', async (t) => {
    const error = await refusal(t, { model: 'stt-duo', file: await toFile(Buffer.from('just some text, not a recording'), 'notes.mp3', { type: 'audio/mpeg' }) });
    t.equal(error.param, 'file');
    t.match(error.message, /notes\.mp3.*not audio/);
  });

  t.test('no file', async (t) => {
    t.equal((await refusal(t, { model: 'stt-duo' })).param, 'file');
  });

  t.test('a model without a transcription config, naming the ones that have it', async (t) => {
    const error = await refusal(t, { model: 'chat-only', file: await toFile(wav, 'note.wav') });
    t.equal(error.param, 'model');
    t.equal(error.code, 'unsupported_model');
    t.match(error.message, /stt-duo/);
  });

  t.test('a response_format the model does not offer', async (t) => {
    const error = await refusal(t, { model: 'stt-json-only', file: await toFile(wav, 'note.wav'), response_format: 'srt' });
    t.equal(error.param, 'response_format');
    t.match(error.message, /its formats: json/);
  });

  t.test('a response_format OpenAI does not have', async (t) => {
    t.equal((await refusal(t, { model: 'stt-duo', file: await toFile(wav, 'note.wav'), response_format: 'docx' })).param, 'response_format');
  });

  t.test('a streamed transcription, which the gateway does not offer', async (t) => {
    t.equal((await refusal(t, { model: 'stt-duo', file: await toFile(wav, 'note.wav'), stream: true })).param, 'stream');
  });

  t.test('a temperature outside 0 to 1', async (t) => {
    t.equal((await refusal(t, { model: 'stt-duo', file: await toFile(wav, 'note.wav'), temperature: 1.5 })).param, 'temperature');
  });
});

t.test('uploads over the limit', async (t) => {
  t.test('a file over 25 MiB is refused with 413 naming the file, and the client reads the answer', async (t) => {
    const large = Buffer.alloc(TRANSCRIPTION_MAX_FILE_BYTES + 1);
    const error = await gw.client.audio.transcriptions.create({ model: 'stt-duo', file: await toFile(large, 'long.wav', { type: 'audio/wav' }) }).catch((e: unknown) => e);
    t.type(error, OpenAI.APIError);
    t.match(error, { status: 413, code: 'request_too_large', param: 'file' });
    t.equal(primary.requests.length, 0);
  });

  t.test('a body over the whole-form limit is refused with 413 while it is still arriving', async (t) => {
    const large = Buffer.alloc(TRANSCRIPTION_MAX_FILE_BYTES + 2 * 1024 * 1024);
    const error = await gw.client.audio.transcriptions.create({ model: 'stt-duo', file: await toFile(large, 'longer.wav', { type: 'audio/wav' }) }).catch((e: unknown) => e);
    t.match(error, { status: 413, code: 'request_too_large' });
  });

  t.test('the gateway still answers on the same footing afterwards', async (t) => {
    const result = await gw.client.audio.transcriptions.create({ model: 'stt-duo', file: await toFile(wav, 'note.wav', { type: 'audio/wav' }) });
    t.type(result.text, 'string');
  });
});

t.test('a JSON body is refused: the route takes multipart/form-data', async (t) => {
  const response = await fetch(`${gw.url}/v1/audio/transcriptions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'stt-duo' }),
  });
  t.equal(response.status, 415);
  t.match(await response.json(), { error: { code: 'unsupported_media_type' } });
});

t.test('a CORS preflight is answered on the upload route too, and an opted-in page can read the answer', async (t) => {
  const preflight = await fetch(`${gw.url}/v1/audio/transcriptions`, {
    method: 'OPTIONS',
    headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization' },
  });
  t.equal(preflight.status, 204);
  t.match(preflight.headers.get('access-control-allow-methods'), /POST/);
  const browser = new OpenAI({
    apiKey: gw.key,
    baseURL: `${gw.url}/v1`,
    maxRetries: 0,
    defaultHeaders: { origin: 'https://app.example', 'x-svc-dangerous-browser-access': 'true' },
  });
  const { response } = await browser.audio.transcriptions.create({ model: 'stt-duo', file: await toFile(wav, 'note.wav', { type: 'audio/wav' }) }).withResponse();
  t.equal(response.headers.get('access-control-allow-origin'), 'https://app.example');
});

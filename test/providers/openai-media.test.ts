import { PNG } from 'pngjs';
import t from 'tap';
import type { Provider, SpeechResult, TranscriptionRequest } from '../../core/gateway/provider.ts';
import { openAIProviderType } from '../../providers/openai/index.ts';
import { createProviderContext } from '../../providers/provider-context.ts';
import { fakeWav, type ReceivedUpload } from '../fakes/fake-openai-modalities.ts';
import { startFakeOpenAIUpstream, type FakeOpenAIUpstream } from '../fakes/fake-openai-upstream.ts';
import { callOptions as options, failure } from './provider-test-kit.ts';

const context = createProviderContext({ timeouts: { connectMs: 300, firstByteMs: 400, totalMs: 2000 } });

let fake: FakeOpenAIUpstream;
t.before(async () => {
  fake = await startFakeOpenAIUpstream();
});
t.teardown(() => fake.close());
t.beforeEach(() => fake.reset());

function provider(config: Record<string, unknown> = {}): Provider {
  const settings = openAIProviderType.configSchema.parse({ baseUrl: fake.baseUrl, apiKey: 'sk-test', allowPrivateNetwork: true, ...config });
  const created = openAIProviderType.create('openai-test', settings, context);
  t.teardown(() => created.close?.());
  return created;
}

async function audioChunks(result: SpeechResult): Promise<Buffer[]> {
  if (result.audio instanceof Uint8Array) return [Buffer.from(result.audio)];
  const chunks: Buffer[] = [];
  for await (const chunk of result.audio) chunks.push(Buffer.from(chunk));
  return chunks;
}

/** A real WAV file: two seconds of silence. */
const wavFile = () => {
  const data = fakeWav('one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty');
  return { data: new Uint8Array(data), filename: 'hello.wav', contentType: 'audio/wav' };
};
const transcription = (extra: Partial<TranscriptionRequest> = {}): TranscriptionRequest => ({ model: 'whisper-1', file: wavFile(), ...extra });
const uploadOf = (index = 0) => fake.requests[index]?.body as ReceivedUpload;

// ---------------------------------------------------------------- images

t.test('images: generate returns real PNGs as b64_json and bills each by the size and quality asked', async (t) => {
  const result = await provider().images!.generate({ model: 'gpt-image-1', prompt: 'a red fox', n: 2, size: '1024x1536', quality: 'high' }, options());
  const data = result.body['data'] as Array<{ b64_json: string }>;
  t.equal(data.length, 2);
  const png = PNG.sync.read(Buffer.from(data[0]!.b64_json, 'base64'));
  t.equal(png.width, 4, 'a PNG a decoder reads');
  t.same(result.usage, { images: 2, size: '1024x1536', quality: 'high' });
  t.equal(fake.requests[0]?.path, '/v1/images/generations');
  t.same(fake.requests[0]?.body, { model: 'gpt-image-1', prompt: 'a red fox', n: 2, size: '1024x1536', quality: 'high' });
});

t.test('images: a url answer points at an image the upstream serves', async (t) => {
  const result = await provider().images!.generate({ model: 'dall-e-2', prompt: 'a cat', response_format: 'url' }, options());
  const url = (result.body['data'] as Array<{ url: string }>)[0]!.url;
  const download = await fetch(url);
  t.equal(download.headers.get('content-type'), 'image/png');
  t.equal(PNG.sync.read(Buffer.from(await download.arrayBuffer())).height, 4);
  t.same(result.usage, { images: 1, size: 'auto', quality: null });
});

t.test('images: size and quality the request left out are billed as the upstream reports them', async (t) => {
  fake.enqueue({ kind: 'raw', body: JSON.stringify({ created: 1, data: [{ b64_json: 'AA==' }], size: '1536x1024', quality: 'medium' }) });
  const result = await provider().images!.generate({ model: 'gpt-image-1', prompt: 'a dog' }, options());
  t.same(result.usage, { images: 1, size: '1536x1024', quality: 'medium' });
});

t.test('images: an answer without data is a protocol error', async (t) => {
  fake.enqueue({ kind: 'raw', body: JSON.stringify({ created: 1 }) });
  const error = await failure(() => provider().images!.generate({ model: 'gpt-image-1', prompt: 'x' }, options()));
  t.equal(error.kind, 'protocol');
});

t.test('images: Azure uses the deployment URL', async (t) => {
  await provider({ baseUrl: fake.url, azure: { apiVersion: '2025-04-01-preview' } }).images!.generate({ model: 'img', prompt: 'x' }, options());
  t.equal(fake.requests[0]?.path, '/openai/deployments/img/images/generations?api-version=2025-04-01-preview');
});

// ---------------------------------------------------------------- speech

t.test('speech: the audio streams through as it arrives, with the upstream content type', async (t) => {
  fake.enqueue({ kind: 'reply', chunkDelayMs: 5 });
  const result = await provider().speech!.synthesize({ model: 'tts-1', input: 'Hello there, world', voice: 'alloy', response_format: 'wav' }, options());
  t.equal(result.contentType, 'audio/wav');
  const chunks = await audioChunks(result);
  t.ok(chunks.length > 1, 'more than one piece: not buffered whole');
  const audio = Buffer.concat(chunks);
  t.equal(audio.toString('ascii', 0, 4), 'RIFF');
  t.equal(audio.length, 44 + 3 * 2400 * 2, 'every byte arrived');
  t.equal(fake.requests[0]?.path, '/v1/audio/speech');
  t.same(fake.requests[0]?.body, { model: 'tts-1', input: 'Hello there, world', voice: 'alloy', response_format: 'wav' });
});

t.test('speech: each format comes with its own content type', async (t) => {
  const p = provider();
  for (const [format, type] of [
    ['mp3', 'audio/mpeg'],
    ['opus', 'audio/opus'],
    ['flac', 'audio/flac'],
    ['pcm', 'audio/pcm'],
  ] as const) {
    const result = await p.speech!.synthesize({ model: 'tts-1', input: 'Hi', voice: 'alloy', response_format: format }, options());
    t.equal(result.contentType, type, format);
    t.ok(Buffer.concat(await audioChunks(result)).length > 0);
  }
});

t.test('speech: billed per character of input, an emoji counting one', async (t) => {
  const result = await provider().speech!.synthesize({ model: 'tts-1', input: 'héllo 👋', voice: 'alloy' }, options());
  await audioChunks(result);
  t.same(result.usage, { characters: 7 });
});

t.test('speech: an upstream refusal is a client error before any audio', async (t) => {
  const error = await failure(() => provider().speech!.synthesize({ model: 'tts-1', input: 'Hi', voice: 'alloy', response_format: 'ogg' }, options()));
  t.equal(error.kind, 'client');
  t.equal(error.status, 400);
});

t.test('speech: a connection cut mid-audio fails the stream as a retryable server error', async (t) => {
  fake.enqueue({ kind: 'stream-cut', afterChunks: 2 });
  const result = await provider().speech!.synthesize({ model: 'tts-1', input: 'a b c d e f g h', voice: 'alloy', response_format: 'wav' }, options());
  const error = await failure(() => audioChunks(result));
  t.equal(error.kind, 'server');
  t.equal(error.retryable, true);
});

// ---------------------------------------------------------------- transcription

t.test('transcription: sends the file and fields as multipart/form-data', async (t) => {
  await provider().transcription!.transcribe(
    transcription({ language: 'en', prompt: 'Names: Ada', temperature: 0.2, timestamp_granularities: ['word', 'segment'], durationSeconds: 2 }),
    options(),
  );
  const request = fake.requests[0]!;
  t.equal(request.path, '/v1/audio/transcriptions');
  t.match(request.headers['content-type'], /^multipart\/form-data; boundary=/);
  const upload = uploadOf();
  t.same(upload.fields, { model: 'whisper-1', language: 'en', prompt: 'Names: Ada', temperature: '0.2', 'timestamp_granularities[]': ['word', 'segment'] });
  t.equal(upload.file?.filename, 'hello.wav');
  t.equal(upload.file?.contentType, 'audio/wav');
  t.same(upload.file?.data, Buffer.from(wavFile().data), 'the file arrives byte for byte');
});

t.test('transcription: json answers as JSON, billed on the duration the gateway read', async (t) => {
  const result = await provider().transcription!.transcribe(transcription({ durationSeconds: 2.5 }), options());
  t.equal(result.contentType, 'application/json');
  t.equal((result.body as { text: string }).text, 'The quick brown fox jumps over the lazy dog.');
  t.same(result.usage, { seconds: 2.5 }, 'not the upstream’s rounded 3');
});

t.test('transcription: verbose_json answers as JSON with segments; without a gateway duration, the upstream’s is billed', async (t) => {
  const result = await provider().transcription!.transcribe(transcription({ response_format: 'verbose_json' }), options());
  const body = result.body as { duration: number; segments: unknown[] };
  t.equal(result.contentType, 'application/json');
  t.equal(body.duration, 2);
  t.equal(body.segments.length, 1);
  t.same(result.usage, { seconds: 2 });
});

t.test('transcription: text, srt and vtt answer as text with their content type', async (t) => {
  const p = provider();
  for (const [format, start] of [
    ['text', 'The quick brown fox'],
    ['srt', '1\n00:00:00,000 --> 00:00:02,000\n'],
    ['vtt', 'WEBVTT\n\n00:00:00.000 --> 00:00:02.000\n'],
  ] as const) {
    const result = await p.transcription!.transcribe(transcription({ response_format: format, durationSeconds: 2 }), options());
    t.equal(typeof result.body, 'string', format);
    t.ok((result.body as string).startsWith(start), format);
    t.equal(result.contentType, 'text/plain; charset=utf-8');
    t.same(result.usage, { seconds: 2 });
  }
});

t.test('transcription: a JSON answer that is not a transcription is a protocol error', async (t) => {
  fake.enqueue({ kind: 'raw', body: 'not json' });
  const error = await failure(() => provider().transcription!.transcribe(transcription(), options()));
  t.equal(error.kind, 'protocol');
});

t.test('transcription: Azure uses the deployment URL', async (t) => {
  await provider({ baseUrl: fake.url, azure: { apiVersion: '2024-10-21' } }).transcription!.transcribe(transcription({ model: 'whisper' }), options());
  t.equal(fake.requests[0]?.path, '/openai/deployments/whisper/audio/transcriptions?api-version=2024-10-21');
});

// ---------------------------------------------------------------- failures, every modality

t.test('images, speech and transcription map each upstream failure to its kind', async (t) => {
  const p = provider();
  const calls = {
    images: () => p.images!.generate({ model: 'gpt-image-1', prompt: 'x' }, options()),
    speech: () => p.speech!.synthesize({ model: 'tts-1', input: 'Hi', voice: 'alloy' }, options()),
    transcription: () => p.transcription!.transcribe(transcription(), options()),
  };
  const cases = [
    { fault: { kind: 'reset' }, kind: 'connect' },
    { fault: { kind: 'hang' }, kind: 'timeout' },
    { fault: { kind: 'status', status: 500 }, kind: 'server' },
    { fault: { kind: 'status', status: 429, retryAfter: '2' }, kind: 'rate_limited', retryAfterMs: 2000 },
    { fault: { kind: 'status', status: 400 }, kind: 'client' },
    { fault: { kind: 'status', status: 403 }, kind: 'auth' },
  ] as const;
  for (const [modality, call] of Object.entries(calls)) {
    for (const { fault, kind, ...rest } of cases) {
      fake.enqueue(fault);
      const error = await failure(call);
      t.equal(error.kind, kind, `${modality}: ${JSON.stringify(fault)}`);
      if ('retryAfterMs' in rest) t.equal(error.retryAfterMs, rest.retryAfterMs);
    }
  }
});

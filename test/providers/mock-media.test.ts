import { parseBuffer } from 'music-metadata';
import { PNG } from 'pngjs';
import t from 'tap';
import type { JsonObject, Provider, SpeechResult, TranscriptionRequest } from '../../core/gateway/provider.ts';
import { mockProviderType } from '../../providers/mock/index.ts';
import { createProviderContext } from '../../providers/provider-context.ts';
import { callOptions as options, failure } from './provider-test-kit.ts';

/** The mock's images, speech and transcription: real PNG and WAV files, and its WAVs read back. */

const mock: Provider = mockProviderType.create('mock', mockProviderType.configSchema.parse({}), createProviderContext());

async function bytesOf(audio: SpeechResult['audio']): Promise<Buffer> {
  if (audio instanceof Uint8Array) return Buffer.from(audio);
  const parts: Uint8Array[] = [];
  for await (const part of audio) parts.push(part);
  return Buffer.concat(parts);
}

const speak = async (input: string, extra: JsonObject = {}) => {
  const result = await mock.speech!.synthesize({ model: 'mock-tts', input, voice: 'alloy', ...extra }, options());
  return { ...result, bytes: await bytesOf(result.audio) };
};

const transcribe = (data: Uint8Array, extra: Partial<TranscriptionRequest> = {}) =>
  mock.transcription!.transcribe({ model: 'mock-transcribe', file: { data, filename: 'speech.wav', contentType: 'audio/wav' }, ...extra }, options());

/** A plain 16-bit PCM WAV of silence, as any recorder writes: no text of the mock's in it. */
function silentWav(seconds: number, sampleRate: number, channels: number): Buffer {
  const data = Buffer.alloc(Math.round(seconds * sampleRate) * channels * 2);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVEfmt ', 8, 'ascii');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(channels, 22);
  header.writeUInt32LE(sampleRate, 24);
  header.writeUInt32LE(sampleRate * channels * 2, 28);
  header.writeUInt16LE(channels * 2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

t.test('images are real PNGs of the requested size, n of them, different from each other', async (t) => {
  const { body, usage } = await mock.images!.generate({ model: 'mock-image', prompt: 'a lighthouse at dusk', size: '256x256', n: 2, quality: 'hd', response_format: 'b64_json' }, options());
  const data = body['data'] as Array<{ b64_json: string; revised_prompt: string }>;
  t.equal(data.length, 2);
  const pngs = data.map((item) => PNG.sync.read(Buffer.from(item.b64_json, 'base64')));
  for (const png of pngs) t.same([png.width, png.height], [256, 256]);
  t.not(data[0]!.b64_json, data[1]!.b64_json);
  t.match(data[0]!.revised_prompt, /^a lighthouse at dusk/);
  t.type(body['created'], 'number');
  t.same(usage, { images: 2, size: '256x256', quality: 'hd' });
});

t.test('the same prompt draws the same image; another prompt another', async (t) => {
  const draw = async (prompt: string) =>
    ((await mock.images!.generate({ model: 'mock-image', prompt, size: '64x32', response_format: 'b64_json' }, options())).body['data'] as any[])[0].b64_json;
  t.equal(await draw('a red fox'), await draw('a red fox'));
  t.not(await draw('a red fox'), await draw('a blue whale'));
});

t.test('images drawn at a non-square full size; url answers a data URL of the PNG', async (t) => {
  const { body, usage } = await mock.images!.generate({ model: 'mock-image', prompt: 'wide view', size: '1536x1024', response_format: 'url' }, options());
  const url = (body['data'] as any[])[0].url as string;
  t.match(url, /^data:image\/png;base64,/);
  const png = PNG.sync.read(Buffer.from(url.slice('data:image/png;base64,'.length), 'base64'));
  t.same([png.width, png.height], [1536, 1024]);
  t.same(usage, { images: 1, size: '1536x1024', quality: null });
});

t.test('an image size the mock cannot draw is a client error', async (t) => {
  const error = await failure(() => mock.images!.generate({ model: 'mock-image', prompt: 'x', size: 'huge' }, options()));
  t.equal(error.kind, 'client');
  t.equal(error.status, 400);
});

t.test('speech is a 24 kHz 16-bit mono WAV whose length follows the characters and the speed', async (t) => {
  const input = 'Hello from the mock speech model.';
  const normal = await speak(input, { response_format: 'wav' });
  t.equal(normal.contentType, 'audio/wav');
  t.same(normal.usage, { characters: input.length });
  const metadata = await parseBuffer(normal.bytes, { mimeType: 'audio/wav' });
  t.equal(metadata.format.sampleRate, 24_000);
  t.equal(metadata.format.bitsPerSample, 16);
  t.equal(metadata.format.numberOfChannels, 1);
  t.equal(metadata.format.duration, input.length * 0.06);
  const fast = await parseBuffer((await speak(input, { speed: 2 })).bytes, { mimeType: 'audio/wav' });
  t.equal(fast.format.duration, (input.length * 0.06) / 2);
  const longer = await parseBuffer((await speak(`${input} ${input}`)).bytes, { mimeType: 'audio/wav' });
  t.ok(longer.format.duration! > metadata.format.duration!);
});

t.test('the audio encodes the text: letters are tones, spaces are silence', async (t) => {
  const { bytes } = await speak('a b', { response_format: 'pcm' });
  const perCharacter = 24_000 * 0.06;
  const loudest = (character: number) => {
    let peak = 0;
    for (let i = 0; i < perCharacter; i++) peak = Math.max(peak, Math.abs(bytes.readInt16LE((character * perCharacter + i) * 2)));
    return peak;
  };
  t.ok(loudest(0) > 5000, 'a is a tone');
  t.equal(loudest(1), 0, 'the space is silent');
  t.ok(loudest(2) > 5000, 'b is a tone');
});

t.test('pcm is the raw samples of the wav; compressed formats are refused as a client error', async (t) => {
  const wav = await speak('same text');
  const pcm = await speak('same text', { response_format: 'pcm' });
  t.equal(pcm.contentType, 'audio/pcm');
  t.same(wav.bytes.subarray(wav.bytes.length - pcm.bytes.length), pcm.bytes);
  for (const format of ['mp3', 'opus', 'aac', 'flac']) {
    const error = await failure(() => speak('x', { response_format: format }));
    t.equal(error.kind, 'client', format);
    t.match(error.message, /wav and pcm only/);
  }
});

t.test('transcription reads back the text of the mock’s own speech, billed by its duration', async (t) => {
  const input = 'The quick brown fox jumps over the lazy dog. Then it naps — café time!';
  const { bytes } = await speak(input);
  const result = await transcribe(bytes);
  t.equal(result.contentType, 'application/json');
  const seconds = Math.ceil([...input].length * 0.06);
  t.same(result.body, { text: input, usage: { type: 'duration', seconds } });
  t.same(result.usage, { seconds });
});

t.test('other audio gets a placeholder naming its duration', async (t) => {
  const result = await transcribe(silentWav(2.5, 16_000, 2), { response_format: 'text' });
  t.equal(result.body, '[2.5 seconds of audio]\n');
  t.equal(result.contentType, 'text/plain; charset=utf-8');
  t.same(result.usage, { seconds: 3 });
});

t.test('a file that is not audio is a client error', async (t) => {
  const error = await failure(() =>
    mock.transcription!.transcribe(
      { model: 'mock-transcribe', file: { data: Buffer.from('just some text, not audio at all'), filename: 'notes.txt', contentType: 'text/plain' } },
      options(),
    ),
  );
  t.equal(error.kind, 'client');
  t.equal(error.status, 400);
});

t.test('verbose_json has task, language, duration, text and timed segments', async (t) => {
  const { bytes } = await speak('First sentence here. Second one follows.');
  const result = await transcribe(bytes, { response_format: 'verbose_json', language: 'en' });
  const body = result.body as JsonObject;
  t.match(body, { task: 'transcribe', language: 'english', duration: 2.4, text: 'First sentence here. Second one follows.' });
  const segments = body['segments'] as JsonObject[];
  t.same(
    segments.map((segment) => [segment['id'], segment['text'], segment['start'], segment['end']]),
    [
      [0, 'First sentence here.', 0, 1.26],
      [1, 'Second one follows.', 1.26, 2.4],
    ],
  );
  for (const field of ['seek', 'tokens', 'temperature', 'avg_logprob', 'compression_ratio', 'no_speech_prob']) t.ok(field in segments[0]!, field);
});

t.test('srt and vtt number and time the same segments', async (t) => {
  const { bytes } = await speak('First sentence here. Second one follows.');
  const srt = await transcribe(bytes, { response_format: 'srt' });
  t.equal(srt.body, '1\n00:00:00,000 --> 00:00:01,260\nFirst sentence here.\n\n2\n00:00:01,260 --> 00:00:02,400\nSecond one follows.\n\n');
  const vtt = await transcribe(bytes, { response_format: 'vtt' });
  t.equal(vtt.contentType, 'text/vtt; charset=utf-8');
  t.equal(vtt.body, 'WEBVTT\n\n00:00:00.000 --> 00:00:01.260\nFirst sentence here.\n\n00:00:01.260 --> 00:00:02.400\nSecond one follows.\n\n');
});

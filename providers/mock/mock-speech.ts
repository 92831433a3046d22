/**
 * The mock's speech: a real WAV (PCM, 16-bit, mono, 24 kHz, what OpenAI's `wav` and `pcm` formats
 * carry) in which each character is a short tone (its pitch from the character, spaces and
 * punctuation silent), so the length follows the text and `speed`. The text itself rides in the
 * file's RIFF `LIST/INFO` chunk (`ISFT` names the mock, `ICMT` holds the text in UTF-8), which audio
 * tools show as the comment and the mock's transcription reads back.
 */
export const SPEECH_SAMPLE_RATE = 24_000;
/** One character at speed 1: about fifteen characters a second, like unhurried speech. */
export const SECONDS_PER_CHARACTER = 0.06;
/** What `ISFT` says in the mock's own files. */
export const MOCK_SPEECH_SOFTWARE = 'svc mock speech';

/** OpenAI accepts speeds from 0.25 to 4. */
export function clampSpeed(speed: number | undefined): number {
  return typeof speed === 'number' && Number.isFinite(speed) ? Math.min(4, Math.max(0.25, speed)) : 1;
}

/** Signed 16-bit little-endian samples: the `pcm` format's bytes and the WAV's data chunk. */
export function speechSamples(text: string, speed: number): Buffer {
  const perCharacter = Math.round((SPEECH_SAMPLE_RATE * SECONDS_PER_CHARACTER) / clampSpeed(speed));
  const characters = [...text];
  const samples = Buffer.alloc(characters.length * perCharacter * 2);
  // Short fades at each end keep the tones from clicking.
  const fade = Math.min(Math.floor(perCharacter / 4), Math.round(SPEECH_SAMPLE_RATE * 0.005));
  characters.forEach((character, position) => {
    if (!/[\p{L}\p{N}]/u.test(character)) return;
    const frequency = 220 * 2 ** (((character.codePointAt(0) ?? 0) % 48) / 24);
    const start = position * perCharacter;
    for (let i = 0; i < perCharacter; i++) {
      const envelope = Math.min(1, i / (fade || 1), (perCharacter - 1 - i) / (fade || 1));
      const value = Math.round(0.3 * 32767 * envelope * Math.sin((2 * Math.PI * frequency * i) / SPEECH_SAMPLE_RATE));
      samples.writeInt16LE(value, (start + i) * 2);
    }
  });
  return samples;
}

function chunk(id: string, body: Buffer): Buffer {
  const header = Buffer.alloc(8);
  header.write(id, 0, 'ascii');
  header.writeUInt32LE(body.length, 4);
  // RIFF chunks are word-aligned: an odd body gets a pad byte not counted in its size.
  return Buffer.concat(body.length % 2 === 1 ? [header, body, Buffer.alloc(1)] : [header, body]);
}

/** A zero-terminated INFO string. */
const infoString = (value: string): Buffer => Buffer.concat([Buffer.from(value, 'utf8'), Buffer.alloc(1)]);

export function speechWav(text: string, speed: number): Buffer {
  const format = Buffer.alloc(16);
  format.writeUInt16LE(1, 0); // PCM
  format.writeUInt16LE(1, 2); // mono
  format.writeUInt32LE(SPEECH_SAMPLE_RATE, 4);
  format.writeUInt32LE(SPEECH_SAMPLE_RATE * 2, 8); // bytes per second
  format.writeUInt16LE(2, 12); // bytes per sample frame
  format.writeUInt16LE(16, 14); // bits per sample
  const info = Buffer.concat([Buffer.from('INFO', 'ascii'), chunk('ISFT', infoString(MOCK_SPEECH_SOFTWARE)), chunk('ICMT', infoString(text))]);
  const body = Buffer.concat([Buffer.from('WAVE', 'ascii'), chunk('fmt ', format), chunk('LIST', info), chunk('data', speechSamples(text, speed))]);
  const header = Buffer.alloc(8);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(body.length, 4);
  return Buffer.concat([header, body]);
}

/** The text a WAV made by the mock carries, or null for any other file. */
export function mockSpeechText(file: Uint8Array): string | null {
  const data = Buffer.from(file.buffer, file.byteOffset, file.byteLength);
  if (data.length < 12 || data.toString('ascii', 0, 4) !== 'RIFF' || data.toString('ascii', 8, 12) !== 'WAVE') return null;
  for (let at = 12; at + 8 <= data.length; ) {
    const id = data.toString('ascii', at, at + 4);
    const size = data.readUInt32LE(at + 4);
    if (id === 'LIST' && at + 12 <= data.length && data.toString('ascii', at + 8, at + 12) === 'INFO') {
      const fields = infoFields(data.subarray(at + 12, Math.min(data.length, at + 8 + size)));
      return fields.get('ISFT') === MOCK_SPEECH_SOFTWARE ? (fields.get('ICMT') ?? '') : null;
    }
    at += 8 + size + (size % 2);
  }
  return null;
}

function infoFields(list: Buffer): Map<string, string> {
  const fields = new Map<string, string>();
  for (let at = 0; at + 8 <= list.length; ) {
    const size = list.readUInt32LE(at + 4);
    const value = list.subarray(at + 8, Math.min(list.length, at + 8 + size));
    const end = value.indexOf(0);
    fields.set(list.toString('ascii', at, at + 4), value.subarray(0, end < 0 ? value.length : end).toString('utf8'));
    at += 8 + size + (size % 2);
  }
  return fields;
}

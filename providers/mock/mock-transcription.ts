import { UpstreamError, type JsonObject, type TranscriptionRequest, type TranscriptionResult } from '../../core/gateway/provider.ts';
import { audioDurationSeconds } from '../audio-units.ts';
import { replyTokens, stableHash } from './mock-reply.ts';
import { mockSpeechText } from './mock-speech.ts';

/**
 * The mock's transcription: the text of its own WAVs read back from their INFO chunk, and for any
 * other audio a placeholder naming the duration ("[3.2 seconds of audio]"). The duration is read
 * from the file itself (music-metadata: WAV, MP3, Ogg/Opus, FLAC, M4A, WebM…); a file it cannot
 * read as audio is refused as the upstream would refuse it. Usage is the duration in whole
 * seconds, rounded up (what OpenAI's `usage.seconds` reports).
 */

const LANGUAGES: Record<string, string> = {
  en: 'english',
  de: 'german',
  es: 'spanish',
  fr: 'french',
  it: 'italian',
  ja: 'japanese',
  nl: 'dutch',
  no: 'norwegian',
  nb: 'norwegian',
  pt: 'portuguese',
  sv: 'swedish',
  zh: 'chinese',
};

async function audioDuration(file: TranscriptionRequest['file']): Promise<number> {
  const duration = await audioDurationSeconds(file);
  if (duration === null) throw new UpstreamError('client', `the file ${file.filename} is not audio the mock can read`, { status: 400 });
  return duration;
}

interface Segment {
  text: string;
  start: number;
  end: number;
}

/** Sentences timed by where their characters fall in the audio (the mock speaks at an even pace). */
function segmentsOf(text: string, duration: number): Segment[] {
  const characters = [...text].length || 1;
  const segments: Segment[] = [];
  let offset = 0;
  for (const sentence of text.match(/[^.!?]+(?:[.!?]+|$)\s*/g) ?? []) {
    const length = [...sentence].length;
    const trimmed = sentence.trim();
    if (trimmed !== '') {
      segments.push({ text: trimmed, start: round((offset / characters) * duration), end: round(((offset + length) / characters) * duration) });
    }
    offset += length;
  }
  return segments.length > 0 ? segments : [{ text, start: 0, end: round(duration) }];
}

const round = (seconds: number): number => Math.round(seconds * 1000) / 1000;

/** `HH:MM:SS,mmm` for SRT, `HH:MM:SS.mmm` for WebVTT. */
function timestamp(seconds: number, separator: ',' | '.'): string {
  const millis = Math.round(seconds * 1000);
  const two = (n: number) => String(n).padStart(2, '0');
  const h = Math.floor(millis / 3_600_000);
  const m = Math.floor(millis / 60_000) % 60;
  const s = Math.floor(millis / 1000) % 60;
  return `${two(h)}:${two(m)}:${two(s)}${separator}${String(millis % 1000).padStart(3, '0')}`;
}

export async function mockTranscription(request: TranscriptionRequest): Promise<TranscriptionResult> {
  const duration = await audioDuration(request.file);
  const text = mockSpeechText(request.file.data) ?? `[${duration.toFixed(1)} seconds of audio]`;
  const seconds = Math.ceil(duration);
  const usage = { type: 'duration', seconds };
  const segments = segmentsOf(text, duration);
  switch (request.response_format ?? 'json') {
    case 'text':
      return { contentType: 'text/plain; charset=utf-8', body: `${text}\n`, usage: { seconds } };
    case 'srt': {
      const body = segments.map((segment, i) => `${i + 1}\n${timestamp(segment.start, ',')} --> ${timestamp(segment.end, ',')}\n${segment.text}\n`).join('\n');
      return { contentType: 'text/plain; charset=utf-8', body: `${body}\n`, usage: { seconds } };
    }
    case 'vtt': {
      const cues = segments.map((segment) => `${timestamp(segment.start, '.')} --> ${timestamp(segment.end, '.')}\n${segment.text}\n`).join('\n');
      return { contentType: 'text/vtt; charset=utf-8', body: `WEBVTT\n\n${cues}\n`, usage: { seconds } };
    }
    case 'verbose_json': {
      const language = request.language ? (LANGUAGES[request.language.toLowerCase()] ?? request.language) : 'english';
      const body: JsonObject = { task: 'transcribe', language, duration: round(duration), text, segments: segments.map(verboseSegment), usage };
      return { contentType: 'application/json', body, usage: { seconds } };
    }
    default:
      return { contentType: 'application/json', body: { text, usage }, usage: { seconds } };
  }
}

/** Whisper's segment fields, all of which OpenAI's reference marks required. */
function verboseSegment(segment: Segment, id: number): JsonObject {
  return {
    id,
    seek: 0,
    start: segment.start,
    end: segment.end,
    text: segment.text,
    tokens: replyTokens(segment.text).map((token) => Number.parseInt(stableHash(token).slice(0, 4), 16)),
    temperature: 0,
    avg_logprob: -0.2,
    compression_ratio: 1,
    no_speech_prob: 0,
  };
}

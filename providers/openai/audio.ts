import { FormData } from 'undici';
import type { JsonObject, TranscriptionRequest, TranscriptionUsage } from '../../core/gateway/provider.ts';

/** OpenAI's content type for each speech `response_format`: used when an upstream answers audio without one. */
const SPEECH_CONTENT_TYPES: Readonly<Record<string, string>> = {
  mp3: 'audio/mpeg',
  opus: 'audio/opus',
  aac: 'audio/aac',
  flac: 'audio/flac',
  wav: 'audio/wav',
  pcm: 'audio/pcm',
};

export function speechContentType(upstreamType: string | undefined, responseFormat: string | undefined): string {
  return upstreamType ?? SPEECH_CONTENT_TYPES[responseFormat ?? 'mp3'] ?? 'application/octet-stream';
}

/** Formats OpenAI answers with a JSON body; the others (text, srt, vtt) are plain text. */
export function transcriptionIsJson(responseFormat: string | undefined): boolean {
  return responseFormat === undefined || responseFormat === 'json' || responseFormat === 'verbose_json';
}

/** Request fields that are not form fields: the file is sent as a file, the duration is ours, and the answer is always read whole. */
const NOT_FORM_FIELDS = new Set(['file', 'durationSeconds', 'stream']);

/**
 * The multipart form OpenAI's /audio/transcriptions takes: the file with its name and type, then
 * every other field as text. Array fields repeat as `name[]` (`timestamp_granularities[]`,
 * `include[]`), objects go as JSON (`chunking_strategy`).
 */
export function transcriptionForm(request: TranscriptionRequest): FormData {
  const form = new FormData();
  const { file } = request;
  form.append('file', new Blob([file.data], { type: file.contentType }), file.filename);
  for (const [name, value] of Object.entries(request)) {
    if (NOT_FORM_FIELDS.has(name) || value === undefined || value === null) continue;
    if (Array.isArray(value)) for (const item of value) form.append(`${name}[]`, String(item));
    else form.append(name, typeof value === 'object' ? JSON.stringify(value) : String(value));
  }
  return form;
}

/**
 * Seconds of audio to bill: the length the gateway read from the file itself when it passed one
 * (it is what the caller is billed on, whatever the upstream says); else what the upstream
 * reported, `usage.seconds` (whisper-1) or a verbose answer's `duration`; else 0.
 */
export function transcriptionUsage(request: TranscriptionRequest, body: JsonObject | string): TranscriptionUsage {
  if (typeof request.durationSeconds === 'number') return { seconds: request.durationSeconds };
  if (typeof body === 'string') return { seconds: 0 };
  const usage = body['usage'] as { type?: unknown; seconds?: unknown } | undefined;
  if (usage?.type === 'duration' && typeof usage.seconds === 'number') return { seconds: usage.seconds };
  return { seconds: typeof body['duration'] === 'number' ? body['duration'] : 0 };
}

import { emptyUsage, type TranscriptionRequest, type TranscriptionResult } from '../../core/gateway/provider.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { audioDurationSeconds } from '../../providers/audio-units.ts';
import type { GatewayCapability } from './capability.ts';
import type { CatalogueModel, ModelCatalogue } from './model-catalogue.ts';
import { unsupportedModel } from './unsupported-model.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './inference-errors.ts';

/** OpenAI's limit on the audio file (its API refuses more than 26,214,400 bytes). */
export const TRANSCRIPTION_MAX_FILE_BYTES = 25 * 1024 * 1024;
/** The whole form: the file, plus room for the other fields and the multipart framing. */
export const TRANSCRIPTION_MAX_BODY_BYTES = TRANSCRIPTION_MAX_FILE_BYTES + 1024 * 1024;

const RESPONSE_FORMATS = ['json', 'text', 'srt', 'vtt', 'verbose_json'] as const;

/** The request with the audio's length in seconds as the gateway read it from the file (what it is billed on). */
export interface ParsedTranscriptionRequest extends TranscriptionRequest {
  durationSeconds: number;
}

const invalid = (param: string, message: string) => new ApiError('invalid_parameter', message, { param });

/**
 * The multipart form as the HTTP adapter read it (or the same object from code): fields are
 * strings there, so `temperature` is read as a number here. Fields the gateway does not read
 * (`timestamp_granularities`, `include`, `chunking_strategy`…) pass through. The file must be audio
 * whose length can be read from the file itself: that length is what the call is billed on.
 */
export async function parseTranscriptionRequest(raw: unknown): Promise<ParsedTranscriptionRequest> {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new ApiError('invalid_body', 'Send multipart/form-data with a file and a model');
  const { file, model, language, prompt, response_format, temperature, stream, durationSeconds: _ignored, ...rest } = raw as Record<string, unknown>;
  if (!isFile(file)) throw invalid('file', "'file' is required: the audio to transcribe, sent as a file part of the form");
  if (typeof model !== 'string' || model === '') throw invalid('model', "'model' is required");
  for (const [param, value] of Object.entries({ language, prompt })) {
    if (value !== undefined && typeof value !== 'string') throw invalid(param, `'${param}' must be a string`);
  }
  if (response_format !== undefined && !RESPONSE_FORMATS.includes(response_format as never)) {
    throw invalid('response_format', `'response_format' must be one of ${RESPONSE_FORMATS.join(', ')}`);
  }
  const temperatureValue = temperature === undefined ? undefined : Number(temperature);
  if (temperatureValue !== undefined && (temperature === '' || !Number.isFinite(temperatureValue) || temperatureValue < 0 || temperatureValue > 1)) {
    throw invalid('temperature', "'temperature' must be a number from 0 to 1");
  }
  if (stream !== undefined && stream !== false && stream !== 'false') throw invalid('stream', 'Streamed transcriptions are not offered; leave stream unset');
  const durationSeconds = file.data.byteLength === 0 ? null : await audioDurationSeconds(file);
  if (durationSeconds === null) throw invalid('file', `The file ${JSON.stringify(file.filename)} is not audio the gateway can read (WAV, MP3, MP4/M4A, Ogg, Opus, FLAC, WebM)`);
  return {
    ...rest,
    model,
    file,
    ...(language !== undefined ? { language: language as string } : {}),
    ...(prompt !== undefined ? { prompt: prompt as string } : {}),
    ...(response_format !== undefined ? { response_format: response_format as ParsedTranscriptionRequest['response_format'] } : {}),
    ...(temperatureValue !== undefined ? { temperature: temperatureValue } : {}),
    durationSeconds,
  };
}

function isFile(value: unknown): value is TranscriptionRequest['file'] {
  if (value === null || typeof value !== 'object') return false;
  const file = value as Record<string, unknown>;
  return file['data'] instanceof Uint8Array && typeof file['filename'] === 'string' && typeof file['contentType'] === 'string';
}

type TranscriptionModel = CatalogueModel & { transcription: NonNullable<CatalogueModel['transcription']> };

const transcribes = (model: CatalogueModel): model is TranscriptionModel => model.transcription !== undefined;

/**
 * `POST /v1/audio/transcriptions`: JSON for json and verbose_json, the upstream's text with its
 * content type for text, srt and vtt; billed per second of audio as read from the file (metering
 * bills each started second whole). The input text data guardrails read is the `prompt`.
 */
export function transcriptionCapability(catalogue: ModelCatalogue): GatewayCapability<'transcription', ParsedTranscriptionRequest, TranscriptionResult> {
  return {
    endpoint: '/v1/audio/transcriptions',
    modality: 'transcription',
    upload: { maxFileBytes: TRANSCRIPTION_MAX_FILE_BYTES, maxBodyBytes: TRANSCRIPTION_MAX_BODY_BYTES },
    parse: parseTranscriptionRequest,
    modelOf: (body) => body.model,
    check(body, model, credential) {
      if (!transcribes(model)) throw unsupportedModel(model, { catalogue, credential, serves: transcribes, does: 'transcribe audio' });
      const formats = model.transcription.formats;
      if (body.response_format !== undefined && !formats.includes(body.response_format)) {
        throw invalid('response_format', `${model.id} does not answer ${JSON.stringify(body.response_format)}; its formats: ${formats.join(', ')}`);
      }
    },
    mapInputTexts(body, map) {
      if (body.prompt === undefined) return body;
      const prompt = map(body.prompt);
      return prompt === body.prompt ? body : { ...body, prompt };
    },
    estimate: (body) => ({ inputTokens: 0, maxOutputTokens: 0, units: { audioSeconds: body.durationSeconds }, countedInputTokens: 0 }),
    attempt: (candidate, body, options) => candidate.api.transcribe({ ...body, model: candidate.upstreamModel }, options),
    answer(result, body) {
      const text = typeof result.body === 'string';
      const { data, ...file } = body.file;
      return {
        usage: emptyUsage(),
        units: { audioSeconds: body.durationSeconds },
        ...(text ? { contentType: result.contentType } : {}),
        body: result.body,
        logged: { request: { ...body, file: { ...file, bytes: data.byteLength } }, response: result.body },
      };
    },
  };
}

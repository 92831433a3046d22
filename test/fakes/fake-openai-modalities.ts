import { createHash } from 'node:crypto';
import { PNG } from 'pngjs';
import { Response } from 'undici';
import { sendBrokenSse, sendJson, sendSse, sleep, type Exchange } from './fake-upstream-server.ts';

/**
 * The OpenAI wire formats besides chat and embeddings, for fake-openai-upstream.ts: the Responses
 * API (JSON, and SSE with OpenAI's event sequence and `sequence_number`s), images, speech and
 * transcription. Shapes follow OpenAI's API reference.
 */

export interface FakeResponsesUsage {
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens?: number;
  reasoning_tokens?: number;
}

/** What a scripted reply says, as far as these formats read it (a subset of the chat reply). */
export interface ModalityReply {
  /** Responses: the output text; transcription: the transcript. */
  content?: string;
  toolCalls?: Array<{ id?: string; name: string; arguments?: string | Record<string, unknown> }>;
  usage?: FakeResponsesUsage | false;
  /** Responses: how many `web_search_call` items to add (default: one when `web_search` is among the tools). */
  webSearches?: number;
  /** Streams (responses, speech): wait this long between frames. */
  chunkDelayMs?: number;
}

const DEFAULT_TEXT = 'Hello from the fake upstream.';
const DEFAULT_TRANSCRIPT = 'The quick brown fox jumps over the lazy dog.';
const DEFAULT_USAGE: FakeResponsesUsage = { prompt_tokens: 12, completion_tokens: 6 };
/** Length of any upload that is not a WAV the fake can read. */
const UNREADABLE_AUDIO_SECONDS = 3;

let sequence = 0;
const nextId = (prefix: string) => `${prefix}_fake${++sequence}`;
const now = () => Math.floor(Date.now() / 1000);

function wordPieces(text: string): string[] {
  return text.match(/\S+\s*/g) ?? (text === '' ? [] : [text]);
}

// ---------------------------------------------------------------- Responses API

const WEB_SEARCH_TOOLS = new Set(['web_search', 'web_search_preview', 'web_search_2025_08_26', 'web_search_preview_2025_03_11']);

function wantsWebSearch(body: any): boolean {
  return Array.isArray(body?.tools) && body.tools.some((tool: any) => WEB_SEARCH_TOOLS.has(tool?.type));
}

function responsesUsageBody(usage: FakeResponsesUsage) {
  return {
    input_tokens: usage.prompt_tokens,
    input_tokens_details: { cached_tokens: usage.cached_tokens ?? 0 },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: usage.reasoning_tokens ?? 0 },
    total_tokens: usage.prompt_tokens + usage.completion_tokens,
  };
}

/** A Response object with every field OpenAI marks required, `status` and `output` as given. */
function responseObject(body: any, id: string, createdAt: number, status: string, output: unknown[], usage: unknown) {
  return {
    id,
    object: 'response',
    created_at: createdAt,
    status,
    background: false,
    error: null,
    incomplete_details: null,
    instructions: body?.instructions ?? null,
    max_output_tokens: body?.max_output_tokens ?? null,
    model: typeof body?.model === 'string' ? body.model : 'fake-model',
    output,
    parallel_tool_calls: body?.parallel_tool_calls ?? true,
    previous_response_id: body?.previous_response_id ?? null,
    reasoning: { effort: null, summary: null },
    store: body?.store ?? true,
    temperature: body?.temperature ?? 1,
    text: body?.text ?? { format: { type: 'text' } },
    tool_choice: body?.tool_choice ?? 'auto',
    tools: body?.tools ?? [],
    top_p: body?.top_p ?? 1,
    truncation: 'disabled',
    usage,
    user: null,
    metadata: body?.metadata ?? {},
  };
}

interface PlannedOutput {
  searches: Array<{ id: string; query: string }>;
  message: { id: string; text: string } | null;
  calls: Array<{ id: string; call_id: string; name: string; arguments: string }>;
}

function planOutput(body: any, reply: ModalityReply): PlannedOutput {
  const count = reply.webSearches ?? (wantsWebSearch(body) ? 1 : 0);
  const query = typeof body?.input === 'string' ? body.input.slice(0, 80) : 'fake query';
  const calls = (reply.toolCalls ?? []).map((call, index) => ({
    id: nextId('fc'),
    call_id: call.id ?? `call_fake_${index}`,
    name: call.name,
    arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments ?? {}),
  }));
  const text = reply.content ?? (calls.length > 0 ? null : DEFAULT_TEXT);
  return {
    searches: Array.from({ length: count }, () => ({ id: nextId('ws'), query })),
    message: text === null ? null : { id: nextId('msg'), text },
    calls,
  };
}

const searchItem = (search: { id: string; query: string }, status: string) => ({
  id: search.id,
  type: 'web_search_call',
  status,
  ...(status === 'completed' ? { action: { type: 'search', query: search.query } } : {}),
});
const textPart = (text: string) => ({ type: 'output_text', text, annotations: [], logprobs: [] });
const messageItem = (message: { id: string }, status: string, content: unknown[]) => ({ id: message.id, type: 'message', status, role: 'assistant', content });
const callItem = (call: PlannedOutput['calls'][number], status: string, args: string) => ({
  id: call.id,
  type: 'function_call',
  status,
  arguments: args,
  call_id: call.call_id,
  name: call.name,
});

function finalOutput(plan: PlannedOutput): unknown[] {
  return [
    ...plan.searches.map((search) => searchItem(search, 'completed')),
    ...(plan.message ? [messageItem(plan.message, 'completed', [textPart(plan.message.text)])] : []),
    ...plan.calls.map((call) => callItem(call, 'completed', call.arguments)),
  ];
}

export function answerResponse(exchange: Exchange, reply: ModalityReply): void {
  const body = exchange.request.body;
  const usage = reply.usage ?? DEFAULT_USAGE;
  const output = finalOutput(planOutput(body, reply));
  sendJson(exchange.res, 200, responseObject(body, nextId('resp'), now(), 'completed', output, usage === false ? null : responsesUsageBody(usage)));
}

/** Every event of a streamed response, in OpenAI's order, as SSE frames numbered by `sequence_number`. */
function responseFrames(body: any, reply: ModalityReply): string[] {
  const plan = planOutput(body, reply);
  const id = nextId('resp');
  const createdAt = now();
  const usage = reply.usage ?? DEFAULT_USAGE;
  const frames: string[] = [];
  const emit = (type: string, fields: Record<string, unknown>) => {
    frames.push(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: frames.length, ...fields })}\n\n`);
  };
  const inProgress = responseObject(body, id, createdAt, 'in_progress', [], null);
  emit('response.created', { response: inProgress });
  emit('response.in_progress', { response: inProgress });

  let outputIndex = 0;
  for (const search of plan.searches) {
    const at = { output_index: outputIndex, item_id: search.id };
    emit('response.output_item.added', { output_index: outputIndex, item: searchItem(search, 'in_progress') });
    emit('response.web_search_call.in_progress', at);
    emit('response.web_search_call.searching', at);
    emit('response.web_search_call.completed', at);
    emit('response.output_item.done', { output_index: outputIndex, item: searchItem(search, 'completed') });
    outputIndex++;
  }
  if (plan.message) {
    const { message } = plan;
    const at = { item_id: message.id, output_index: outputIndex, content_index: 0 };
    emit('response.output_item.added', { output_index: outputIndex, item: messageItem(message, 'in_progress', []) });
    emit('response.content_part.added', { ...at, part: textPart('') });
    for (const delta of wordPieces(message.text)) emit('response.output_text.delta', { ...at, delta, logprobs: [] });
    emit('response.output_text.done', { ...at, text: message.text, logprobs: [] });
    emit('response.content_part.done', { ...at, part: textPart(message.text) });
    emit('response.output_item.done', { output_index: outputIndex, item: messageItem(message, 'completed', [textPart(message.text)]) });
    outputIndex++;
  }
  for (const call of plan.calls) {
    const at = { item_id: call.id, output_index: outputIndex };
    emit('response.output_item.added', { output_index: outputIndex, item: callItem(call, 'in_progress', '') });
    const half = Math.ceil(call.arguments.length / 2);
    for (const delta of [call.arguments.slice(0, half), call.arguments.slice(half)]) {
      if (delta !== '') emit('response.function_call_arguments.delta', { ...at, delta });
    }
    emit('response.function_call_arguments.done', { ...at, arguments: call.arguments });
    emit('response.output_item.done', { output_index: outputIndex, item: callItem(call, 'completed', call.arguments) });
    outputIndex++;
  }
  emit('response.completed', { response: responseObject(body, id, createdAt, 'completed', finalOutput(plan), usage === false ? null : responsesUsageBody(usage)) });
  return frames;
}

export async function answerResponseStream(exchange: Exchange, reply: ModalityReply): Promise<void> {
  await sendSse(exchange, responseFrames(exchange.request.body, reply), reply.chunkDelayMs);
}

/**
 * The first `afterEvents` events of a streamed response, then a cut connection, an `error` event
 * (OpenAI's in-band error) or a `response.failed` event carrying the error.
 */
export async function answerBrokenResponseStream(
  exchange: Exchange,
  afterEvents: number,
  ending: 'cut' | 'error' | 'failed',
  error: { message: string; type?: string; code?: string | null },
): Promise<void> {
  const frames = responseFrames(exchange.request.body, { content: 'one two three four five six seven eight' });
  if (ending === 'cut') {
    await sendBrokenSse(exchange, frames, afterEvents, 'cut');
    return;
  }
  const code = error.code ?? 'server_error';
  const last =
    ending === 'error'
      ? { type: 'error', sequence_number: afterEvents, code, message: error.message, param: null }
      : {
          type: 'response.failed',
          sequence_number: afterEvents,
          response: { ...responseObject(exchange.request.body, nextId('resp'), now(), 'failed', [], null), error: { code, message: error.message } },
        };
  await sendBrokenSse(exchange, frames, afterEvents, { lastFrame: `event: ${last.type}\ndata: ${JSON.stringify(last)}\n\n` });
}

// ---------------------------------------------------------------- Images

/** A real 4×4 PNG in a colour drawn from the prompt. */
export function fakePng(prompt: string): Buffer {
  const [r, g, b] = createHash('sha256').update(prompt).digest();
  const png = new PNG({ width: 4, height: 4 });
  for (let i = 0; i < png.data.length; i += 4) png.data.set([r!, g!, b!, 255], i);
  return PNG.sync.write(png);
}

/** Where a `url` answer's images are served from (GET on the fake itself). */
export const IMAGE_PATH_PREFIX = '/fake-images/';

export function answerImages(exchange: Exchange): void {
  const body = exchange.request.body;
  if (typeof body?.prompt !== 'string' || body.prompt === '') {
    sendJson(exchange.res, 400, { error: { message: "Missing required parameter: 'prompt'.", type: 'invalid_request_error', param: 'prompt', code: 'missing_required_parameter' } });
    return;
  }
  const count = typeof body.n === 'number' ? body.n : 1;
  const data = Array.from({ length: count }, (_, index) => {
    const prompt = `${body.prompt}#${index}`;
    if (body.response_format === 'url') {
      return { url: `http://${exchange.request.headers.host}${IMAGE_PATH_PREFIX}${encodeURIComponent(prompt)}.png`, revised_prompt: body.prompt };
    }
    return { b64_json: fakePng(prompt).toString('base64'), revised_prompt: body.prompt };
  });
  sendJson(exchange.res, 200, {
    created: now(),
    data,
    ...(typeof body.size === 'string' ? { size: body.size } : {}),
    ...(typeof body.quality === 'string' ? { quality: body.quality } : {}),
  });
}

export function answerImageDownload(exchange: Exchange): void {
  const name = decodeURIComponent(exchange.pathname.slice(exchange.pathname.indexOf(IMAGE_PATH_PREFIX) + IMAGE_PATH_PREFIX.length).replace(/\.png$/, ''));
  const png = fakePng(name);
  exchange.res.writeHead(200, { 'content-type': 'image/png', 'content-length': png.length });
  exchange.res.end(png);
}

// ---------------------------------------------------------------- Speech

const SAMPLE_RATE = 24_000;

/** A real mono 16-bit WAV of silence, a tenth of a second per word of input. */
export function fakeWav(input: string): Buffer {
  const samples = Math.max(1, wordPieces(input).length) * (SAMPLE_RATE / 10);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0);
  header.writeUInt32LE(36 + samples * 2, 4);
  header.write('WAVEfmt ', 8);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(SAMPLE_RATE, 24);
  header.writeUInt32LE(SAMPLE_RATE * 2, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36);
  header.writeUInt32LE(samples * 2, 40);
  return Buffer.concat([header, Buffer.alloc(samples * 2)]);
}

/** Silent MPEG-1 Layer III frames (128 kbit/s, 44.1 kHz, mono), which any MP3 decoder reads. */
function fakeMp3(input: string): Buffer {
  const frame = Buffer.alloc(417);
  frame.set([0xff, 0xfb, 0x90, 0xc4]);
  return Buffer.concat(Array.from({ length: Math.max(1, wordPieces(input).length) * 4 }, () => frame));
}

/** OpenAI's content type per speech format. */
export const SPEECH_FORMATS: Readonly<Record<string, string>> = {
  mp3: 'audio/mpeg',
  opus: 'audio/opus',
  aac: 'audio/aac',
  flac: 'audio/flac',
  wav: 'audio/wav',
  pcm: 'audio/pcm',
};

/**
 * Audio for a speech request. wav, pcm and mp3 are real encodings of silence; opus, aac and flac
 * are bytes of the right length under the right content type (a gateway passes audio through
 * without reading it).
 */
export function speechAudio(body: any): { contentType: string; audio: Buffer } {
  const format = typeof body?.response_format === 'string' ? body.response_format : 'mp3';
  const input = String(body?.input ?? '');
  const wav = fakeWav(input);
  const audio = format === 'wav' ? wav : format === 'pcm' ? wav.subarray(44) : format === 'mp3' ? fakeMp3(input) : createHash('sha256').update(input).digest();
  return { contentType: SPEECH_FORMATS[format] ?? 'application/octet-stream', audio };
}

/** Audio in this many pieces, so a client sees it arrive as a stream. */
const SPEECH_PIECES = 4;

function audioPieces(audio: Buffer): Buffer[] {
  const size = Math.ceil(audio.length / SPEECH_PIECES);
  return Array.from({ length: Math.ceil(audio.length / size) }, (_, i) => audio.subarray(i * size, (i + 1) * size));
}

export async function answerSpeech(exchange: Exchange, reply: ModalityReply, cutAfterPieces?: number): Promise<void> {
  const body = exchange.request.body;
  if (typeof body?.input !== 'string' || typeof body?.voice !== 'string') {
    sendJson(exchange.res, 400, { error: { message: "Missing required parameter: 'input' or 'voice'.", type: 'invalid_request_error', param: null, code: null } });
    return;
  }
  const format = body.response_format ?? 'mp3';
  if (!(format in SPEECH_FORMATS)) {
    sendJson(exchange.res, 400, { error: { message: `Invalid value: '${format}'.`, type: 'invalid_request_error', param: 'response_format', code: 'invalid_value' } });
    return;
  }
  const { contentType, audio } = speechAudio(body);
  const pieces = audioPieces(audio);
  exchange.res.writeHead(200, { 'content-type': contentType, 'transfer-encoding': 'chunked' });
  for (const [index, piece] of pieces.entries()) {
    if (exchange.clientGone) return;
    if (index === cutAfterPieces) {
      exchange.res.socket?.destroy();
      return;
    }
    await new Promise<void>((resolve) => exchange.res.write(piece, () => resolve()));
    if (reply.chunkDelayMs) await sleep(reply.chunkDelayMs);
  }
  exchange.res.end();
}

// ---------------------------------------------------------------- Transcription

export interface ReceivedUpload {
  /** Every text field of the form (array fields under their `name[]`, as sent). */
  fields: Record<string, string | string[]>;
  file: { filename: string; contentType: string; data: Buffer } | null;
}

/** Reads a multipart/form-data body the way a real server does (undici's parser). */
export async function readUpload(exchange: Exchange): Promise<ReceivedUpload> {
  const form = await new Response(exchange.request.rawBody, { headers: { 'content-type': String(exchange.request.headers['content-type']) } }).formData();
  const upload: ReceivedUpload = { fields: {}, file: null };
  for (const [name, value] of form) {
    if (typeof value !== 'string') {
      upload.file = { filename: value.name, contentType: value.type, data: Buffer.from(await value.arrayBuffer()) };
      continue;
    }
    const previous = upload.fields[name];
    upload.fields[name] = previous === undefined ? value : [...(Array.isArray(previous) ? previous : [previous]), value];
  }
  return upload;
}

/** A PCM WAV's length from its header; anything else counts a fixed few seconds. */
function audioSeconds(data: Buffer): number {
  if (data.length < 44 || data.toString('ascii', 0, 4) !== 'RIFF' || data.toString('ascii', 8, 12) !== 'WAVE') return UNREADABLE_AUDIO_SECONDS;
  const byteRate = data.readUInt32LE(28);
  return byteRate > 0 ? data.readUInt32LE(40) / byteRate : UNREADABLE_AUDIO_SECONDS;
}

function timestamp(seconds: number, separator: ',' | '.'): string {
  const ms = Math.round(seconds * 1000);
  const pad = (value: number, width = 2) => String(value).padStart(width, '0');
  return `${pad(Math.floor(ms / 3_600_000))}:${pad(Math.floor(ms / 60_000) % 60)}:${pad(Math.floor(ms / 1000) % 60)}${separator}${pad(ms % 1000, 3)}`;
}

/**
 * Answers per `response_format` as OpenAI does: json and verbose_json as JSON (with whisper's
 * `usage: {type: duration}`), text, srt and vtt as plain text. The parsed form replaces the
 * recorded request's body, so tests read `fake.requests[i].body.fields` and `.file`.
 */
export async function answerTranscription(exchange: Exchange, reply: ModalityReply): Promise<void> {
  const upload = await readUpload(exchange);
  exchange.request.body = upload;
  if (upload.file === null || typeof upload.fields['model'] !== 'string') {
    sendJson(exchange.res, 400, { error: { message: "Missing required parameter: 'file' or 'model'.", type: 'invalid_request_error', param: null, code: null } });
    return;
  }
  const text = reply.content ?? DEFAULT_TRANSCRIPT;
  const duration = audioSeconds(upload.file.data);
  const usage = { type: 'duration', seconds: Math.ceil(duration) };
  const plain = (body: string) => {
    exchange.res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body) });
    exchange.res.end(body);
  };
  switch (upload.fields['response_format'] ?? 'json') {
    case 'json':
      sendJson(exchange.res, 200, { text, usage });
      return;
    case 'verbose_json': {
      const segment = { id: 0, seek: 0, start: 0, end: duration, text, tokens: [1, 2, 3], temperature: 0, avg_logprob: -0.2, compression_ratio: 1.1, no_speech_prob: 0.01 };
      sendJson(exchange.res, 200, { task: 'transcribe', language: 'english', duration, text, segments: [segment], usage });
      return;
    }
    case 'text':
      plain(`${text}\n`);
      return;
    case 'srt':
      plain(`1\n${timestamp(0, ',')} --> ${timestamp(duration, ',')}\n${text}\n\n`);
      return;
    case 'vtt':
      plain(`WEBVTT\n\n${timestamp(0, '.')} --> ${timestamp(duration, '.')}\n${text}\n\n`);
      return;
    default:
      sendJson(exchange.res, 400, { error: { message: 'Invalid response_format.', type: 'invalid_request_error', param: 'response_format', code: null } });
  }
}

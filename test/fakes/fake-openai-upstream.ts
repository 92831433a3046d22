import { createHash } from 'node:crypto';
import {
  answerBrokenResponseStream,
  answerImageDownload,
  answerImages,
  answerResponse,
  answerResponseStream,
  answerSpeech,
  answerTranscription,
  IMAGE_PATH_PREFIX,
} from './fake-openai-modalities.ts';
import { sendBrokenSse, sendJson, sendSse, sleep, startFakeServer, type Exchange, type FakeServerOptions, type FakeUpstream, type FaultBehaviour } from './fake-upstream-server.ts';

/**
 * A fake OpenAI-compatible upstream: POST …/chat/completions (JSON or SSE) and …/embeddings, under
 * any prefix (`/v1`, Azure's `/openai/deployments/{d}`); …/responses (JSON or SSE), …/images/generations,
 * …/audio/speech and …/audio/transcriptions (multipart) in fake-openai-modalities.ts.
 *
 *   const fake = await startFakeOpenAIUpstream();
 *   fake.enqueue({ kind: 'reply', content: 'Hi', usage: { prompt_tokens: 5, completion_tokens: 1 } },
 *                { kind: 'status', status: 429, retryAfter: '2' });
 *   // point a client at fake.baseUrl (= fake.url + '/v1'); read fake.requests; await fake.close()
 */

export interface FakeOpenAIUsage {
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens?: number;
  reasoning_tokens?: number;
}

export interface FakeToolCall {
  id?: string;
  name: string;
  /** A JSON string, or an object to serialise. */
  arguments?: string | Record<string, unknown>;
}

export interface OpenAIReply {
  kind: 'reply';
  /** Default `Hello from the fake upstream.` */
  content?: string;
  toolCalls?: FakeToolCall[];
  /** Default `tool_calls` when there are tool calls, else `stop`. */
  finishReason?: string;
  /** Reported usage; `false` reports none (no usage field, no usage chunk). Default: a fixed small count. */
  usage?: FakeOpenAIUsage | false;
  /** Wait this long before the status line: a slow time to first byte. */
  delayMs?: number;
  /** Wait for this before the status line: calls held in flight until a test lets them go. */
  holdUntil?: Promise<unknown>;
  /** Streams: wait this long between chunks. */
  chunkDelayMs?: number;
  /**
   * Streams with `chunkDelayMs`: a model's rhythm, where the delay separates tokens only. The role
   * chunk goes out with the first content chunk and the finish chunk with the usage chunk and
   * [DONE], so the first content arrives at once and every later one `chunkDelayMs` apart.
   */
  tokenPaced?: boolean;
  /** Extra top-level fields on the completion / every chunk. */
  extra?: Record<string, unknown>;
  /** Responses: how many `web_search_call` items (default: one when `web_search` is among the tools). */
  webSearches?: number;
  /**
   * Chat, JSON: the first output token's alternatives, most likely first. The reply is that first
   * token, and a request asking `logprobs: true` gets them as OpenAI sends them
   * (`choices[0].logprobs.content[0].top_logprobs`, as many as its `top_logprobs` asks).
   */
  topLogprobs?: Array<{ token: string; logprob: number }>;
}

/** Stream a few content chunks (responses: events; speech: audio pieces), then drop the connection without finishing. */
export interface OpenAIStreamCut {
  kind: 'stream-cut';
  afterChunks: number;
  content?: string;
}

/** Stream a few content chunks, then an in-band `{"error": …}` frame (responses: an `error` event, or `response.failed`). */
export interface OpenAIStreamError {
  kind: 'stream-error';
  afterChunks: number;
  error?: { message: string; type?: string; code?: string | null };
  content?: string;
  /** Responses: end with `response.failed` carrying the error instead of an `error` event. */
  failedResponse?: boolean;
}

export type OpenAIBehaviour = OpenAIReply | OpenAIStreamCut | OpenAIStreamError | FaultBehaviour;

export interface FakeOpenAIUpstream extends FakeUpstream<OpenAIBehaviour> {
  /** `url + '/v1'`, what an OpenAI client takes as its base URL. */
  baseUrl: string;
}

export interface FakeOpenAIOptions extends FakeServerOptions {
  /** What unscripted requests get (default: a plain reply). */
  defaultReply?: Omit<OpenAIReply, 'kind'>;
  /**
   * What unscripted requests to a path ending in a key (`'/responses'`) get instead of
   * `defaultReply`, so one long-lived fake answers each endpoint with a reply of its own size.
   */
  defaultReplyByPath?: Record<string, Omit<OpenAIReply, 'kind'>>;
  /**
   * What unscripted requests naming a model (the body's `model`) get, before `defaultReplyByPath`:
   * a benchmark asks for a paced answer by model name, and every other request stays as it was.
   */
  defaultReplyByModel?: Record<string, Omit<OpenAIReply, 'kind'>>;
}

const DEFAULT_CONTENT = 'Hello from the fake upstream.';
const DEFAULT_USAGE: FakeOpenAIUsage = { prompt_tokens: 12, completion_tokens: 6 };
const EMBEDDING_DIMENSIONS = 8;

let sequence = 0;
const nextId = (prefix: string) => `${prefix}-fake-${++sequence}`;

/** Content split like a model streams it: a few words per chunk. */
function contentPieces(content: string): string[] {
  const words = content.match(/\S+\s*/g) ?? [];
  if (words.length === 0) return content === '' ? [] : [content];
  const pieces: string[] = [];
  for (let i = 0; i < words.length; i += 2) pieces.push(words.slice(i, i + 2).join(''));
  return pieces;
}

function usageBody(usage: FakeOpenAIUsage) {
  return {
    prompt_tokens: usage.prompt_tokens,
    completion_tokens: usage.completion_tokens,
    total_tokens: usage.prompt_tokens + usage.completion_tokens,
    prompt_tokens_details: { cached_tokens: usage.cached_tokens ?? 0 },
    completion_tokens_details: { reasoning_tokens: usage.reasoning_tokens ?? 0 },
  };
}

function toolCallsBody(calls: FakeToolCall[]) {
  return calls.map((call, index) => ({
    id: call.id ?? `call_fake_${index}`,
    type: 'function' as const,
    function: { name: call.name, arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments ?? {}) },
  }));
}

function modelOf(body: { model?: unknown } | null | undefined): string {
  return typeof body?.model === 'string' ? body.model : 'fake-model';
}

/** OpenAI's `logprobs` of a choice: null unless the request asked for them; one entry per output token. */
function logprobsBody(request: { logprobs?: unknown; top_logprobs?: unknown } | null | undefined, reply: Omit<OpenAIReply, 'kind'>, content: string | null): unknown {
  if (request?.logprobs !== true || content === null) return null;
  const asked = typeof request.top_logprobs === 'number' ? request.top_logprobs : 0;
  const token = (item: { token: string; logprob: number }) => ({ token: item.token, logprob: item.logprob, bytes: [...Buffer.from(item.token, 'utf8')] });
  const top = reply.topLogprobs ?? [{ token: content, logprob: -0.01 }];
  return { content: [{ ...token(top[0]!), top_logprobs: top.slice(0, asked).map(token) }], refusal: null };
}

function answerCompletion(exchange: Exchange, reply: Omit<OpenAIReply, 'kind'>): void {
  const content = reply.content ?? reply.topLogprobs?.[0]?.token ?? (reply.toolCalls ? null : DEFAULT_CONTENT);
  const usage = reply.usage ?? DEFAULT_USAGE;
  const message: Record<string, unknown> = { role: 'assistant', content };
  if (reply.toolCalls) message['tool_calls'] = toolCallsBody(reply.toolCalls);
  sendJson(exchange.res, 200, {
    id: nextId('chatcmpl'),
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: modelOf(exchange.request.body),
    choices: [{ index: 0, message, finish_reason: reply.finishReason ?? (reply.toolCalls ? 'tool_calls' : 'stop'), logprobs: logprobsBody(exchange.request.body, reply, content) }],
    ...(usage === false ? {} : { usage: usageBody(usage) }),
    ...reply.extra,
  });
}

/** The chunks of a streamed answer, finish chunk included; the usage chunk is separate. */
function streamFrames(exchange: Exchange, reply: Omit<OpenAIReply, 'kind'>, wantsUsage: boolean) {
  const base = { id: nextId('chatcmpl'), object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model: modelOf(exchange.request.body), ...reply.extra };
  const frame = (delta: Record<string, unknown>, finish: string | null) =>
    `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }], ...(wantsUsage ? { usage: null } : {}) })}\n\n`;

  const frames = [frame({ role: 'assistant', content: '' }, null)];
  const content = reply.content ?? (reply.toolCalls ? '' : DEFAULT_CONTENT);
  for (const piece of contentPieces(content)) frames.push(frame({ content: piece }, null));
  toolCallsBody(reply.toolCalls ?? []).forEach((call, index) => {
    frames.push(frame({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }] }, null));
    const args = call.function.arguments;
    const half = Math.ceil(args.length / 2);
    for (const part of [args.slice(0, half), args.slice(half)]) {
      if (part !== '') frames.push(frame({ tool_calls: [{ index, function: { arguments: part } }] }, null));
    }
  });
  frames.push(frame({}, reply.finishReason ?? (reply.toolCalls ? 'tool_calls' : 'stop')));
  const usage = reply.usage ?? DEFAULT_USAGE;
  const usageFrame = wantsUsage && usage !== false ? `data: ${JSON.stringify({ ...base, choices: [], usage: usageBody(usage) })}\n\n` : null;
  return { frames, usageFrame };
}

async function answerStream(exchange: Exchange, reply: Omit<OpenAIReply, 'kind'>): Promise<void> {
  const wantsUsage = exchange.request.body?.stream_options?.include_usage === true;
  const { frames, usageFrame } = streamFrames(exchange, reply, wantsUsage);
  if (usageFrame) frames.push(usageFrame);
  frames.push('data: [DONE]\n\n');
  await sendSse(exchange, reply.tokenPaced ? tokenPacedWrites(frames, usageFrame !== null) : frames, reply.chunkDelayMs);
}

/** `tokenPaced`: the role chunk joins the first content chunk, the finish chunk joins what follows it. */
function tokenPacedWrites(frames: string[], withUsage: boolean): string[] {
  const tail = withUsage ? 3 : 2; // finish chunk, [usage chunk,] [DONE]
  if (frames.length < tail + 2) return [frames.join('')];
  return [frames[0]! + frames[1]!, ...frames.slice(2, -tail), frames.slice(-tail).join('')];
}

async function answerBrokenStream(exchange: Exchange, behaviour: OpenAIStreamCut | OpenAIStreamError): Promise<void> {
  const { frames } = streamFrames(exchange, { content: behaviour.content ?? 'one two three four five six seven eight' }, false);
  if (behaviour.kind === 'stream-cut') {
    await sendBrokenSse(exchange, frames, behaviour.afterChunks, 'cut');
    return;
  }
  const error = { message: 'The server had an error while processing your request.', type: 'server_error', code: null, ...behaviour.error };
  await sendBrokenSse(exchange, frames, behaviour.afterChunks, { lastFrame: `data: ${JSON.stringify({ error: { ...error, param: null } })}\n\n` });
}

function embedding(text: string): number[] {
  const digest = createHash('sha256').update(text).digest();
  const vector = Array.from({ length: EMBEDDING_DIMENSIONS }, (_, i) => digest[i]! / 255 - 0.5);
  const norm = Math.hypot(...vector) || 1;
  return vector.map((value) => value / norm);
}

function answerEmbeddings(exchange: Exchange, reply: Omit<OpenAIReply, 'kind'>): void {
  const body = exchange.request.body;
  const inputs: unknown[] = Array.isArray(body?.input) ? body.input : [body?.input ?? ''];
  const usage = reply.usage ?? DEFAULT_USAGE;
  sendJson(exchange.res, 200, {
    object: 'list',
    model: modelOf(body),
    data: inputs.map((input, index) => ({ object: 'embedding', index, embedding: embedding(JSON.stringify(input)) })),
    ...(usage === false ? {} : { usage: { prompt_tokens: usage.prompt_tokens, total_tokens: usage.prompt_tokens } }),
  });
}

const MODALITY_PATHS = ['/responses', '/images/generations', '/audio/speech', '/audio/transcriptions'];

function isModalityPath(pathname: string): boolean {
  return MODALITY_PATHS.some((path) => pathname.endsWith(path));
}

async function answerModality(exchange: Exchange, reply: OpenAIReply | OpenAIStreamCut | OpenAIStreamError): Promise<void> {
  const { pathname } = exchange;
  if (pathname.endsWith('/audio/speech')) {
    await answerSpeech(exchange, reply.kind === 'reply' ? reply : {}, reply.kind === 'reply' ? undefined : reply.afterChunks);
  } else if (pathname.endsWith('/audio/transcriptions')) {
    await answerTranscription(exchange, reply.kind === 'reply' ? reply : {});
  } else if (pathname.endsWith('/images/generations')) {
    answerImages(exchange);
  } else if (reply.kind === 'stream-cut') {
    await answerBrokenResponseStream(exchange, reply.afterChunks, 'cut', { message: '' });
  } else if (reply.kind === 'stream-error') {
    const error = { message: 'The server had an error while processing your request.', ...reply.error };
    await answerBrokenResponseStream(exchange, reply.afterChunks, reply.failedResponse ? 'failed' : 'error', error);
  } else if (exchange.request.body?.stream === true) {
    await answerResponseStream(exchange, reply);
  } else {
    answerResponse(exchange, reply);
  }
}

export async function startFakeOpenAIUpstream(options: FakeOpenAIOptions = {}): Promise<FakeOpenAIUpstream> {
  const defaultReply: OpenAIReply = { ...options.defaultReply, kind: 'reply' };
  const defaultsByPath = Object.entries(options.defaultReplyByPath ?? {}).map(([suffix, reply]) => ({ suffix, reply: { ...reply, kind: 'reply' } as OpenAIReply }));
  const defaultsByModel = new Map(Object.entries(options.defaultReplyByModel ?? {}).map(([model, reply]) => [model, { ...reply, kind: 'reply' } as OpenAIReply]));
  const defaultFor = (exchange: Exchange) =>
    defaultsByModel.get(exchange.request.body?.model) ?? defaultsByPath.find(({ suffix }) => exchange.pathname.endsWith(suffix))?.reply ?? defaultReply;
  const fake = await startFakeServer<OpenAIBehaviour>(
    {
      errorBody: (status, message) => ({
        error: { message, type: status === 429 ? 'rate_limit_error' : status >= 500 ? 'server_error' : 'invalid_request_error', param: null, code: null },
      }),
      answer: async (exchange, behaviour) => {
        const reply = behaviour ?? defaultFor(exchange);
        if (reply.kind !== 'reply' && reply.kind !== 'stream-cut' && reply.kind !== 'stream-error') return;
        if (exchange.request.method === 'GET' && exchange.pathname.includes(IMAGE_PATH_PREFIX)) {
          answerImageDownload(exchange);
          return;
        }
        if (reply.kind === 'reply' && (reply.delayMs || reply.holdUntil)) {
          if (reply.delayMs) await sleep(reply.delayMs);
          if (reply.holdUntil) await reply.holdUntil;
          if (exchange.clientGone) return;
        }
        if (!exchange.pathname.endsWith('/chat/completions') && !exchange.pathname.endsWith('/embeddings') && !isModalityPath(exchange.pathname)) {
          sendJson(exchange.res, 404, { error: { message: `No route ${exchange.pathname}`, type: 'invalid_request_error', param: null, code: null } });
          return;
        }
        if (isModalityPath(exchange.pathname)) {
          await answerModality(exchange, reply);
        } else if (reply.kind !== 'reply') {
          await answerBrokenStream(exchange, reply);
        } else if (exchange.pathname.endsWith('/embeddings')) {
          answerEmbeddings(exchange, reply);
        } else if (exchange.request.body?.stream === true) {
          await answerStream(exchange, reply);
        } else {
          answerCompletion(exchange, reply);
        }
      },
    },
    options,
  );
  return { ...fake, baseUrl: `${fake.url}/v1` };
}

import { sendBrokenSse, sendJson, sendSse, sleep, startFakeServer, type Exchange, type FakeServerOptions, type FakeUpstream, type FaultBehaviour } from './fake-upstream-server.ts';

/**
 * A fake Anthropic Messages API: POST /v1/messages, JSON or SSE (`stream: true`).
 *
 *   const fake = await startFakeAnthropicUpstream();
 *   fake.enqueue({ kind: 'reply', toolCalls: [{ name: 'get_weather', input: { city: 'Oslo' } }] },
 *                { kind: 'stream-error', afterEvents: 3 });
 *   // point a client at fake.url; read fake.requests; await fake.close()
 */

export interface FakeAnthropicUsage {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens?: number;
  cache_creation_input_tokens?: number;
}

export interface AnthropicReply {
  kind: 'reply';
  /** Default `Hello from the fake upstream.`; with toolCalls and no content, no text block. */
  content?: string;
  toolCalls?: Array<{ id?: string; name: string; input?: Record<string, unknown> }>;
  /** A thinking block before the answer. */
  thinking?: string;
  /** Default `tool_use` with tool calls, else `end_turn`. */
  stopReason?: string;
  /** `false`: no usage anywhere. Default: a fixed small count. */
  usage?: FakeAnthropicUsage | false;
  /** Wait this long before the status line: a slow time to first byte. */
  delayMs?: number;
  /** Streams: wait this long between events. */
  chunkDelayMs?: number;
}

/** Stream a few events, then drop the connection. */
export interface AnthropicStreamCut {
  kind: 'stream-cut';
  afterEvents: number;
  content?: string;
}

/** Stream a few events, then an `event: error` frame (default overloaded_error). */
export interface AnthropicStreamError {
  kind: 'stream-error';
  afterEvents: number;
  error?: { type: string; message: string };
  content?: string;
}

export type AnthropicBehaviour = AnthropicReply | AnthropicStreamCut | AnthropicStreamError | FaultBehaviour;

export type FakeAnthropicUpstream = FakeUpstream<AnthropicBehaviour>;

export interface FakeAnthropicOptions extends FakeServerOptions {
  defaultReply?: Omit<AnthropicReply, 'kind'>;
}

const DEFAULT_CONTENT = 'Hello from the fake upstream.';
const DEFAULT_USAGE: FakeAnthropicUsage = { input_tokens: 12, output_tokens: 6 };

let sequence = 0;

interface Block {
  type: string;
  [field: string]: unknown;
}

function contentOf(reply: Omit<AnthropicReply, 'kind'>): Block[] {
  const blocks: Block[] = [];
  if (reply.thinking !== undefined) blocks.push({ type: 'thinking', thinking: reply.thinking, signature: 'fake-signature' });
  const text = reply.content ?? (reply.toolCalls ? undefined : DEFAULT_CONTENT);
  if (text !== undefined) blocks.push({ type: 'text', text });
  (reply.toolCalls ?? []).forEach((call, index) => {
    blocks.push({ type: 'tool_use', id: call.id ?? `toolu_fake_${index}`, name: call.name, input: call.input ?? {} });
  });
  return blocks;
}

function usageOf(reply: Omit<AnthropicReply, 'kind'>) {
  const usage = reply.usage ?? DEFAULT_USAGE;
  if (usage === false) return undefined;
  return { cache_read_input_tokens: 0, cache_creation_input_tokens: 0, ...usage };
}

function modelOf(body: { model?: unknown } | null | undefined): string {
  return typeof body?.model === 'string' ? body.model : 'claude-fake';
}

function answerMessage(exchange: Exchange, reply: Omit<AnthropicReply, 'kind'>): void {
  const usage = usageOf(reply);
  sendJson(exchange.res, 200, {
    id: `msg_fake_${++sequence}`,
    type: 'message',
    role: 'assistant',
    model: modelOf(exchange.request.body),
    content: contentOf(reply),
    stop_reason: reply.stopReason ?? (reply.toolCalls ? 'tool_use' : 'end_turn'),
    stop_sequence: null,
    ...(usage ? { usage } : {}),
  });
}

const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/** The full event sequence of a streamed answer, as Anthropic sends it. */
function streamEvents(exchange: Exchange, reply: Omit<AnthropicReply, 'kind'>): string[] {
  const usage = usageOf(reply);
  const events = [
    sse('message_start', {
      type: 'message_start',
      message: {
        id: `msg_fake_${++sequence}`,
        type: 'message',
        role: 'assistant',
        model: modelOf(exchange.request.body),
        content: [],
        stop_reason: null,
        stop_sequence: null,
        ...(usage ? { usage: { ...usage, output_tokens: 1 } } : {}),
      },
    }),
    sse('ping', { type: 'ping' }),
  ];
  contentOf(reply).forEach((block, index) => {
    if (block.type === 'text') {
      events.push(sse('content_block_start', { type: 'content_block_start', index, content_block: { type: 'text', text: '' } }));
      for (const piece of (block['text'] as string).match(/\S+\s*/g) ?? []) {
        events.push(sse('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'text_delta', text: piece } }));
      }
    } else if (block.type === 'thinking') {
      events.push(sse('content_block_start', { type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '' } }));
      events.push(sse('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: block['thinking'] } }));
      events.push(sse('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: 'fake-signature' } }));
    } else {
      events.push(sse('content_block_start', { type: 'content_block_start', index, content_block: { type: 'tool_use', id: block['id'], name: block['name'], input: {} } }));
      const json = JSON.stringify(block['input']);
      const half = Math.ceil(json.length / 2);
      for (const part of ['', json.slice(0, half), json.slice(half)]) {
        events.push(sse('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: part } }));
      }
    }
    events.push(sse('content_block_stop', { type: 'content_block_stop', index }));
  });
  events.push(
    sse('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: reply.stopReason ?? (reply.toolCalls ? 'tool_use' : 'end_turn'), stop_sequence: null },
      ...(usage ? { usage: { output_tokens: usage.output_tokens } } : {}),
    }),
    sse('message_stop', { type: 'message_stop' }),
  );
  return events;
}

async function answerStream(exchange: Exchange, reply: Omit<AnthropicReply, 'kind'>): Promise<void> {
  await sendSse(exchange, streamEvents(exchange, reply), reply.chunkDelayMs);
}

async function answerBrokenStream(exchange: Exchange, behaviour: AnthropicStreamCut | AnthropicStreamError): Promise<void> {
  const events = streamEvents(exchange, { content: behaviour.content ?? 'one two three four five six seven eight' });
  const error = behaviour.kind === 'stream-error' ? (behaviour.error ?? { type: 'overloaded_error', message: 'Overloaded' }) : null;
  await sendBrokenSse(exchange, events, behaviour.afterEvents, error ? { lastFrame: sse('error', { type: 'error', error }) } : 'cut');
}

function errorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  if (status === 529) return 'overloaded_error';
  if (status >= 500) return 'api_error';
  return 'invalid_request_error';
}

export async function startFakeAnthropicUpstream(options: FakeAnthropicOptions = {}): Promise<FakeAnthropicUpstream> {
  const defaultReply: AnthropicReply = { ...options.defaultReply, kind: 'reply' };
  return startFakeServer<AnthropicBehaviour>(
    {
      errorBody: (status, message) => ({ type: 'error', error: { type: errorType(status), message } }),
      answer: async (exchange, behaviour) => {
        const reply = behaviour ?? defaultReply;
        if (reply.kind !== 'reply' && reply.kind !== 'stream-cut' && reply.kind !== 'stream-error') return;
        if (reply.kind === 'reply' && reply.delayMs) {
          await sleep(reply.delayMs);
          if (exchange.clientGone) return;
        }
        if (exchange.pathname !== '/v1/messages') {
          sendJson(exchange.res, 404, { type: 'error', error: { type: 'not_found_error', message: `No route ${exchange.pathname}` } });
          return;
        }
        if (reply.kind !== 'reply') await answerBrokenStream(exchange, reply);
        else if (exchange.request.body?.stream === true) await answerStream(exchange, reply);
        else answerMessage(exchange, reply);
      },
    },
    options,
  );
}

import { createHash } from 'node:crypto';
import type { ChatRequestBody, EmbeddingsRequestBody, InputTokenizer, ResponsesRequestBody, RouteInputFacts } from '../core/gateway/provider.ts';
import { chatRequestOf } from './mock/mock-responses.ts';
import { estimateChatInputTokens, estimateEmbeddingInputTokens } from './token-estimate.ts';

export type { RouteInputFacts } from '../core/gateway/provider.ts';

/**
 * What admission reserves for the input tokens of a chat request, before the call: held against
 * credit, spend caps and tokens/min, and settled to what the upstream reports once it answers.
 * It counts as the route's upstream does wherever that is known, so a limit that fits N calls
 * admits N; where it is not known it is an upper bound.
 *
 * - OpenAI's encodings (o200k_base, cl100k_base): each text counted with the tokenizer, at any
 *   length up to COUNT_UP_TO_BYTES, plus the chat framing as OpenAI's template renders it
 *   (OPENAI_FRAMING). Tool definitions count as their JSON, which is more than the namespace
 *   OpenAI renders them into.
 * - The mock provider's own count (providers/token-estimate.ts), which is what it reports.
 * - Unknown (`bytes`): byte-level BPE (OpenAI's, Llama 3's, Qwen's, Mistral's Tekken,
 *   DeepSeek's…) turns text into UTF-8 bytes and every token stands for at least one of them, so n
 *   bytes are at most n tokens; SentencePiece with byte fallback (Llama 2, Gemma) likewise, apart
 *   from the one `▁` it may prefix to a text, which the per-message allowance covers. Claude's
 *   tokenizer is not published; the bound assumes of it what holds of every published one, that no
 *   token stands for nothing. The chat framing is TEMPLATE_FRAMING, the most the known templates
 *   add. For English this reserves about five and a half times what o200k_base counts, for
 *   Chinese and code about three (plugins/inference/README.md has the factors by script), while
 *   the call runs.
 * Images count a fixed maximum per image, and everything else the upstream may render into the
 * prompt (tool definitions, tool calls, response formats, unknown parts) counts as its JSON text.
 *
 * A model routed to several upstreams takes the largest count over its routes, since failover may
 * land on any of them: any route with an unknown tokenizer makes it the byte bound, which is at
 * least every other count (bytes ≥ tokens, and TEMPLATE_FRAMING ≥ OPENAI_FRAMING item by item
 * and ≥ the mock's framing).
 */

/** The tokenizers a model may declare in config (`mock` is the mock provider's own, not a choice). */
export const TOKENIZERS = ['o200k_base', 'cl100k_base', 'bytes'] as const;
export type Tokenizer = InputTokenizer;
export type BpeEncoding = Extract<Tokenizer, 'o200k_base' | 'cl100k_base'>;

/** Tokens a chat format adds around the text it carries. */
interface Framing {
  perRequest: number;
  perMessage: number;
  /** Each content part after a message's first. */
  perExtraPart: number;
  perName: number;
  /** Once, when the request defines tools or functions. */
  withTools: number;
}

/**
 * OpenAI's chat format, as its cookbook counts it ("How to count tokens with tiktoken") and as
 * the API reports it: each message is `<|im_start|>{role}<|im_sep|>{content}<|im_end|>`, three
 * tokens besides role and content (the role is counted as text, like every string field), a name
 * one more, and the reply is primed with three (`<|im_start|>assistant<|im_sep|>`). No margin:
 * a reservation above the real count refuses calls that fit; should an upstream count a few
 * tokens more, settling takes them (tokens/min goes briefly into debt, the call is billed in
 * full). Tool definitions are rendered as a TypeScript-like namespace, which takes fewer tokens
 * than their JSON (counted instead) except for its wrapper, `namespace functions { … } //
 * namespace functions` and the cookbook's fixed 7 + 12 per definition list: 24 covers them.
 */
const OPENAI_FRAMING: Framing = { perRequest: 3, perMessage: 3, perExtraPart: 1, perName: 1, withTools: 24 };

/**
 * Chat templates of models whose tokenizer is unknown. Messages: ChatML, Llama 3, Gemma and
 * Mistral put at most six marker tokens around a role and its content; 8 also covers a
 * SentencePiece `▁` prefix. Per request: the reply primer (at most 5 tokens) and a system header
 * a template may add of its own: Llama 3.1's dated "Cutting Knowledge Date" header (about 25
 * tokens), gpt-oss's harmony system message (about 50); 64 covers the largest. With tools: the
 * tool-use instructions a template or API adds, the largest documented being Anthropic's (530
 * tokens for Claude 3 Opus, 346 for Claude 4).
 */
const TEMPLATE_FRAMING: Framing = { perRequest: 64, perMessage: 8, perExtraPart: 2, perName: 2, withTools: 600 };

/**
 * One image of a model whose image costs are unknown: Qwen2-VL's default resolution limit (16,384
 * visual tokens) is the largest of the open models'; Claude's images count at most about 1,600.
 */
export const UNKNOWN_MODEL_IMAGE_TOKENS = 16_384;

/**
 * A text longer than this (in UTF-16 units, at most 48 KB of UTF-8) is counted a slice at a time,
 * letting the event loop run between slices: tokenizing runs at 4 to 10 MB/s in JavaScript, and
 * counting a long prompt at once would stall every other call meanwhile (10 to 25 ms per 100 KB).
 * Shorter texts cost about half a microsecond a word (bench/input-token-count.ts).
 */
const COUNT_AT_ONCE_UP_TO_CHARS = 16 * 1024;
/** How long one slice of counting may hold the event loop. */
const SLICE_MS = 2;
/**
 * More text than this is bounded by its bytes: it is more than any OpenAI model's context window
 * (gpt-4.1: about a million tokens, 4 MB of English), so the upstream refuses it anyway, and
 * counting it would only cost CPU before the call is admitted.
 */
const COUNT_UP_TO_BYTES = 4 * 1024 * 1024;

/** A model's routes, reduced to what counting its input needs; worked out once, from config. */
export interface InputTokenProfile {
  /** How its routes count, each once; the reservation is the largest of their counts. */
  readonly tokenizers: readonly Tokenizer[];
  readonly imageTokens: number;
}

export function inputTokenProfile(routes: readonly RouteInputFacts[]): InputTokenProfile {
  const imageTokens = Math.max(0, ...routes.map((route) => route.maxImageTokens));
  // The byte bound is at least every other count: nothing else need be counted.
  if (routes.length === 0 || routes.some((route) => route.tokenizer === 'bytes')) return { tokenizers: ['bytes'], imageTokens };
  return { tokenizers: [...new Set(routes.map((route) => route.tokenizer))], imageTokens };
}

/** What the count reads of a chat request: messages, and the prompt-side fields next to them. */
export interface ChatInput {
  readonly messages: readonly unknown[];
  readonly [field: string]: unknown;
}

type Measure = (text: string) => number;

const utf8Bytes: Measure = (text) => Buffer.byteLength(text, 'utf8');

/**
 * The input tokens a chat request reserves on a model (see the module comment): a number at once,
 * or a promise when a text is long enough to be counted in slices.
 */
export function chatInputTokenBound(body: ChatInput, profile: InputTokenProfile): number | Promise<number> {
  let reserved = 0;
  let later: Array<Promise<number>> | undefined;
  for (const tokenizer of profile.tokenizers) {
    const count = inputTokensBy(tokenizer, body, profile.imageTokens);
    if (typeof count === 'number') reserved = Math.max(reserved, count);
    else (later ??= []).push(count);
  }
  return later ? Promise.all(later).then((counts) => Math.max(reserved, ...counts)) : reserved;
}

function inputTokensBy(tokenizer: Tokenizer, body: ChatInput, imageTokens: number): number | Promise<number> {
  // The request passed the chat schema (plugins/inference/chat-request-schema.ts), which is what the mock reads.
  if (tokenizer === 'mock') return estimateChatInputTokens(body as unknown as ChatRequestBody);
  const bytes = tally(body, TEMPLATE_FRAMING, imageTokens, utf8Bytes);
  if (tokenizer === 'bytes' || bytes.text > COUNT_UP_TO_BYTES) return bytes.fixed + bytes.text;
  const encoding = loadedEncoding(tokenizer);
  // Still loading: this call keeps the byte bound rather than wait.
  if (!encoding) return bytes.fixed + bytes.text;
  const long: string[] = [];
  const counted = tally(body, OPENAI_FRAMING, imageTokens, (text) => {
    if (text.length <= COUNT_AT_ONCE_UP_TO_CHARS) return encoding.count(text);
    long.push(text);
    return 0;
  });
  const now = counted.fixed + counted.text;
  if (long.length === 0) return now;
  return long.reduce((sum, text) => sum.then(async (total) => total + (await encoding.countInSlices(text))), Promise.resolve(now));
}

/**
 * The input tokens a Responses API request reserves: counted as the chat request it amounts to,
 * with the same tokenizers, framing and bounds. `instructions` is a system message, a string
 * `input` a user message, and each input item a message of its own whose every field counts
 * (message content parts by their text, images at the route's maximum, function calls and their
 * outputs, reasoning and other items as their text), which is at least what the upstream renders
 * of it; tools, `tool_choice` and `text.format` count as their JSON. The mock counts the chat
 * request it reads the body as (providers/mock/mock-responses.ts), exactly what it reports.
 */
export function responsesInputTokenBound(body: ResponsesRequestBody, profile: InputTokenProfile): number | Promise<number> {
  const mock = profile.tokenizers.includes('mock') ? estimateChatInputTokens(chatRequestOf(body)) : 0;
  const tokenizers = profile.tokenizers.filter((tokenizer) => tokenizer !== 'mock');
  if (tokenizers.length === 0) return mock;
  const counted = chatInputTokenBound(responsesAsChatInput(body), { ...profile, tokenizers });
  return typeof counted === 'number' ? Math.max(mock, counted) : counted.then((total) => Math.max(mock, total));
}

function responsesAsChatInput(body: ResponsesRequestBody): ChatInput {
  const messages: unknown[] = [];
  const instructions = body['instructions'];
  if (typeof instructions === 'string') messages.push({ role: 'system', content: instructions });
  const input = body['input'];
  if (typeof input === 'string') messages.push({ role: 'user', content: input });
  else if (Array.isArray(input)) messages.push(...input);
  const text = body['text'];
  const format = text !== null && typeof text === 'object' ? (text as Record<string, unknown>)['format'] : undefined;
  return { messages, tools: body['tools'], tool_choice: body['tool_choice'], response_format: format };
}

/**
 * The input tokens an embeddings request reserves on a model: each text counted with the model's
 * tokenizer where it is known and loaded (embeddings have no chat framing), its UTF-8 bytes
 * otherwise; token arrays count their length. A text longer than one counting slice is bounded by
 * its bytes rather than counted: embedding inputs are short, and the bound is still a bound.
 */
export function embeddingInputTokenBound(input: EmbeddingsRequestBody['input'], profile: InputTokenProfile): number {
  let reserved = 0;
  for (const tokenizer of profile.tokenizers) {
    if (tokenizer === 'mock') {
      reserved = Math.max(reserved, estimateEmbeddingInputTokens(input));
      continue;
    }
    const encoding = tokenizer === 'bytes' ? undefined : loadedEncoding(tokenizer);
    const measure: Measure = encoding ? (text) => (text.length <= COUNT_AT_ONCE_UP_TO_CHARS ? encoding.count(text) : utf8Bytes(text)) : utf8Bytes;
    let total = 0;
    if (typeof input === 'string') total = measure(input);
    else for (const item of input as unknown[]) total += typeof item === 'string' ? measure(item) : Array.isArray(item) ? item.length : 1;
    reserved = Math.max(reserved, total);
  }
  return reserved;
}

interface Tally {
  /** Framing and images: the same whatever measures the text. */
  fixed: number;
  text: number;
}

const IMAGE_PART_TYPES = new Set(['image_url', 'image', 'input_image']);

/** Walks the request as the upstream renders it; anything malformed counts as its JSON text. */
function tally(body: ChatInput, framing: Framing, imageTokens: number, measure: Measure): Tally {
  let fixed = framing.perRequest;
  let text = 0;
  for (const message of body.messages) {
    fixed += framing.perMessage;
    if (message === null || typeof message !== 'object') {
      text += measureJson(message, measure);
      continue;
    }
    const fields = message as Record<string, unknown>;
    // Every field may reach the prompt (role, name, tool_call_id, tool_calls, refusal…).
    for (const key in fields) {
      const value = fields[key];
      if (key === 'content') {
        if (typeof value === 'string') {
          text += measure(value);
        } else if (Array.isArray(value)) {
          for (let i = 0; i < value.length; i += 1) {
            if (i > 0) fixed += framing.perExtraPart;
            const part: unknown = value[i];
            const fieldsOfPart = part !== null && typeof part === 'object' ? (part as Record<string, unknown>) : null;
            if (fieldsOfPart && typeof fieldsOfPart['text'] === 'string') text += measure(fieldsOfPart['text']);
            else if (fieldsOfPart && IMAGE_PART_TYPES.has(fieldsOfPart['type'] as string)) fixed += imageTokens;
            else text += measureJson(part, measure);
          }
        } else if (value !== null && value !== undefined) {
          text += measureJson(value, measure);
        }
      } else if (typeof value === 'string') {
        text += measure(value);
        if (key === 'name') fixed += framing.perName;
      } else if (value !== null && typeof value === 'object') {
        text += measureJson(value, measure);
      }
    }
  }
  if (body['tools'] != null || body['functions'] != null) {
    fixed += framing.withTools;
    text += measureJson(body['tools'], measure) + measureJson(body['functions'], measure);
  }
  text += measureJson(body['tool_choice'], measure) + measureJson(body['function_call'], measure) + measureJson(body['response_format'], measure);
  return { fixed, text };
}

function measureJson(value: unknown, measure: Measure): number {
  if (value === undefined || value === null) return 0;
  return measure(typeof value === 'string' ? value : JSON.stringify(value));
}

interface EncodingApi {
  countTokens(text: string, options: { disallowedSpecial: Set<string> }): number;
  /** One array of tokens per piece of the text, in order: counting them all is the count, a piece at a time. */
  encodeGenerator(text: string, options: { disallowedSpecial: Set<string> }): Generator<number[], unknown, undefined>;
}

/** `<|endoftext|>` and the like in a prompt are plain text to the upstream (and to this count), not a reason to throw. */
const AS_PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

/** An encoding ready to count: short texts at once, long ones a slice of time at a time. */
interface LoadedEncoding {
  count: Measure;
  countInSlices(text: string): Promise<number>;
}

const encodings = new Map<BpeEncoding, LoadedEncoding>();
const loading = new Map<BpeEncoding, Promise<void>>();

/**
 * Loads an encoding's tables (o200k_base takes ~0.3 s and ~40 MB of memory, cl100k_base about
 * half): only those a configured model needs, when the inference plugin starts
 * (loadEncodingsOf), or on the first prompt that needs them.
 */
export function loadEncoding(encoding: BpeEncoding): Promise<void> {
  let pending = loading.get(encoding);
  if (!pending) {
    const imported: Promise<EncodingApi> = encoding === 'o200k_base' ? import('gpt-tokenizer/encoding/o200k_base') : import('gpt-tokenizer/encoding/cl100k_base');
    pending = imported.then((api) => {
      encodings.set(encoding, rememberingCounts(api));
    });
    loading.set(encoding, pending);
  }
  return pending;
}

/** Loads the encodings these models count with; a failed load leaves them the byte bound, which is still a bound. */
export async function loadEncodingsOf(profiles: Iterable<InputTokenProfile>): Promise<void> {
  const needed = new Set<BpeEncoding>();
  for (const profile of profiles) for (const tokenizer of profile.tokenizers) if (tokenizer === 'o200k_base' || tokenizer === 'cl100k_base') needed.add(tokenizer);
  await Promise.all([...needed].map(loadEncoding));
}

/** Texts this long are remembered with their count: a conversation resends its whole history every turn. */
const REMEMBER_FROM_CHARS = 1024;
/** How many texts' counts are remembered per encoding (by digest: 16 bytes and a number each). */
const REMEMBERED_TEXTS = 100_000;

/**
 * Counts long texts once: digesting a text costs about a hundredth of tokenizing it. Texts are
 * known by their SHA-1 digest, so no prompt is kept in memory beyond its call. The least recently
 * used are forgotten first (a Map iterates in insertion order).
 */
function rememberingCounts(api: EncodingApi): LoadedEncoding {
  const counts = new Map<string, number>();
  const remember = (digest: string, counted: number) => {
    counts.delete(digest);
    if (counts.size >= REMEMBERED_TEXTS) counts.delete(counts.keys().next().value!);
    counts.set(digest, counted);
    return counted;
  };
  const digestOf = (text: string) => createHash('sha1').update(text).digest('base64');
  return {
    count(text) {
      if (text === '') return 0;
      if (text.length < REMEMBER_FROM_CHARS) return api.countTokens(text, AS_PLAIN_TEXT);
      const digest = digestOf(text);
      return remember(digest, counts.get(digest) ?? api.countTokens(text, AS_PLAIN_TEXT));
    },
    async countInSlices(text) {
      const digest = digestOf(text);
      const known = counts.get(digest);
      if (known !== undefined) return remember(digest, known);
      let counted = 0;
      let sliceStarted = performance.now();
      for (const tokens of api.encodeGenerator(text, AS_PLAIN_TEXT)) {
        counted += tokens.length;
        if (performance.now() - sliceStarted < SLICE_MS) continue;
        // Other calls run between slices.
        await new Promise<void>((resolve) => setImmediate(resolve));
        sliceStarted = performance.now();
      }
      return remember(digest, counted);
    },
  };
}

function loadedEncoding(encoding: BpeEncoding): LoadedEncoding | undefined {
  const loaded = encodings.get(encoding);
  // A failed load leaves the byte bound in use, which is still a bound.
  if (!loaded) loadEncoding(encoding).catch(() => undefined);
  return loaded;
}

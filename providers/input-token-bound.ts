import { createHash } from 'node:crypto';
/**
 * An upper bound on the input tokens of a chat request, for reservations only: what admission
 * holds against credit, spend caps and tokens/min before the call. Billing uses what the upstream
 * reports (or, when it reports nothing, token-estimate.ts); this must never be below that.
 *
 * Text is bounded one of two ways:
 * - With the model family's tokenizer (OpenAI's o200k_base and cl100k_base): the exact count of
 *   each text, plus OpenAI's documented chat framing and a margin.
 * - By UTF-8 bytes, for every other tokenizer: byte-level BPE (OpenAI's, Llama 3's, Qwen's,
 *   Mistral's Tekken, DeepSeek's…) turns text into UTF-8 bytes and every token stands for at
 *   least one of them, so n bytes are at most n tokens; SentencePiece with byte fallback (Llama 2,
 *   Gemma) likewise, apart from the one `▁` it may prefix to a text, which the per-message
 *   allowance covers. Claude's tokenizer is not published; the bound assumes of it what holds of
 *   every published one, that no token stands for nothing.
 * Images count a fixed maximum per image, and everything else the upstream may render into the
 * prompt (tool definitions, tool calls, response formats, unknown parts) counts as its JSON text.
 *
 * A model routed to several upstreams takes the largest bound over its routes, since failover may
 * land on any of them: any route with an unknown tokenizer makes it the byte bound, which is at
 * least every tokenizer's (bytes ≥ tokens, and TEMPLATE_FRAMING ≥ OPENAI_FRAMING item by item).
 */

/** How a route's upstream counts input: a named BPE encoding, or unknown (`bytes`). */
export const TOKENIZERS = ['o200k_base', 'cl100k_base', 'bytes'] as const;
export type Tokenizer = (typeof TOKENIZERS)[number];
export type BpeEncoding = Exclude<Tokenizer, 'bytes'>;

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
 * Added to OpenAI's documented counts: they are the cookbook's ("How to count tokens with
 * tiktoken"), which OpenAI says may drift by a few tokens as models change.
 */
const OPENAI_SAFETY_MARGIN = 16;

/**
 * OpenAI's chat format: each message is `<|im_start|>{role}<|im_sep|>{content}<|im_end|>`, three
 * tokens besides role and content (four for gpt-3.5-turbo-0301's; four taken), a name one more,
 * and the reply is primed with three (`<|im_start|>assistant<|im_sep|>`). Tool definitions are
 * rendered as a TypeScript-like namespace, which takes fewer tokens than their JSON (counted
 * instead) except for its wrapper, `namespace functions { … } // namespace functions` and the
 * cookbook's fixed 7 + 12 per definition list: 24 covers them.
 */
const OPENAI_FRAMING: Framing = { perRequest: 3 + OPENAI_SAFETY_MARGIN, perMessage: 4, perExtraPart: 1, perName: 1, withTools: 24 };

/**
 * Chat templates of models whose tokenizer is unknown. Messages: ChatML, Llama 3, Gemma and
 * Mistral put at most six marker tokens around a role and its content; 8 also covers a
 * SentencePiece `▁` prefix. Per request: templates may add a system header of their own (Llama
 * 3.1's dated "Cutting Knowledge Date" header, gpt-oss's harmony system message, about 50 tokens).
 * With tools: the tool-use instructions a template or API adds, the largest documented being
 * Anthropic's (up to 530 tokens for Claude 3 Opus, 346 for Claude 4).
 */
const TEMPLATE_FRAMING: Framing = { perRequest: 128, perMessage: 8, perExtraPart: 2, perName: 2, withTools: 1_000 };

/**
 * One image of a model whose image costs are unknown: Qwen2-VL's default resolution limit (16,384
 * visual tokens) is the largest of the open models'; Claude's images count at most about 1,600.
 */
export const UNKNOWN_MODEL_IMAGE_TOKENS = 16_384;

/**
 * Below this many bytes of text the byte bound is used even where the tokenizer is known. It then
 * exceeds the real count by at most ~6,000 tokens while the call runs (1.5 ¢ at $2.50/M, less than
 * the output the same call reserves), and costs under a microsecond, where tokenizing costs 10 to
 * 40 µs for a 200-byte prompt and about a millisecond at 8 KB: as much as or more than the gateway
 * spends on a whole call (~150 µs of CPU).
 */
const TOKENIZE_FROM_BYTES = 8 * 1024;
/**
 * Above this the byte bound again: tokenizing runs at 4 to 10 MB/s in JavaScript and blocks the
 * event loop meanwhile (10 to 25 ms for 100 KB), so a longer prompt is bounded by its bytes.
 */
const TOKENIZE_UP_TO_BYTES = 128 * 1024;

/** A model's routes, reduced to what bounding its input needs; worked out once, from config. */
export interface InputTokenProfile {
  /** Encodings to count with; empty when the byte bound is the largest (some route is `bytes`). */
  readonly encodings: readonly BpeEncoding[];
  readonly framing: Framing;
  readonly imageTokens: number;
}

export interface RouteInputFacts {
  tokenizer: Tokenizer;
  /** The largest input-token count of one image on this route. */
  maxImageTokens: number;
}

export function inputTokenProfile(routes: readonly RouteInputFacts[]): InputTokenProfile {
  const imageTokens = Math.max(0, ...routes.map((route) => route.maxImageTokens));
  if (routes.length === 0 || routes.some((route) => route.tokenizer === 'bytes')) return { encodings: [], framing: TEMPLATE_FRAMING, imageTokens };
  const encodings = [...new Set(routes.map((route) => route.tokenizer as BpeEncoding))];
  return { encodings, framing: OPENAI_FRAMING, imageTokens };
}

/** What the bound reads of a chat request: messages, and the prompt-side fields next to them. */
export interface ChatInput {
  readonly messages: readonly unknown[];
  readonly [field: string]: unknown;
}

type Measure = (text: string) => number;

const utf8Bytes: Measure = (text) => Buffer.byteLength(text, 'utf8');

/** The reservation bound on a chat request's input tokens (see the module comment). */
export function chatInputTokenBound(body: ChatInput, profile: InputTokenProfile): number {
  const bytes = tally(body, profile, utf8Bytes);
  if (profile.encodings.length === 0 || bytes.text < TOKENIZE_FROM_BYTES || bytes.text > TOKENIZE_UP_TO_BYTES) return bytes.fixed + bytes.text;
  let counted = 0;
  for (const encoding of profile.encodings) {
    const count = loadedCounter(encoding);
    // Still loading: this call keeps the byte bound rather than wait.
    if (!count) return bytes.fixed + bytes.text;
    counted = Math.max(counted, tally(body, profile, count).text);
  }
  return bytes.fixed + counted;
}

interface Tally {
  /** Framing and images: the same whatever measures the text. */
  fixed: number;
  text: number;
}

const IMAGE_PART_TYPES = new Set(['image_url', 'image', 'input_image']);

/** Walks the request as the upstream renders it; anything malformed counts as its JSON text. */
function tally(body: ChatInput, profile: InputTokenProfile, measure: Measure): Tally {
  const { framing } = profile;
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
            else if (fieldsOfPart && IMAGE_PART_TYPES.has(fieldsOfPart['type'] as string)) fixed += profile.imageTokens;
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
}

/** `<|endoftext|>` and the like in a prompt are plain text to the upstream (and to this count), not a reason to throw. */
const AS_PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

const counters = new Map<BpeEncoding, Measure>();
const loading = new Map<BpeEncoding, Promise<void>>();

/**
 * Loads an encoding's tables (o200k_base takes ~0.3 s and ~40 MB of memory, cl100k_base about
 * half): only those a configured model needs, the first time a prompt is long enough to use them.
 */
export function loadEncoding(encoding: BpeEncoding): Promise<void> {
  let pending = loading.get(encoding);
  if (!pending) {
    const imported: Promise<EncodingApi> = encoding === 'o200k_base' ? import('gpt-tokenizer/encoding/o200k_base') : import('gpt-tokenizer/encoding/cl100k_base');
    pending = imported.then((api) => {
      counters.set(
        encoding,
        rememberingCounts((text) => (text === '' ? 0 : api.countTokens(text, AS_PLAIN_TEXT))),
      );
    });
    loading.set(encoding, pending);
  }
  return pending;
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
function rememberingCounts(count: Measure): Measure {
  const counts = new Map<string, number>();
  return (text) => {
    if (text.length < REMEMBER_FROM_CHARS) return count(text);
    const digest = createHash('sha1').update(text).digest('base64');
    let counted = counts.get(digest);
    if (counted !== undefined) {
      counts.delete(digest);
    } else {
      counted = count(text);
      if (counts.size >= REMEMBERED_TEXTS) counts.delete(counts.keys().next().value!);
    }
    counts.set(digest, counted);
    return counted;
  };
}

function loadedCounter(encoding: BpeEncoding): Measure | undefined {
  const count = counters.get(encoding);
  // A failed load leaves the byte bound in use, which is still a bound.
  if (!count) loadEncoding(encoding).catch(() => undefined);
  return count;
}

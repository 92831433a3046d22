import type { CallOptions, Modality, Usage } from '../../core/gateway/provider.ts';
import type { MeteredUnits } from '../../core/gateway/inference-admission.ts';
import type { Credential } from '../../core/identity/credential.ts';
import type { ApiError } from '../../core/kernel/errors.ts';
import type { CatalogueModel } from './model-catalogue.ts';
import type { RouteCandidate } from './route-planner.ts';

/**
 * What one /v1 capability tells the gateway call path (gateway-call.ts): everything that differs
 * between chat, embeddings, responses, images, audio… The path does the rest, the same way for
 * each: model lookup, input guards, admission, route planning with failover, metrics, request log,
 * rate-limit headers, client-disconnect abort, SSE with a commit point.
 *
 * `B` is the parsed body, `R` what one attempt on a route returns, `E` a streamed event.
 */
export interface GatewayCapability<M extends Modality = Modality, B = unknown, R = unknown, E = unknown> {
  /** The route, e.g. `/v1/embeddings` (always POST). */
  readonly endpoint: string;
  /** Which member of a provider serves it (core/gateway/provider.ts). */
  readonly modality: M;
  /** The spec's browser rule covers it (chat, speech): a page must opt in (browser-rule.ts). */
  readonly browserRule?: true;
  /**
   * The body is multipart/form-data rather than JSON (transcriptions): the HTTP adapter reads it
   * into an object (fields as strings, `name[]` fields as arrays, each file as
   * `{ data, filename, contentType }`) and answers 413 over these limits while it is still arriving.
   */
  readonly upload?: { maxFileBytes: number; maxBodyBytes: number };
  /**
   * Where the capability speaks another API than OpenAI's (Anthropic's Messages API): the key is
   * also taken from `x-api-key`, and every error on the route, auth and body parsing included, is
   * answered with `errorBody` instead of the envelope (same status, headers and code in logs).
   */
  readonly foreignApi?: { xApiKey: true; errorBody(error: ApiError): unknown };
  /**
   * Checks the body's shape: 400 `invalid_parameter` with `param` naming the field. A promise only
   * where the body must be read first (an uploaded file's audio length).
   */
  parse(body: unknown): B | Promise<B>;
  /** The model the body names (looked up in the catalogue: 404 when unknown or not allowed). */
  modelOf(body: B): unknown;
  /** What the model must offer for this call (400 naming the field); absent: nothing beyond its routes. */
  check?(body: B, model: CatalogueModel, credential: Credential): void;
  /**
   * After `check`: the body completed with the model's defaults (images: its first size and
   * quality), so that what is reserved, sent upstream and billed is one and the same.
   */
  withModelDefaults?(body: B, model: CatalogueModel): B;
  /**
   * The body with each input text (what data guardrails read: messages, prompts, embedding
   * inputs…) replaced by `map(text)`. Returns `body` itself when nothing changed.
   */
  mapInputTexts(body: B, map: (text: string) => string): B;
  /** The reservation's upper bounds and the locally counted input (a number at once where it can). */
  estimate(body: B, model: CatalogueModel): CallEstimate | Promise<CallEstimate>;
  /** One JSON attempt on one route (throws UpstreamError to fail over). */
  attempt(candidate: RouteCandidate<M>, body: B, options: CallOptions): Promise<R>;
  /** What the successful attempt is billed on and what the client receives. */
  answer(result: R, body: B, model: CatalogueModel): CallAnswer;
  /** Present when the capability streams (SSE) for bodies that ask it to. */
  readonly streaming?: StreamingCapability<M, B, E>;
}

export interface CallEstimate {
  inputTokens: number;
  maxOutputTokens: number;
  /** The largest count of every other unit the call may use (images, characters, searches…). */
  units?: MeteredUnits;
  /** The input as counted locally: what a call cut off by a crash or a broken stream is billed for. */
  countedInputTokens: number;
}

export interface CallAnswer {
  usage: Usage;
  units?: MeteredUnits;
  /**
   * What the client receives (200): JSON unless `contentType` is set, in which case it is sent as
   * it is: text, bytes, or bytes as they arrive (an AsyncIterable, e.g. an upstream's audio), in
   * which case the call is settled when the last byte has gone (or the transfer broke).
   */
  body: unknown;
  contentType?: string;
  /** What the request log keeps where the body or answer is no JSON to keep (uploaded files, audio); default both as they are. */
  logged?: { request: unknown; response: unknown };
}

export interface StreamingCapability<M extends Modality, B, E> {
  /** Whether this body asks for a stream. */
  wanted(body: B): boolean;
  /** Opens the upstream stream on one route (throws UpstreamError before the first event to fail over). */
  open(candidate: RouteCandidate<M>, body: B, options: CallOptions): AsyncIterable<E>;
  /**
   * The commit point: the first event the client must see (chat: the first content chunk). Until
   * it, events are held back and another route may still replace the stream; after it, a failure
   * can only be reported in-band.
   */
  commits(event: E): boolean;
  /** One writer per call: forwards events, and says what the stream was billed on. */
  writer(body: B, model: CatalogueModel, call: StreamCall): StreamWriter<E>;
}

export interface StreamCall {
  requestId: string;
  /** Billed when the stream ends before the upstream reports usage. */
  countedInputTokens: number;
  /** Whether the account keeps bodies (then `settle().logged` is stored). */
  logBodies: boolean;
}

/**
 * Where events go: the SSE response (sse-response.ts) with its backpressure. A write answers a
 * promise only when the client is slow, to be awaited before the next; otherwise nothing.
 */
export interface EventSink {
  data(payload: unknown): Promise<void> | undefined;
  event(name: string, payload: unknown): Promise<void> | undefined;
}

export interface StreamWriter<E> {
  /** Forwards one event; as the sink, a promise only while the client is slow (the call path awaits it then). */
  write(event: E, sink: EventSink): Promise<void> | undefined;
  /** After the upstream's last event: trailing frames (chat: the usage chunk and `[DONE]`). */
  close(sink: EventSink): Promise<void>;
  /** After the commit point, a failure in-band (chat: a `data:` error envelope). */
  fail(error: ApiError, sink: EventSink): Promise<void>;
  /** What the stream is billed on, however it ended; `logged` is the answer kept in the request log. */
  settle(): { usage: Usage; units?: MeteredUnits; logged?: unknown };
}

// Capabilities of every modality live in one registry; each is typed where it is defined.
// biome-ignore lint/suspicious/noExplicitAny: see above
export type AnyCapability = GatewayCapability<any, any, any, any>;

import type { Credential } from '../identity/credential.ts';
import { defineExtensionPoint } from '../kernel/extension-points.ts';
import type { Usage } from './provider.ts';

/**
 * The governance seam on the /v1 hot path. Before the upstream call the gateway asks for an
 * Admission (rate limits, concurrency, budget and credit reservations all happen in admit, which
 * throws 429/402); afterwards it reports the outcome exactly once, whatever happened (success,
 * upstream failure, client gone), so everything admit took is settled or released.
 */
/**
 * What a call is billed on besides tokens, one field per unit (absent: the call has none of it).
 * Prices per unit live in the model's price config (plugins/inference/inference-config.ts).
 */
export interface MeteredUnits {
  /** Hosted web searches the upstream ran (Responses `web_search`), billed per search. */
  webSearches?: number;
  /** Generated images, billed per image by size and quality. */
  images?: { count: number; size: string; quality: string | null };
  /** Input characters of a speech synthesis. */
  characters?: number;
  /** Seconds of audio transcribed, read from the file itself. */
  audioSeconds?: number;
}

export interface AdmissionRequest {
  credential: Credential;
  requestId: string;
  endpoint: string;
  model: string;
  stream: boolean;
  /**
   * Upper-bound estimate for reservations: tokens, and the largest count of every other unit the
   * call may use (web searches: the model's builtinTools.webSearch.reservePerCall). Its characters
   * and audio seconds are the request's own, counted before the call: a call whose process dies
   * before it settles is billed them with its counted input (plugins/metering/README.md).
   */
  estimate: { inputTokens: number; maxOutputTokens: number; units?: MeteredUnits };
  /**
   * The call's input as counted locally, not the reservation's upper bound: what the call is billed
   * if the process dies before it settles (admit journals it before the call is sent upstream).
   */
  countedInputTokens: number;
  /**
   * A call run against a spend hold (core/gateway/spend-holds.ts), e.g. a batch line: it takes no
   * money from the counters (the hold has it), no rate window and no concurrency lease, is billed at
   * the model's batch price, and its request-log row names the hold and the batch.
   */
  hold?: CallHold;
}

/** The spend hold a call runs against and the batch it is a line of. */
export interface CallHold {
  holdId: string;
  batchId: string;
}

export interface CallOutcome {
  /** HTTP status the client saw (499 when it went away first). */
  status: number;
  errorCode: string | null;
  /** What the upstream reported (or we estimated); null when no upstream call produced anything. */
  usage: Usage | null;
  /** The call's other billed units, as the upstream reported or the gateway counted them. */
  units?: MeteredUnits;
  provider: string | null;
  upstreamModel: string | null;
  attempts: number;
  latencyMs: number;
  /** Time to first streamed content. */
  ttftMs: number | null;
  /** Request and response bodies, kept only where the account logs them. */
  bodies?: { request: unknown; response: unknown };
}

export interface Admission {
  /** Response headers to add (x-ratelimit-*). */
  readonly headers: Readonly<Record<string, string>>;
  /** Whether the account keeps prompt and response bodies: pass them in the outcome if so. */
  readonly logBodies: boolean;
  /**
   * Settles everything admit took. Never throws; calling it twice has no further effect. Where the
   * settlement goes on in the background, returns the promise of its end, which settles either way
   * (a failure is the admission's to log, and is never left unhandled): the call's settle span ends
   * with it. Nothing else waits for it.
   */
  finish(outcome: CallOutcome): PromiseLike<unknown> | undefined;
}

/** A call refused before admission took anything (a guardrail block): logged, billed nothing. */
export interface RefusedCall {
  credential: Credential;
  requestId: string;
  endpoint: string;
  model: string;
  status: number;
  errorCode: string;
}

export interface InferenceAdmission {
  admit(request: AdmissionRequest): Promise<Admission>;
  /** Records a call refused before admit (request-log row without bodies, zero cost). Never throws. */
  refused(call: RefusedCall): void;
  /**
   * The rate-limit headers for a response that took nothing (a model list, an error before
   * admission), read without consuming: every gateway response carries them.
   */
  peekHeaders(credential: Credential): Promise<Readonly<Record<string, string>>>;
  /**
   * Spends one request of the key's, project's and account's requests-per-minute allowance and
   * nothing else (no money, no tokens, no concurrency slot): for work that is not a model call but
   * must count against rate limits (batch polling, tool calls). Returns the rate-limit headers;
   * throws 429 rate_limit_exceeded, with retry-after, as admit does.
   */
  chargeRequest(credential: Credential): Promise<Readonly<Record<string, string>>>;
}

const EMPTY_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/** Used when no metering plugin is enabled: admits everything and records nothing. */
export const openAdmission: InferenceAdmission = {
  admit: async () => ({ headers: EMPTY_HEADERS, logBodies: false, finish: () => undefined }),
  refused: () => undefined,
  peekHeaders: async () => EMPTY_HEADERS,
  chargeRequest: async () => EMPTY_HEADERS,
};

/**
 * The extension point: a metering plugin provides its admission in register(); the inference
 * plugin reads it in routes(), when every plugin has registered, and gets openAdmission when none
 * does, never asking whether one exists.
 */
export const InferenceAdmissionPoint = defineExtensionPoint<InferenceAdmission>('InferenceAdmission', { default: openAdmission });

import type { MeteredUnits } from './inference-admission.ts';
import type { Credential } from '../identity/credential.ts';
import { defineExtensionPoint } from '../kernel/extension-points.ts';

/** One /v1 call made by code rather than over HTTP (a batch line, the account assistant). */
export interface GatewayCallRequest {
  /** A registered JSON endpoint, e.g. `/v1/chat/completions` or `/v1/embeddings`. */
  endpoint: string;
  /** The body exactly as a client would send it. */
  body: unknown;
  /** Shown in the request log; one is made when absent. */
  requestId?: string;
  /** Aborting it ends the call as a client going away would (499, what was used is billed). */
  signal?: AbortSignal;
  hold?: { holdId: string; batchId: string };
}

/** What the client would have received: errors are answers here (status and envelope), never thrown. */
export interface GatewayCallAnswer {
  status: number;
  headers: Readonly<Record<string, string>>;
  body: unknown;
}

/**
 * Runs /v1 calls for a credential outside HTTP, through the same path as the routes: model access,
 * input guards, rate limits, money reservation, failover, metrics and the request log. Streaming
 * is for HTTP clients only: a body asking for a stream is answered 400.
 */
export interface GatewayCalls {
  run(credential: Credential, request: GatewayCallRequest): Promise<GatewayCallAnswer>;
  /** The endpoints run() accepts, e.g. `POST /v1/embeddings`. */
  endpoints(): readonly string[];
  check(credential: Credential, request: { endpoint: string; body: unknown }): Promise<CheckedCall>;
}

export interface CheckedCall {
  model: string;
  batch: boolean;
  estimate: { inputTokens: number; maxOutputTokens: number; units?: MeteredUnits };
}

/** Provided by the inference plugin; absent when it is not enabled. */
export const GatewayCallsPoint = defineExtensionPoint<GatewayCalls>('GatewayCalls');

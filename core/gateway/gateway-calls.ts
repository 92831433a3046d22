import type { Credential } from '../identity/credential.ts';
import { defineExtensionPoint } from '../kernel/extension-points.ts';
import type { CallHold, MeteredUnits } from './inference-admission.ts';

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
  /**
   * The spend hold the call runs against (a batch line): no money, rate window or concurrency slot
   * is taken, the batch price is billed and the request log marks the row with the batch (see
   * AdmissionRequest.hold).
   */
  hold?: CallHold;
}

/** What check() found a call would be: its model, whether batches accept it, and the most it may use. */
export interface CheckedCall {
  model: string;
  /** The model's `svc_batch`. */
  batch: boolean;
  estimate: { inputTokens: number; maxOutputTokens: number; units?: MeteredUnits };
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
  /**
   * What run() would make of the call, without making it: the body parsed as the route parses it
   * (400 naming the field), the model looked up for the credential (404 as the route), the
   * capability's checks (400; a body asking for a stream too), and the upper-bound estimate that
   * admission would reserve. Sends nothing upstream and takes nothing; errors are thrown (ApiError).
   */
  check(credential: Credential, request: Pick<GatewayCallRequest, 'endpoint' | 'body'>): Promise<CheckedCall>;
  /** The endpoints run() accepts, e.g. `POST /v1/embeddings`. */
  endpoints(): readonly string[];
}

/** Provided by the inference plugin; absent when it is not enabled. */
export const GatewayCallsPoint = defineExtensionPoint<GatewayCalls>('GatewayCalls');

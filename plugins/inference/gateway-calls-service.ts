import { CallSignal } from '../../core/gateway/call-signal.ts';
import type { CheckedCall, GatewayCallAnswer, GatewayCallRequest, GatewayCalls } from '../../core/gateway/gateway-calls.ts';
import type { CallHold } from '../../core/gateway/inference-admission.ts';
import type { Credential } from '../../core/identity/credential.ts';
import { errorAnswer } from '../../core/kernel/error-answer.ts';
import { ApiError, ClientGoneError } from '../../core/kernel/errors.ts';
import { newRequestId } from '../../core/kernel/request-ids.ts';
import { scopeRefusal } from '../../core/identity/authorization.ts';
import type { AnyCapability } from './capability.ts';
import type { CallExchange, GatewayCallPath } from './gateway-call.ts';

/**
 * The call path for code (batches, the account assistant): the same run as over HTTP, with the
 * caller's credential and the inference scope checked as the route would, and every error answered
 * as the client would have seen it.
 */
export class PathGatewayCalls implements GatewayCalls {
  constructor(
    private readonly path: () => GatewayCallPath,
    private readonly capabilities: ReadonlyMap<string, AnyCapability>,
    private readonly log: { warn(details: Record<string, unknown>, message: string): void },
  ) {}

  endpoints(): readonly string[] {
    return [...this.capabilities.keys()].map((endpoint) => `POST ${endpoint}`);
  }

  /** Throws what the route would answer (ApiError); see GatewayCalls.check. */
  async check(credential: Credential, request: Pick<GatewayCallRequest, 'endpoint' | 'body'>): Promise<CheckedCall> {
    return this.path().check(this.capabilityFor(credential, request.endpoint), credential, request.body);
  }

  async run(credential: Credential, request: GatewayCallRequest): Promise<GatewayCallAnswer> {
    const exchange = new CodeExchange(credential, request, this.log);
    const path = this.path();
    // Errors are answered in the capability's own shape where it speaks another API (Anthropic's).
    const capability = this.capabilities.get(request.endpoint);
    try {
      const answer = await path.run(this.capabilityFor(credential, request.endpoint), exchange);
      // Never null: a code exchange cannot open a stream, so the path refuses streams up front.
      return { status: answer!.status, headers: { ...exchange.headers, ...answer!.headers }, body: answer!.body };
    } catch (error) {
      const answer = errorAnswer(error, exchange.requestId);
      // Refused before admission: where the caller stands, read without consuming (as the HTTP hook does).
      const limits = exchange.admitted ? {} : await path.admission.peekHeaders(credential).catch(() => ({}));
      return { status: answer.status, headers: { ...limits, ...exchange.headers, ...answer.headers }, body: capability?.foreignApi?.errorBody(answer) ?? answer.toEnvelope() };
    } finally {
      exchange.done();
    }
  }

  /** The endpoint's capability, as the route would find it for this credential (404, 403). */
  private capabilityFor(credential: Credential, endpoint: string): AnyCapability {
    const capability = this.capabilities.get(endpoint);
    if (!capability) throw new ApiError('route_not_found', `No gateway endpoint ${endpoint}; these are: ${this.endpoints().join(', ')}`);
    const refusal = scopeRefusal(credential, 'inference');
    if (refusal) throw refusal;
    return capability;
  }
}

class CodeExchange implements CallExchange {
  readonly requestId: string;
  readonly body: unknown;
  readonly signal = new CallSignal();
  readonly hold: CallHold | undefined;
  headers: Readonly<Record<string, string>> = {};
  admitted = false;
  private readonly stopListening: () => void = () => undefined;

  constructor(
    readonly credential: Credential,
    request: GatewayCallRequest,
    private readonly log: { warn(details: Record<string, unknown>, message: string): void },
  ) {
    this.requestId = request.requestId ?? newRequestId();
    this.body = request.body;
    this.hold = request.hold;
    const caller = request.signal;
    if (caller?.aborted) this.signal.abort(new ClientGoneError());
    else if (caller) {
      const abort = () => this.signal.abort(new ClientGoneError());
      caller.addEventListener('abort', abort, { once: true });
      this.stopListening = () => caller.removeEventListener('abort', abort);
    }
  }

  setHeaders(headers: Readonly<Record<string, string>>): void {
    this.headers = headers;
    this.admitted = true;
  }

  warn(details: Record<string, unknown>, message: string): void {
    this.log.warn({ ...details, requestId: this.requestId }, message);
  }

  done(): void {
    this.stopListening();
  }
}

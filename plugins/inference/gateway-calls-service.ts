import { CallSignal } from '../../core/gateway/call-signal.ts';
import type { GatewayCallAnswer, GatewayCallRequest, GatewayCalls } from '../../core/gateway/gateway-calls.ts';
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

  async run(credential: Credential, request: GatewayCallRequest): Promise<GatewayCallAnswer> {
    const exchange = new CodeExchange(credential, request, this.log);
    const path = this.path();
    // Errors are answered in the capability's own shape where it speaks another API (Anthropic's).
    const capability = this.capabilities.get(request.endpoint);
    try {
      if (!capability) throw new ApiError('route_not_found', `No gateway endpoint ${request.endpoint}; these are: ${this.endpoints().join(', ')}`);
      const refusal = scopeRefusal(credential, 'inference');
      if (refusal) throw refusal;
      const answer = await path.run(capability, exchange);
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
}

class CodeExchange implements CallExchange {
  readonly requestId: string;
  readonly body: unknown;
  readonly signal = new CallSignal();
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
